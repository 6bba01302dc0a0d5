"""Text from user code made safe to keep in LOG_DIR: its control characters written visibly.

Printed output, exception messages and nicknames are read with ``cat`` or ``less -R``: raw, a
control character is an instruction to the terminal; written as ``\\x1b`` it is only text.
Newlines and tabs stay. :func:`configure_cli_logging` does the same for every command's log lines.
Imports only the standard library, so the center and the edge both use it.
"""

from __future__ import annotations

import logging
import re

__all__ = ["configure_cli_logging", "visible_controls"]

# Unicode's control characters (category Cc: C0, DEL and C1, whose CSI U+009B terminals obey too),
# but for the newline and the tab.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible_controls(text: str) -> str:
    """``text`` with each control character but newline and tab written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _VisibleFormatter(logging.Formatter):
    """Log lines with control characters written visibly: a log line may quote user text (an
    exception message, a nickname) and must not drive the organizer's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return visible_controls(super().format(record))


def configure_cli_logging(level: int) -> None:
    """The root logger of a command-line program (never called by the library): ``level``, one
    line a record, control characters shown as ``\\xNN``."""
    handler = logging.StreamHandler()
    handler.setFormatter(_VisibleFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
