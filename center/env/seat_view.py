"""SeatView: what the center reads of a seat's battle, kept from its frames without poke-env.

The request (``|request|``), the turn (``|turn|``), the tag, the opponent's name (``|title|``) and
the result (``|win|``, ``|tie``): enough to judge orders, build a policy's info and record the
battle. Named as poke-env's ``Battle`` names them, so that a server seat's ``Battle`` is read the
same way (:class:`BattleView`). The simulator backend keeps one for every seat and a poke-env
``Battle`` only for the seats whose Agent runs in this process.
"""

from __future__ import annotations

from typing import Any, Protocol

from edge.contract.showdown_request import ShowdownRequest, decode_request

__all__ = ["BattleView", "SeatView"]

_READ = frozenset({"request", "turn", "error", "win", "tie", "title"})
"""The protocol messages a view reads: any other line is skipped before the branches below."""


class BattleView(Protocol):
    """What the match and PokemonEnv read of a seat's battle (a :class:`SeatView` or a poke-env
    ``Battle``)."""

    @property
    def battle_tag(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def teampreview(self) -> bool: ...
    @property
    def won(self) -> bool | None: ...
    @property
    def lost(self) -> bool | None: ...
    @property
    def finished(self) -> bool: ...
    @property
    def player_username(self) -> str: ...
    @property
    def opponent_username(self) -> str | None: ...


class SeatView:
    """One seat's battle as its frames tell it (see the module docstring)."""

    def __init__(self, username: str) -> None:
        self.player_username = username
        self.opponent_username: str | None = None
        self.battle_tag = ""
        #: the last request, decoded once here (None before the first)
        self.request: ShowdownRequest | None = None
        self.turn = 0
        self.won: bool | None = None
        self.lost: bool | None = None
        self.finished = False

    @property
    def teampreview(self) -> bool:
        return self.request is not None and self.request.team_preview

    def feed(self, frame: str) -> list[tuple[str, Any]]:
        """Apply one frame; returns what a session acts on, in order: ``("request", request)``
        (None for an empty ``|request|``), ``("error", line)`` and ``("end", None)``."""
        lines = frame.split("\n")
        if not self.battle_tag and lines[0].startswith(">"):
            self.battle_tag = lines[0][1:]
        events: list[tuple[str, Any]] = []
        for line in lines[1:]:
            # One find per line: the message kind between its first two bars.
            bar = line.find("|", 1)
            if bar < 0:
                if line == "|tie":
                    self._end(None)
                    events.append(("end", None))
                continue
            kind = line[1:bar]
            if kind not in _READ or line[0] != "|":
                continue
            rest = line[bar + 1 :]
            if kind == "request":
                request = decode_request(rest) if rest else None
                if request is not None:
                    self.request = request
                events.append(("request", request))
            elif kind == "turn":
                self.turn = int(rest)
            elif kind == "error":
                events.append(("error", line))
            elif kind == "win":
                self._end(rest == self.player_username)
                events.append(("end", None))
            elif kind == "tie":
                self._end(None)
                events.append(("end", None))
            elif kind == "title":
                self._title(rest)
        return events

    def _end(self, won: bool | None) -> None:
        self.won = won
        self.lost = None if won is None else not won
        self.finished = True

    def _title(self, title: str) -> None:
        # |title|P1 vs. P2, read as poke-env reads it: the one that is not this seat's player
        first, _, second = title.partition(" vs. ")
        self.opponent_username = first if first != self.player_username else second
