"""Showdown replay pages (``replays/ID.html``), built from the battle's protocol log.

The report builds one when asked (``sep_report --pages``), from blue's stream without requests and
timestamps, the usernames replaced by the players' names. Older runs' pages (poke-env's, with the
log raw in a ``<script>``, where nicknames can run script) are replaced by escaped ones.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from center.evaluation.recording.showdown_page import (
    POLICY_MARK,
    player_label,
    showdown_replay_page,
)
from center.evaluation.records import BattleRecord
from center.files import write_atomically
from center.report.protocol import read_streams
from center.report.sources import SIDES, LogDir, Player

__all__ = ["renew_showdown_page", "showdown_page_wanted"]

logger = logging.getLogger(__name__)


def showdown_log(
    frames: list[str], players: Mapping[str, Player], labels: Mapping[str, str]
) -> str:
    """The battle log Showdown's player reads, from one side's protocol frames."""
    tag = ""
    lines = []
    for frame in frames:
        for line in frame.split("\n"):
            if line.startswith(">"):
                tag = tag or line
            elif not line.startswith(("|request|", "|t:|")):
                lines.append(line)
    text = "\n".join([tag, *lines] if tag else lines)
    # Longest first, so that no username is replaced inside another one.
    for side in sorted(players, key=lambda s: -len(players[s].username)):
        if players[side].username:
            text = text.replace(players[side].username, labels[side])
    return text


def showdown_page_wanted(data: LogDir, record: BattleRecord, build: bool) -> bool:
    """Whether ``record``'s Showdown page must be written: it is missing and ``build`` asks for
    it, or poke-env's template wrote it (unescaped)."""
    page = data.path / data.replay_path(record)
    try:
        with page.open(encoding="utf-8", errors="replace") as f:
            return POLICY_MARK not in f.read(4096)
    except FileNotFoundError:
        return build


def renew_showdown_page(data: LogDir, record: BattleRecord, *, build: bool = False) -> None:
    """Write ``record``'s Showdown page from its log when :func:`showdown_page_wanted`."""
    if not showdown_page_wanted(data, record, build):
        return
    page = data.path / data.replay_path(record)
    players = data.players.get(record.battle_id, {})
    labels = {
        side: player_label(
            players[side].log_name if side in players else data.name(getattr(record, side)), side
        )
        for side in SIDES
    }
    try:
        streams = read_streams(data.path / data.log_path(record))
    except FileNotFoundError:  # no log to rebuild it from: the page shows none, and runs none
        streams = {}
    frames = streams.get("blue") or next(iter(streams.values()), [])
    text = showdown_log(frames, players, labels)
    logger.info("%s: writing its Showdown replay page", record.battle_id)
    page.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(
        page, showdown_replay_page(record.battle_id, text, labels["blue"], labels["red"])
    )
