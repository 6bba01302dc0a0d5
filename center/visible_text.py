"""Text from user code made safe to keep in LOG_DIR: its control characters written visibly.

A participant's printed output, exception messages and nicknames end up in text files that the
organizer reads with ``cat`` or ``less -R`` and in pages. Raw, a control character there is an
instruction to the terminal (an OSC 52 clipboard write, cursor moves that paint a fake table over
the real one); written as ``\\x1b`` it is only text. Newlines and tabs stay.

Beside ``center.errors``, below every layer of the center: imports only the standard library.
"""

from __future__ import annotations

import re

__all__ = ["visible_controls"]

# Unicode's control characters (category Cc: C0, DEL and C1, whose CSI U+009B terminals obey too),
# but for the newline and the tab.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible_controls(text: str) -> str:
    """``text`` with each control character but newline and tab written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
