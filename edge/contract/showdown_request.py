"""Showdown's request (the JSON of ``|request|``) as a type, decoded once where it enters.

The fields of Showdown's ``sim/side.ts`` request types that this project reads, in snake case
(``forceSwitch`` is ``force_switch``); others are ignored, so a newer Showdown decodes as before.
:func:`decode_request` reads a request's JSON (the center's seat views); :func:`request_of` converts
a poke-env battle's request once per request. The rules that judge an order against a request:
:mod:`edge.contract.legality`.
"""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

import msgspec
from msgspec.structs import force_setattr
from poke_env.battle import AbstractBattle, Pokemon
from poke_env.data import to_id_str

__all__ = [
    "ActiveSlot",
    "RequestMove",
    "RequestPokemon",
    "RequestSide",
    "ShowdownRequest",
    "decode_request",
    "request_of",
    "request_party",
    "slot_request_moves",
]


class RequestMove(msgspec.Struct, frozen=True, rename="camel"):
    """A move the active Pokémon may be asked to use (``MoveRequestData``)."""

    move: str = ""
    id: str = ""
    pp: int | None = None
    maxpp: int | None = None
    #: the move's target type (``normal``, ``adjacentAlly``, ``randomNormal``, ...)
    target: str = ""
    #: True, or the cause's name (Imprison, a Choice item): the move cannot be chosen now
    disabled: bool | str = False


class ActiveSlot(msgspec.Struct, frozen=True, rename="camel"):
    """What the active Pokémon of one slot may do this turn (``PokemonMoveRequestData``)."""

    moves: list[RequestMove] = []
    trapped: bool = False
    maybe_trapped: bool = False
    #: the tera type when the Pokémon may terastallize now, else empty (side.ts declares a string;
    #: a boolean is read too)
    can_terastallize: str | bool = ""


class RequestPokemon(msgspec.Struct, frozen=True, rename="camel", dict=True):
    """A Pokémon of the side's party (``PokemonSwitchRequestData``), in Showdown's order: the
    active ones first, in slot order."""

    ident: str = ""
    details: str = ""
    condition: str = ""
    active: bool = False
    moves: list[str] = []
    item: str = ""
    ability: str = ""
    base_ability: str = ""
    tera_type: str = ""
    terastallized: str = ""
    #: Commander: a Tatsugiri inside its Dondozo, which chooses nothing
    commanding: bool = False
    #: Revival Blessing: its slot brings back a fainted Pokémon
    reviving: bool = False

    # Read from the fields above once, when the Struct is made (decoded, converted, built or
    # replaced: msgspec calls __post_init__), and kept beside them in the instance's __dict__:
    # plain attributes, not fields (ClassVar), so the wire never carries them and a read is no
    # call. copy.copy would drop them (msgspec copies fields only): a frozen request needs none.
    #: its name: the ident without the ``p1: `` prefix (poke-env's ``Pokemon.name``)
    name: ClassVar[str]
    #: the species id of its details (``Rotom-Wash, L85`` is ``rotomwash``)
    species: ClassVar[str]
    #: whether its condition says it has fainted (``0 fnt``)
    fainted: ClassVar[bool]

    def __post_init__(self) -> None:
        force_setattr(self, "name", self.ident[4:])
        force_setattr(self, "species", to_id_str(self.details.split(",")[0]))
        force_setattr(self, "fainted", self.condition.endswith("fnt"))


class RequestSide(msgspec.Struct, frozen=True):
    """The side the request is for (``SideRequestData``)."""

    name: str = ""
    id: str = ""
    pokemon: list[RequestPokemon] = []


class ShowdownRequest(msgspec.Struct, frozen=True, rename="camel", dict=True):
    """One request of Showdown's (``ChoiceRequest``): a move request (``active``), a switch
    request (``force_switch``), a team preview (``team_preview``) or a wait (``wait``)."""

    side: RequestSide = RequestSide()
    #: one entry per active slot (None where the slot is empty)
    active: list[ActiveSlot | None] = []
    #: per active slot, whether it must switch (a switch request)
    force_switch: list[bool] = []
    wait: bool = False
    team_preview: bool = False
    max_chosen_team_size: int | None = None
    no_cancel: bool = False
    #: a corrected request, after Showdown refused a choice as ``[Unavailable choice]``
    update: bool = False
    rqid: int | None = None

    # Set once when the Struct is made, as RequestPokemon's name (not fields: ClassVar).
    #: the side's Pokémon, in Showdown's (party) order
    party: ClassVar[list[RequestPokemon]]
    #: how many active slots choose (1 in singles, 2 in doubles)
    slots: ClassVar[int]

    def __post_init__(self) -> None:
        force_setattr(self, "party", self.side.pokemon)
        force_setattr(self, "slots", max(len(self.active), len(self.force_switch), 1))

    def slot_moves(self, slot: int) -> list[RequestMove]:
        """The moves of the active Pokémon in ``slot`` (none at a team preview or a wait)."""
        if self.wait or self.team_preview or slot >= len(self.active):
            return []
        here = self.active[slot]
        return here.moves if here is not None else []


_DECODER = msgspec.json.Decoder(ShowdownRequest)


def decode_request(text: str | bytes) -> ShowdownRequest:
    """The request of ``|request|``'s JSON. msgspec.ValidationError (a ValueError) names the field
    that is not what Showdown sends; msgspec.DecodeError (a ValueError) when it is not JSON."""
    return _DECODER.decode(text)


# poke-env keeps a request as the dict it decoded (``Battle.last_request``): converted on first
# use and kept beside the battle until poke-env replaces the dict with the next request's.
_CONVERTED: weakref.WeakKeyDictionary[AbstractBattle, tuple[dict[str, Any], ShowdownRequest]] = (
    weakref.WeakKeyDictionary()
)


def request_of(battle: AbstractBattle) -> ShowdownRequest | None:
    """``battle``'s current request (None before the first)."""
    raw = battle.last_request
    if not raw:
        return None
    kept = _CONVERTED.get(battle)
    if kept is not None and kept[0] is raw:
        return kept[1]
    request = msgspec.convert(raw, ShowdownRequest)
    _CONVERTED[battle] = (raw, request)
    return request


def request_party(battle: AbstractBattle) -> list[Pokemon]:
    """The player's team in Showdown's party order (request order), else poke-env's order."""
    request = request_of(battle)
    entries = request.party if request is not None else []
    mons = [mon for e in entries if (mon := battle.team.get(e.ident)) is not None]
    return mons or list(battle.team.values())


def slot_request_moves(battle: AbstractBattle, slot: int = 0) -> list[RequestMove]:
    """The request's moves of the active Pokémon in ``slot`` (0 in singles; may be empty)."""
    request = request_of(battle)
    return request.slot_moves(slot) if request is not None else []
