"""Stable slot views of a poke-env Battle, shared by StateObserver and ActionHelper, so that "move 2"
in the observation is the move action 1 uses and "bench 1" the Pokémon action 8 switches to.

How the slots are ordered: docs/observation.md, "Slots".
"""

from __future__ import annotations

from poke_env.battle import AbstractBattle, DoubleBattle, Move, Pokemon

from edge.contract.showdown_request import request_party, slot_request_moves

MAX_MOVES = 4
MAX_BENCH = 2


def own_bench(battle: AbstractBattle) -> list[Pokemon]:
    """Non-active, non-fainted Pokémon of the player, in party order (all of them, unpadded)."""
    return [mon for mon in request_party(battle) if not mon.active and not mon.fainted]


def opponent_bench(battle: AbstractBattle) -> list[Pokemon]:
    """The opponent's revealed non-active Pokémon, in the order they were seen."""
    return [mon for mon in battle.opponent_team.values() if not mon.active]


def move_slots(battle: AbstractBattle) -> list[Move | None]:
    """The active Pokémon's moves by slot (length MAX_MOVES, None where there is no move).

    Slot order is the request's; when the request lists a single locked or special move (Outrage,
    Recharge, Struggle), the slots show the Pokémon's full moveset instead, so that the observation
    still describes the four moves the Pokémon knows.
    """
    slots: list[Move | None] = [None] * MAX_MOVES
    mon = battle.active_pokemon
    if mon is None:
        return slots
    known = list(mon.moves.values())
    entries = slot_request_moves(battle)
    ordered: list[Move] = []
    if len(entries) > 1:
        for entry in entries:
            move = mon.moves.get(entry.id)
            if move is not None:
                ordered.append(move)
    if len(ordered) < len(entries) or not ordered:
        ordered = known
    for i, move in enumerate(ordered[:MAX_MOVES]):
        slots[i] = move
    return slots


def doubles_move_slots(battle: DoubleBattle, slot: int) -> list[Move | None]:
    """Doubles: the moves of the active Pokémon in ``slot`` by move slot, as :func:`move_slots`."""
    slots: list[Move | None] = [None] * MAX_MOVES
    mon = battle.active_pokemon[slot]
    if mon is None:
        return slots
    entries = slot_request_moves(battle, slot)
    ordered = [mon.moves[e.id] for e in entries if e.id in mon.moves]
    if len(entries) <= 1 or len(ordered) < len(entries):
        ordered = list(mon.moves.values())
    for i, move in enumerate(ordered[:MAX_MOVES]):
        slots[i] = move
    return slots
