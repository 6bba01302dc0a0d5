"""User text in LOG_DIR's files, pages and log lines: control characters shown, Showdown's page escaped."""

from __future__ import annotations

import html
import re
import subprocess
import sys

from center.csp import script_hash_source
from center.evaluation.recording.showdown_page import SHOWDOWN_CLIENT, showdown_replay_page
from edge.visible_text import visible_controls

HOSTILE_LOG = "\n".join(
    [
        ">battle-gen1ou-1",
        "|switch|p1a: </script><script>`|Tauros|100/100",
        "|switch|p1a: <!--<script>|Snorlax|100/100",  # would make the next </script> not close
        "|switch|p1a: </SCRIPT >&amp;\"'|Chansey|100/100",
        "|-message|a\\/b \x1b]52;c;cHduZWQ=\x07\x9b2J",
        "|win|Attacker (blue)",
    ]
)


def test_control_characters_are_written_visibly_but_newlines_and_tabs_stay() -> None:
    text = "a\tb\nc\x1b[2J\rd\x00\x7f\x9b31m\x07é ✓\u2028"
    assert visible_controls(text) == "a\tb\nc\\x1b[2J\\x0dd\\x00\\x7f\\x9b31m\\x07é ✓\u2028"


def test_showdown_page_holds_the_log_as_escaped_text_only() -> None:
    page = showdown_replay_page("b-1", HOSTILE_LOG, "Attacker <b> (blue)", "Victim (red)")
    # The only script elements are the page's own three: no text of the battle spells a tag.
    assert len(re.findall(r"<script", page, re.I)) == 3
    assert len(re.findall(r"</script", page, re.I)) == 3
    assert "<!--" not in page
    held = re.search(r'<div id="sep-battle-log" hidden>(.*?)</div>', page, re.S)
    assert held is not None and html.unescape(held.group(1)) == visible_controls(HOSTILE_LOG)
    assert "Attacker &lt;b&gt; (blue)" in page


def test_showdown_page_policy_allows_its_own_inline_script_and_showdowns_client_only() -> None:
    page = showdown_replay_page("b-1", HOSTILE_LOG, "blue", "red")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert policy is not None
    directives = dict(d.strip().split(" ", 1) for d in policy.group(1).split(";"))
    inline = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(inline) == 1
    assert directives["script-src"].split() == [script_hash_source(inline[0]), SHOWDOWN_CLIENT]
    assert directives["default-src"] == "'none'"
    assert f'<script src="{SHOWDOWN_CLIENT}/js/replay-embed.js"></script>' in page


def test_command_log_lines_show_control_characters_visibly():
    # A log line may quote user text (an exception message): on the organizer's terminal an OSC 52
    # clipboard write or cursor moves in it must stay text.
    script = (
        "import logging\n"
        "from edge.visible_text import configure_cli_logging\n"
        "configure_cli_logging(logging.INFO)\n"
        "logging.getLogger('side').info('failed: %s', '\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2Jdone')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "failed: \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2Jdone" in done.stderr
