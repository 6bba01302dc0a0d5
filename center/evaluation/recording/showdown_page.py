"""Showdown's replay page of a battle (``replays/ID.html``), built from escaped text only.

poke-env's template puts the battle log raw in a ``<script>`` element, where a nickname spelling
``</script><script>`` runs as script. Here the log is escaped text in a hidden element, handed to
Showdown's player by a fixed script of ours, and a Content-Security-Policy allows only scripts from
play.pokemonshowdown.com and that one inline script, by its hash.
"""

from __future__ import annotations

import html

from center.csp import script_hash_source
from edge.visible_text import visible_controls

__all__ = [
    "POLICY_MARK",
    "SHOWDOWN_CLIENT",
    "player_label",
    "showdown_replay_csp",
    "showdown_replay_page",
]

#: Where Showdown's replay player and everything it loads (scripts, styles, sprites, sounds) live.
SHOWDOWN_CLIENT = "https://play.pokemonshowdown.com"

# Runs before replay-embed.js, whose player reads the log element when the page has loaded.
_HAND_OVER = (
    "document.querySelector('script.battle-log-data').textContent = "
    "document.getElementById('sep-battle-log').textContent.replace(/\\//g, '\\\\/');"
)


def showdown_replay_csp() -> str:
    """The page's Content-Security-Policy: Showdown's client and our one inline script."""
    client = SHOWDOWN_CLIENT
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {script_hash_source(_HAND_OVER)} {client}",
            f"style-src 'unsafe-inline' {client}",
            f"img-src {client} data:",
            f"font-src {client}",
            f"media-src {client}",
            f"connect-src {client}",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )


#: In every page built here, near its top; never in one built from poke-env's template.
POLICY_MARK = '<meta http-equiv="Content-Security-Policy"'

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
{policy_mark} content="{csp}">
<title>{title}</title>
<style>
html, body {{ font-family: Verdana, sans-serif; font-size: 10pt; margin: 0; padding: 0; }}
body {{ padding: 12px 0; }}
.battle-log-inline {{ border: 1px solid #aaa; background: #eef2f5; color: black;
  max-width: 640px; margin: 0 auto 80px; padding-bottom: 5px; }}
.subtle {{ color: #3a4a66; }}
</style>
</head>
<body>
<div class="wrapper replay-wrapper" style="max-width:1180px;margin:0 auto">
<input type="hidden" name="replayid" value="{battle_id}">
<div class="battle"></div>
<div class="battle-log"></div>
<div class="replay-controls"></div>
<div class="replay-controls-2"></div>
<h1 style="font-weight:normal;text-align:center"><strong>Battle replay</strong><br>{battle_id}<br>
<span class="subtle">{blue}</span> vs. <span class="subtle">{red}</span></h1>
<div id="sep-battle-log" hidden>{log}</div>
<script type="text/plain" class="battle-log-data"></script>
</div>
<div class="battle-log battle-log-inline" style="display:none"></div>
<script>{hand_over}</script>
<script src="{client}/js/replay-embed.js"></script>
<p style="text-align:center">Played back by Showdown's replay player from {client}; without a
network, the offline page beside this one shows the battle.</p>
</body>
</html>
"""


def showdown_replay_page(battle_id: str, log: str, blue: str, red: str) -> str:
    """The page that plays ``log`` (a Showdown battle log, one protocol line a line) in Showdown's
    replay player; ``blue`` and ``red`` name the players. Every text is escaped."""

    def text(value: str) -> str:
        return html.escape(visible_controls(value), quote=True)

    return _PAGE.format(
        policy_mark=POLICY_MARK,
        csp=showdown_replay_csp(),
        title=text(f"{battle_id}: {blue} vs. {red}"),
        battle_id=text(battle_id),
        blue=text(blue),
        red=text(red),
        log=text(log),
        hand_over=_HAND_OVER,
        client=SHOWDOWN_CLIENT,
    )


def player_label(log_name: str, side: str) -> str:
    """How the page and its log name a player: ``logName (side)``."""
    # The name goes into Showdown's protocol lines too: keep it to harmless characters.
    safe = "".join(c for c in log_name if c.isprintable() and c not in "|<>&\"'")
    return f"{safe.strip() or side} ({side})"
