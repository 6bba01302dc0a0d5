"""What ends a battle at its turn cap: the rules (:data:`TURN_CAP_RULES`) and Showdown's tiebreak.

The simulator applies its own ``Battle.tiebreak()`` (``>tiebreak``); :func:`tiebreak_winner` is
the same rule, in the same arithmetic, applied to each side's last request (its Pokémon's exact
HP), for the server backend, whose players cannot send ``>tiebreak``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from edge.contract.showdown_request import ShowdownRequest

__all__ = ["TURN_CAP_RULES", "TurnCap", "check_turn_cap", "side_totals", "tiebreak_winner"]

TurnCap = Literal["tiebreak", "tie"]

TURN_CAP_RULES: dict[TurnCap, str] = {
    "tiebreak": "Showdown's tiebreak (end reason tiebreak): more unfainted Pokémon wins, then a "
    "higher mean HP %, then more total HP; a tie where all three are equal",
    "tie": "a tie (end reason max_turns), whatever the position: the rule of runs started "
    "before the tiebreak",
}
"""Each rule a battle at its turn cap can end by, and what it does."""


def check_turn_cap(rule: str) -> TurnCap:
    """``rule`` if it is one of :data:`TURN_CAP_RULES`; ValueError (one line) if not."""
    for known in TURN_CAP_RULES:
        if rule == known:
            return known
    raise ValueError(f"unknown turn-cap rule {rule!r}; known: {', '.join(TURN_CAP_RULES)}")


def side_totals(request: ShowdownRequest) -> tuple[int, float, int]:
    """A side's unfainted Pokémon, mean HP % (its HP fractions summed in team order, times 100,
    over 6, as Showdown computes it) and total HP, from its request's exact conditions."""
    if not request.party:
        raise ValueError("the request lists no Pokémon")
    left, fraction, total = 0, 0.0, 0
    for entry in request.party:
        condition = entry.condition.split(" ")[0]
        hp_text, _, max_text = condition.partition("/")
        hp = int(hp_text)
        if hp > 0:
            left += 1
            fraction += hp / int(max_text)
        total += hp
    return left, fraction * 100 / 6, total


def tiebreak_winner(requests: Mapping[str, ShowdownRequest]) -> str | None:
    """Showdown's tiebreak over two sides' last requests (keyed by side): the key of the side it
    gives the win, None for a tie. ValueError when a request lists no conditions to read."""
    if len(requests) != 2:
        raise ValueError("the tiebreak compares two sides")
    totals = {side: side_totals(request) for side, request in requests.items()}
    tied = list(totals)
    for measure in range(3):  # unfainted Pokémon, then mean HP %, then total HP
        best = max(totals[side][measure] for side in tied)
        tied = [side for side in tied if totals[side][measure] == best]
        if len(tied) == 1:
            return tied[0]
    return None
