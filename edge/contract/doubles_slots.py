"""The doubles action layout, one index per active slot, and which indices are legal now.

Numbered as poke-env's ``DoublesEnv`` numbers them (``edge.maple.doubles_action_helper`` has the
table): 0 pass, 1–6 a switch to the i-th Pokémon of ``battle.team``, then moves by request slot and
target, +20 per gimmick. :func:`slot_legal` reads the request; the doubles mask of the Maple agent
and the center's check of an order (``edge.contract.legality``) both use it, so an
order the mask allows is never refused.
"""

from __future__ import annotations

from poke_env.battle import DoubleBattle, Move
from poke_env.player import PassBattleOrder, SingleBattleOrder

from edge.contract.showdown_request import slot_request_moves

__all__ = [
    "MOVE_BASE",
    "PASS",
    "SlotAction",
    "action_size",
    "decode",
    "encode_move",
    "slot_legal",
]

PASS = 0
MOVE_BASE = 7
TARGETS = (-2, -1, 0, 1, 2)
TERA_GIMMICK = 4


_GIMMICKS_BY_GEN = {6: 1, 7: 2, 8: 3, 9: 4}


def action_size(gen: int) -> int:
    """Indices per slot, as ``DoublesEnv.get_action_space_size(gen)`` (not imported: it loads
    poke-env's whole environment machinery into every worker)."""
    return MOVE_BASE + 4 * 5 * (_GIMMICKS_BY_GEN.get(gen, 0) + 1)


def encode_move(slot: int, target: int, tera: bool) -> int:
    """The index of move slot ``slot`` (0-based) at ``target``, terastallized or not."""
    return MOVE_BASE + 5 * slot + (target + 2) + 20 * (TERA_GIMMICK if tera else 0)


class SlotAction:
    """One slot's part of an action, decoded: ``kind`` is pass, switch or move."""

    __slots__ = ("kind", "move_slot", "target", "team_index", "tera")

    def __init__(
        self,
        kind: str,
        team_index: int = -1,
        move_slot: int = -1,
        target: int = 0,
        tera: bool = False,
    ) -> None:
        self.kind, self.team_index, self.move_slot = kind, team_index, move_slot
        self.target, self.tera = target, tera


def decode(index: int) -> SlotAction:
    """What one slot's index means (not whether it is legal)."""
    if index == PASS:
        return SlotAction("pass")
    if 1 <= index < MOVE_BASE:
        return SlotAction("switch", team_index=index - 1)
    rest = index - MOVE_BASE
    gimmick, within = divmod(rest, 20)
    return SlotAction(
        "move", move_slot=within // 5, target=within % 5 - 2, tera=gimmick == TERA_GIMMICK
    )


def _slot_move(battle: DoubleBattle, slot: int, move_id: str) -> Move | None:
    for move in battle.available_moves[slot]:
        if move.id == move_id:
            return move
    return None


def slot_legal(battle: DoubleBattle, slot: int) -> dict[int, SingleBattleOrder]:
    """The legal indices of one slot and their poke-env orders (switches by Pokémon)."""
    legal: dict[int, SingleBattleOrder] = {}
    forced = battle.force_switch
    if any(forced) and not forced[slot]:
        return {PASS: PassBattleOrder()}
    if not battle.trapped[slot] or forced[slot]:
        switchable = {id(mon) for mon in battle.available_switches[slot]}
        for i, mon in enumerate(list(battle.team.values())[:6]):
            if id(mon) in switchable:
                legal[1 + i] = SingleBattleOrder(mon)
    if all(forced) and len(battle.available_switches[0]) == 1:
        legal[PASS] = PassBattleOrder()  # one replacement for two slots: one of them passes
    active = battle.active_pokemon[slot]
    if active is not None and not forced[slot]:
        for k, entry in enumerate(slot_request_moves(battle, slot)[:4]):
            if entry.disabled:
                continue
            move = _slot_move(battle, slot, entry.id)
            if move is None:
                continue
            for target in battle.get_possible_showdown_targets(move, active):
                legal[encode_move(k, target, False)] = SingleBattleOrder(move, move_target=target)
                if battle.can_tera[slot] and move.id not in ("struggle", "recharge"):
                    legal[encode_move(k, target, True)] = SingleBattleOrder(
                        move, move_target=target, terastallize=True
                    )
    if not legal:
        legal[PASS] = PassBattleOrder()  # e.g. a fainted Pokémon with no replacement, Commander
    return legal
