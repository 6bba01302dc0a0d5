"""sep_main's terminal: the first line says how many battles run at once (runners × battles per
runner), and a log line written while the progress bar is shown (Ray's, say) goes above the bar,
never into its line."""

from __future__ import annotations

import logging
import sys

from center.commands.progress import _at_once, _Progress
from center.scale.launch import ScaleOptions


def test_the_header_counts_the_battles_of_every_runner():
    assert _at_once(2, None) == "2 at a time"
    assert _at_once(2, ScaleOptions(2, None)) == "4 at a time (2 runners × 2)"
    assert _at_once(3, ScaleOptions(1, None)) == "3 at a time (1 runner × 3)"
    assert (
        _at_once(2, ScaleOptions(None, "auto"))
        == "2 at a time on each runner, one runner per Ray node"
    )


def test_a_log_line_during_the_progress_bar_is_written_on_a_line_of_its_own(capsys):
    # As sep_main sets logging up (basicConfig: a handler on stderr), with the bar on stderr too.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    others, root.handlers = root.handlers, []  # another test's command may have set logging up
    root.addHandler(handler)
    try:
        progress = _Progress(3, 0, quiet=False)
        progress(None)
        # A library logger that propagates to the root (Ray's own, set up once Ray is imported,
        # does not: the next test covers it).
        logging.getLogger("some_library").warning("Token authentication is enabled")
        progress(None)
        progress.close()
    finally:
        root.removeHandler(handler)
        root.handlers = others
    lines = capsys.readouterr().err.split("\n")
    (line,) = [line for line in lines if "Token authentication" in line]
    # What the terminal shows of that line: the text after its last carriage return.
    assert line.rsplit("\r", 1)[-1] == "some_library WARNING Token authentication is enabled"
    assert root.handlers.count(handler) == 0 and handler not in root.handlers


def test_rays_log_lines_go_above_the_progress_bar_too(capsys):
    import center.scale.ray_pool  # noqa: F401  (imports Ray, which sets up a logger of its own)

    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    others, root.handlers = root.handlers, []  # another test's command may have set logging up
    root.addHandler(handler)
    try:
        progress = _Progress(3, 0, quiet=False)
        progress(None)
        logging.getLogger("ray._private.authentication").warning("Token authentication is enabled")
        progress.close()
    finally:
        root.removeHandler(handler)
        root.handlers = others
    lines = capsys.readouterr().err.split("\n")
    (line,) = [line for line in lines if "Token authentication" in line]
    assert line.rsplit("\r", 1)[-1] == "Token authentication is enabled"
