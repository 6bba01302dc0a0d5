"""The legality rules: what the current request allows, an order checked against it and rebuilt
from it, the default order, and the mask a policy is shown.

Read from the request Showdown sent the player (a :class:`ShowdownRequest`), never from what the
player's Agent believes: the center, ``PokemonEnv``, the edge's agents and the checker judge with
these functions, so none accepts what another refuses; only a command rebuilt here reaches
Showdown. Singles is the one-slot case of doubles. The orders' grammar: docs/contract.md and
docs/doubles.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle
from poke_env.data import to_id_str
from poke_env.player import BattleOrder

from edge.contract.showdown_request import (
    ActiveSlot,
    RequestMove,
    RequestPokemon,
    ShowdownRequest,
    request_of,
)
from edge.errors import InvalidActionError

__all__ = [
    "MAX_INVALID_RETRIES",
    "MAX_ORDER_LENGTH",
    "SlotChoices",
    "asks_decision",
    "canonical_order",
    "decision_required",
    "default_order",
    "legal_choices",
    "named",
    "policy_mask",
    "slot_targets",
    "team_order",
    "team_size",
]

MAX_ORDER_LENGTH = 200

#: How many illegal actions in a row a player may choose before the default move is played for it
#: (by the match runner and by the single-agent environment alike).
MAX_INVALID_RETRIES = 3

_TARGET = re.compile(r"[-+]?[12]")
_NO_TERA = ("struggle", "recharge")
#: Moves that take no target whatever their data says (poke-env's SPECIAL_MOVES).
_UNTARGETED = ("struggle", "recharge", "fight")
#: A move's target type (the request's ``target``) → the Showdown targets a doubles order may name,
#: from the user's side: "self", "ally" or a foe position (1, 2); 0 is no target.
_TARGETS_OF: dict[str, tuple[str | int, ...]] = {
    "adjacentAlly": ("ally",),
    "adjacentAllyOrSelf": ("ally", "self"),
    "adjacentFoe": (1, 2),
    "any": ("ally", 1, 2),
    "normal": ("ally", 1, 2),
}


# -- what the request asks -------------------------------------------------------------------------


def asks_decision(request: ShowdownRequest | None) -> bool:
    """Whether ``request`` asks the player for a decision (not a ``wait``)."""
    return request is not None and not request.wait


def decision_required(battle: AbstractBattle) -> bool:
    """Whether the battle's current request asks this player for a decision."""
    return not battle.finished and asks_decision(request_of(battle))


def team_size(request: ShowdownRequest | None) -> int:
    """How many Pokémon a team-preview choice must bring (``maxChosenTeamSize``, else all)."""
    n_team = len(request.party) if request is not None else 0
    size = (request.max_chosen_team_size if request is not None else None) or n_team
    return int(min(size, n_team))


def team_order(request: ShowdownRequest | None, picks: Sequence[int]) -> str:
    """Build ``/team`` for 0-based team indices, checking count, range and uniqueness."""
    n_team = len(request.party) if request is not None else 0
    need = team_size(request)
    chosen = [int(p) for p in picks]
    if len(set(chosen)) != len(chosen):
        raise InvalidActionError(f"team choice {list(picks)} repeats a Pokémon")
    if any(p < 0 or p >= n_team for p in chosen):
        raise InvalidActionError(f"team choice {list(picks)} is out of range 0..{n_team - 1}")
    if len(chosen) < need:
        raise InvalidActionError(f"team choice {list(picks)} brings {len(chosen)}, needs {need}")
    return "/team " + "".join(str(p + 1) for p in chosen)


def named(party: Sequence[RequestPokemon], word: str) -> list[int]:
    """The party positions (1-based) of the Pokémon ``word`` names, by name or by species id
    (``rotomwash`` for a Rotom-Wash named "Rotom")."""
    wanted = to_id_str(word)
    return [
        position
        for position, mon in enumerate(party, start=1)
        if wanted in (to_id_str(mon.name), mon.species)
    ]


@dataclass(frozen=True)
class SlotChoices:
    """What one active slot may choose now, read from the request as poke-env reads it."""

    #: the party positions (1-based) it may switch to
    switches: frozenset[int]
    #: its moves in request order (at most 4), disabled ones included
    moves: tuple[RequestMove, ...]
    can_tera: bool
    #: its Pokémon may not switch out (and it is not down)
    trapped: bool
    #: another slot must switch and this one passes (doubles)
    only_pass: bool
    #: a pass is legal (doubles: one replacement for two slots, or nothing it can do)
    may_pass: bool


def legal_choices(request: ShowdownRequest) -> list[SlotChoices]:
    """What each active slot may choose now (one entry in singles, two in doubles), by the rules
    :func:`canonical_order` judges an order's parts with."""
    return [
        SlotChoices(
            switches=frozenset(_switches(request, slot)),
            moves=tuple(_moves(request, slot)),
            can_tera=_can_tera(request, slot),
            trapped=_trapped(request, slot),
            only_pass=_only_pass(request, slot),
            may_pass=_may_pass(request, slot),
        )
        for slot in range(request.slots)
    ]


# One slot's rules, read from the request as poke-env reads it: an order's part is judged by the
# rules of its own kind (a move, a switch, a pass), so checking one order reads only what it needs.


def _active(request: ShowdownRequest, slot: int) -> ActiveSlot | None:
    return request.active[slot] if slot < len(request.active) else None


def _forced(request: ShowdownRequest) -> list[bool]:
    """Per slot, whether it must switch (all False in a move request)."""
    return request.force_switch or [False] * request.slots


def _only_pass(request: ShowdownRequest, slot: int) -> bool:
    """Another slot must switch and this one passes (doubles)."""
    forced = _forced(request)
    return any(forced) and not forced[slot]


def _down(request: ShowdownRequest, slot: int) -> bool:
    """The slot's Pokémon has fainted, or nothing is active."""
    party = request.party
    return (slot < len(party) and party[slot].fainted) or not request.active


def _trapped(request: ShowdownRequest, slot: int) -> bool:
    """The slot's Pokémon may not switch out (and it is not down)."""
    here = _active(request, slot)
    return here is not None and here.trapped and not _down(request, slot)


def _may_switch_to(request: ShowdownRequest, position: int) -> bool:
    """Whether the Pokémon at party ``position`` (1-based) may come in. Showdown's rule as poke-env
    reads it: a benched Pokémon that has not fainted, or, while a Pokémon is being revived (Revival
    Blessing), a fainted one."""
    party = request.party
    if not 1 <= position <= len(party):
        return False
    mon = party[position - 1]
    return mon.fainted if any(p.reviving for p in party) else not mon.active and not mon.fainted


def _switches(request: ShowdownRequest, slot: int) -> list[int]:
    """The party positions (1-based) the slot may switch to."""
    if _trapped(request, slot):
        return []
    return [i for i in range(1, len(request.party) + 1) if _may_switch_to(request, i)]


def _chooses_move(request: ShowdownRequest, slot: int) -> bool:
    """The slot may use a move now: its Pokémon is not down, not made to switch, and does not
    command (Commander)."""
    party = request.party
    commanding = slot < len(party) and party[slot].commanding
    return not (_down(request, slot) or _forced(request)[slot] or commanding)


def _moves(request: ShowdownRequest, slot: int) -> list[RequestMove]:
    """The slot's moves in request order (at most 4, disabled ones included); none when it may not
    use one now (a team preview or a wait asks for none)."""
    if request.wait or request.team_preview:
        return []
    here = _active(request, slot)
    return here.moves[:4] if here is not None and _chooses_move(request, slot) else []


def _can_tera(request: ShowdownRequest, slot: int) -> bool:
    """The slot's Pokémon may terastallize with its move."""
    here = _active(request, slot)
    return here is not None and bool(here.can_terastallize) and _chooses_move(request, slot)


def _may_pass(request: ShowdownRequest, slot: int) -> bool:
    """A pass is legal besides :func:`_only_pass`'s (doubles: one replacement for two slots, or
    nothing it can do). Singles has no pass: its one slot always has a move or a switch."""
    if request.slots == 1:
        return False
    switches = _switches(request, slot)
    if not _only_pass(request, slot) and all(_forced(request)) and len(switches) == 1:
        return True
    # e.g. a fainted Pokémon with no replacement, Commander
    return not switches and all(m.disabled for m in _moves(request, slot))


def slot_targets(slots: int, slot: int, move: RequestMove) -> list[int]:
    """The targets an order of ``move`` may name from ``slot`` (0: none; singles names none)."""
    kinds = _TARGETS_OF.get(move.target) if slots > 1 else None
    if kinds is None or move.id in _UNTARGETED:
        return [0]
    own = {"self": -(slot + 1), "ally": -(2 - slot)}
    return [own[k] if isinstance(k, str) else k for k in kinds]


# -- an order checked and rebuilt ------------------------------------------------------------------


def default_order(request: ShowdownRequest | None) -> str:
    """Showdown's default choice for ``request`` (the first Pokémon at team preview)."""
    if request is not None and request.team_preview:
        return team_order(request, list(range(team_size(request))))
    return "/choose default"


def canonical_order(request: ShowdownRequest | None, order: BattleOrder | str) -> str:
    """The Showdown command for ``order`` if ``request`` allows it; raise InvalidActionError if
    not. An in-process side passes its battle's request (:func:`request_of`)."""
    if request is None or not asks_decision(request):
        raise InvalidActionError("no decision is required now")
    message = order.message if isinstance(order, BattleOrder) else order
    if not isinstance(message, str):
        raise InvalidActionError(f"an order must be a BattleOrder or a string, got {type(order)}")
    if len(message) > MAX_ORDER_LENGTH:
        raise InvalidActionError(f"order longer than {MAX_ORDER_LENGTH} characters")
    text = " ".join(message.strip().split())
    if request.team_preview:
        return _team(request, text)
    if not text.startswith("/choose "):
        raise InvalidActionError(f"expected '/choose …' for a move request, got {text!r}")
    body = text[len("/choose ") :].strip()
    if body.lower() == "default":
        return "/choose default"
    parts = [part.strip() for part in body.split(",")]
    if len(parts) != request.slots:
        raise InvalidActionError(
            f"an order names one choice per active slot ({request.slots}, comma-separated), "
            f"got {text!r}"
        )
    chosen = [_part(request, slot, part) for slot, part in enumerate(parts)]
    switched = [c.position for c in chosen if c.kind == "switch"]
    if len(set(switched)) != len(switched):
        raise InvalidActionError(f"both slots switch to the same Pokémon in {text!r}")
    if sum(c.tera for c in chosen) > 1:
        raise InvalidActionError(f"both slots terastallize in {text!r}; only one Pokémon may")
    return "/choose " + ", ".join(c.text for c in chosen)


def _team(request: ShowdownRequest, text: str) -> str:
    match = re.fullmatch(r"/team ([1-9](?:\s*,?\s*[1-9])*)", text)
    if not match:
        raise InvalidActionError(f"expected '/team <positions>' at team preview, got {text!r}")
    picks = [int(c) - 1 for c in match.group(1) if c.isdigit()]
    return team_order(request, picks)


@dataclass(frozen=True)
class _Chosen:
    """One slot's part of an order, accepted: its canonical text."""

    kind: str
    text: str
    position: int = -1
    tera: bool = False


def _part(request: ShowdownRequest, slot: int, part: str) -> _Chosen:
    words = part.split(" ")
    kind, args = words[0].lower(), words[1:]
    where = f"slot {slot + 1}: " if request.slots > 1 else ""
    if kind == "pass" and not args:
        if not (_only_pass(request, slot) or _may_pass(request, slot)):
            raise InvalidActionError(f"{where}cannot pass now (it must move or switch)")
        return _Chosen("pass", "pass")
    if _only_pass(request, slot):
        raise InvalidActionError(f"{where}only the other slot chooses now (pass)")
    if kind == "switch" and args:
        return _switch(request, slot, " ".join(args), where)
    if kind == "move" and args:
        return _move(request, slot, args, where)
    raise InvalidActionError(f"{where}unrecognised choice {part!r}")


def _switch(request: ShowdownRequest, slot: int, arg: str, where: str) -> _Chosen:
    party = request.party
    if _trapped(request, slot):
        raise InvalidActionError(f"{where}the active Pokémon is trapped")
    position = -1
    if arg.isdigit() and 1 <= int(arg) <= len(party):
        position = int(arg)
    else:
        matches = named(party, arg)
        if len(matches) > 1:
            raise InvalidActionError(
                f"{where}{arg!r} names {len(matches)} Pokémon of the team: switch by party position"
            )
        position = matches[0] if matches else -1
    if not _may_switch_to(request, position):
        raise InvalidActionError(f"{where}cannot switch to {arg!r} now")
    # Singles names the Pokémon as poke-env does; doubles by its position.
    text = f"switch {party[position - 1].name}" if request.slots == 1 else f"switch {position}"
    return _Chosen("switch", text, position=position)


def _move(request: ShowdownRequest, slot: int, args: list[str], where: str) -> _Chosen:
    tera, target = False, 0
    while len(args) > 1:  # Showdown reads the target and the gimmick from the end, in any order
        if args[-1].lower() == "terastallize" and not tera:
            tera, args = True, args[:-1]
        elif _TARGET.fullmatch(args[-1]) and target == 0:
            target, args = int(args[-1]), args[:-1]
        else:
            break
    named_as = " ".join(args)
    wanted = to_id_str(named_as)
    moves = _moves(request, slot)
    k = next(
        (
            i
            for i, move in enumerate(moves)
            if (wanted.isdigit() and int(wanted) - 1 == i) or to_id_str(move.id) == wanted
        ),
        None,
    )
    if k is None:
        if not moves:
            raise InvalidActionError(f"{where}no move can be chosen now (a switch, or a pass)")
        raise InvalidActionError(f"{where}move {named_as!r} is not one of its moves now")
    move = moves[k]
    if move.disabled:
        raise InvalidActionError(f"{where}move {named_as!r} is disabled now")
    targets = slot_targets(request.slots, slot, move)
    if target not in targets:
        raise InvalidActionError(
            f"{where}move {named_as!r} at target {target} is not legal now "
            f"(its targets: {sorted(targets)})"
        )
    if tera and (not _can_tera(request, slot) or move.id in _NO_TERA):
        raise InvalidActionError(f"{where}terastallization is not available now")
    suffix = " terastallize" if tera else ""
    if request.slots > 1:
        text = f"move {k + 1}{suffix}" + (f" {target}" if target else "")
    elif move.id == "recharge":
        text = "move 1"
    else:
        text = f"move {move.id}{suffix}"
    return _Chosen("move", text, tera=tera)


# -- the mask a policy is shown --------------------------------------------------------------------


def policy_mask(mask: Any, action_space: gymnasium.Space[Any]) -> np.ndarray | None:
    """The ``info["action_mask"]`` a policy is given for the Agent's ``mask``.

    The center does not trust a mask: one that is not an integer or boolean array (of ``n``
    entries for a ``Discrete(n)`` space) is ignored, and without one every action is allowed
    (``Discrete`` spaces; other spaces get None). A decide request's policy step sees the mask
    this function gives, as the center would show it.
    """
    size = int(action_space.n) if isinstance(action_space, gymnasium.spaces.Discrete) else None
    checked: np.ndarray | None = None
    if mask is not None:
        try:
            array = np.asarray(mask)
            if array.dtype.kind in "biu" and (size is None or array.shape == (size,)):
                checked = array.astype(np.int8)
        except Exception:  # e.g. a ragged list: ignored
            checked = None
    if checked is None and size:
        checked = np.ones(size, dtype=np.int8)
    return checked
