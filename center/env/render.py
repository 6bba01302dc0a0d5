"""Text rendering of a battle from one player's view: the turn, both sides' HP, active moves' PP."""

from __future__ import annotations

from poke_env.battle import AbstractBattle, DoubleBattle, Move, Pokemon

from edge.contract.showdown_request import request_party
from edge.maple.battle_view import doubles_move_slots, move_slots


def _mon(mon: Pokemon, own: bool) -> str:
    mark = "*" if mon.active else " "
    if mon.fainted:
        hp = "fainted"
    elif own and mon.max_hp:
        hp = f"{mon.current_hp}/{mon.max_hp} HP"
    else:
        hp = f"{round(mon.current_hp_fraction * 100)}% HP"
    status = f" {mon.status.name}" if mon.status is not None else ""
    return f"  {mark}{mon.species:<18} {hp}{status}"


def render_battle(battle: AbstractBattle) -> str:
    """A few lines describing ``battle`` as its player sees it."""
    lines = [
        f"{battle.battle_tag}  turn {battle.turn}" + ("  (finished)" if battle.finished else "")
    ]
    lines.append(f" {battle.player_username or 'player'} (you):")
    lines += [_mon(mon, True) for mon in request_party(battle)]  # the Pokémon brought
    lines.append(f" {battle.opponent_username or 'opponent'}:")
    lines += [_mon(mon, False) for mon in battle.opponent_team.values()]
    if isinstance(battle, DoubleBattle):  # one line of moves per active slot
        for slot, mon in enumerate(battle.active_pokemon):
            if mon is not None:
                lines.append(f" moves ({'ab'[slot]}): " + _moves(doubles_move_slots(battle, slot)))
    elif battle.active_pokemon is not None:
        lines.append(" moves: " + _moves(move_slots(battle)))
    return "\n".join(lines)


def _moves(slots: list[Move | None]) -> str:
    return ", ".join(f"{m.id} {m.current_pp}/{m.max_pp} PP" for m in slots if m is not None)
