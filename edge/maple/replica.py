"""ReplicaBattle: a player's poke-env Battle, built from the raw protocol frames that player received.

Feeding frames applies them exactly as poke-env's ``Player._handle_battle_message`` does, so the
Battle is the one a poke-env Player would hold. The edge rebuilds each side's battle from the frames
the center forwards (as deltas since the last call), so the user's Agent reads the same ``Battle``
as in-process and never needs the opponent's hidden information; the center's simulator backend
builds its players' battles the same way from the frames it formats.
"""

from __future__ import annotations

import logging

import orjson
from poke_env.battle import AbstractBattle, Battle, DoubleBattle, Pokemon
from poke_env.data import GenData
from poke_env.player import Player
from poke_env.teambuilder import ConstantTeambuilder

from edge.contract.game_type import is_doubles_format
from edge.errors import ReplicaError

logger = logging.getLogger(__name__)

MAX_FRAMES_PER_FEED = 10_000


class ReplicaBattle:
    """Builds and updates one player's ``Battle`` from raw protocol frames (a ``DoubleBattle`` in
    a doubles format, as a poke-env Player would)."""

    def __init__(self, username: str, battle_format: str, team: str | None = None) -> None:
        self.username = username
        self.battle_format = battle_format
        self.gen = GenData.from_format(battle_format).gen
        self._team = ConstantTeambuilder(team) if team else None
        self.battle: AbstractBattle | None = None
        self.frames_applied = 0

    def feed(self, frames: list[str]) -> AbstractBattle | None:
        """Apply ``frames`` (the next raw messages, in order) and return the battle."""
        if len(frames) > MAX_FRAMES_PER_FEED:
            raise ReplicaError(f"too many frames in one call ({len(frames)})")
        for raw in frames:
            if not isinstance(raw, str):
                raise ReplicaError(f"a frame must be a string, got {type(raw).__name__}")
            self._apply(raw)
            self.frames_applied += 1
        return self.battle

    def _apply(self, raw: str) -> None:
        split_messages = [line.split("|") for line in raw.split("\n")]
        head = split_messages[0][0]
        if not head.startswith(">battle-"):
            raise ReplicaError(f"not a battle frame: {raw[:60]!r}")
        tag = head[1:]
        if self.battle is None:
            self.battle = self._create(tag)
        elif tag != self.battle.battle_tag:
            raise ReplicaError(f"frame of battle {tag} fed to replica of {self.battle.battle_tag}")
        battle = self.battle
        try:
            for split_message in split_messages[1:]:
                apply_line(battle, split_message)
        except Exception as exc:
            raise ReplicaError(f"cannot apply frame {self.frames_applied}: {exc!r}") from exc

    def _create(self, battle_tag: str) -> AbstractBattle:
        kind = DoubleBattle if is_doubles_format(self.battle_format) else Battle
        battle = kind(battle_tag=battle_tag, username=self.username, logger=logger, gen=self.gen)
        if self._team is not None:
            # As Player._create_battle does for a player with a constant team.
            battle.teampreview_team = [
                Pokemon(gen=self.gen, teambuilder=mon) for mon in self._team.team
            ]
        return battle


def apply_line(battle: AbstractBattle, split_message: list[str]) -> None:
    """One protocol line, handled as in ``poke_env.player.Player._handle_battle_message``."""
    if len(split_message) <= 1:
        return
    kind = split_message[1]
    if kind == "":
        battle.parse_message(split_message)
    elif kind in Player.MESSAGES_TO_IGNORE:
        return
    elif kind == "request":
        if split_message[2]:
            battle.parse_request(orjson.loads(split_message[2]))
    elif kind == "win":
        battle.won_by(split_message[2])
    elif kind == "tie":
        battle.tied()
    elif kind in ("error", "bigerror", "showteam"):
        # The Player reacts to these (retry a choice, open team sheets); the Battle never parses them.
        return
    else:
        battle.parse_message(split_message)
