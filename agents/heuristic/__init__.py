"""Heuristic: poke-env's SimpleHeuristicsPlayer as a Player module (``getUserPlayerClass``).

In battle it plays what SimpleHeuristicsPlayer chooses. Where that would pick at random (no active
Pokémon on a side, as at a forced switch after a faint) or fails, it plays the strongest move by
base power × type effectiveness × STAB, else the switch with the heuristic's best matchup against
the opponent. At team preview it brings its Pokémon in the order of their mean matchup against the
opponent's six, the best one leading, as many as the format brings. It plays singles formats only:
built for a doubles format it raises, so the preflight and the checker say so in one line.
"""

from __future__ import annotations

import logging
from typing import Any

from poke_env.battle import AbstractBattle, Battle, Pokemon
from poke_env.player import BattleOrder, Player, SimpleHeuristicsPlayer

__all__ = ["HeuristicPlayer", "getUserPlayerClass"]

logger = logging.getLogger(__name__)

STAB = 1.5


def matchup(mon: Pokemon, opponent: Pokemon) -> float:
    """SimpleHeuristicsPlayer's estimate of how ``mon`` fares against ``opponent`` (types, speed)."""
    return float(SimpleHeuristicsPlayer._estimate_matchup(mon, opponent))


class HeuristicPlayer(SimpleHeuristicsPlayer):
    """SimpleHeuristicsPlayer with a fallback that never picks at random and a ranked team."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.format_is_doubles:  # its heuristics read one active Pokémon per side
            raise ValueError(
                f"HeuristicPlayer plays singles formats only; {self.format} is a doubles format"
            )

    def choose_move(self, battle: AbstractBattle) -> BattleOrder:
        if (
            isinstance(battle, Battle)
            and battle.active_pokemon is not None
            and battle.opponent_active_pokemon is not None
        ):
            try:
                return super().choose_move(battle)
            except Exception:  # a corner of the heuristic: the fallback plays on
                logger.warning(
                    "SimpleHeuristicsPlayer failed on turn %s", battle.turn, exc_info=True
                )
        return self.fallback(battle)

    @staticmethod
    def fallback(battle: AbstractBattle) -> BattleOrder:
        """The strongest move, else the best switch, else Showdown's default."""
        active, opponent = battle.active_pokemon, battle.opponent_active_pokemon
        if battle.available_moves and isinstance(active, Pokemon):

            def power(move: Any) -> float:
                value = float(move.base_power)
                if opponent is not None:
                    value *= opponent.damage_multiplier(move)
                return value * (STAB if move.type in active.types else 1.0)

            return Player.create_order(max(battle.available_moves, key=power))
        if battle.available_switches:
            if opponent is None:
                return Player.create_order(battle.available_switches[0])
            best = max(battle.available_switches, key=lambda mon: matchup(mon, opponent))
            return Player.create_order(best)
        return Player.choose_default_move()

    def teampreview(self, battle: AbstractBattle) -> str:
        members = list(battle.team.values())
        opponents = list(battle.opponent_team.values())

        def score(i: int) -> float:
            if not opponents:
                return 0.0
            try:
                return sum(matchup(members[i], o) for o in opponents) / len(opponents)
            except Exception:
                return 0.0

        ranked = sorted(range(len(members)), key=lambda i: (-score(i), i))
        # Showdown's request says how many to bring (poke-env's max_team_size is the party's size).
        brought = ranked[: (battle.last_request or {}).get("maxChosenTeamSize") or len(members)]
        for i in brought:
            members[i]._selected_in_teampreview = True
        return "/team " + "".join(str(i + 1) for i in brought)


def getUserPlayerClass(args: dict[str, Any]) -> type[Player]:
    """The Player class the service builds for each battle."""
    return HeuristicPlayer
