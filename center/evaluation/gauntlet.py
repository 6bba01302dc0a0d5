"""A gauntlet's standings: its candidate against each opponent of the field, one line each.

Each line is the head to head of the candidate and one opponent, computed as the standings compute
a candidate's line (:func:`center.evaluation.standings.compute_standings` on that opponent's battles
alone): wins, losses, ties, the win rate with its 95% interval (from pair totals when paired), the
rating difference with its bootstrap interval, the pair counts and, with ``--sprt``, the test's
decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from center.evaluation.records import BattleRecord
from center.evaluation.standings import compute_standings

__all__ = ["gauntlet_section"]


def gauntlet_section(
    records: Iterable[BattleRecord],
    candidate: str,
    opponents: Sequence[str],
    *,
    paired: bool,
    sprt: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """standings.json's ``gauntlet`` entry: ``{"candidate", "opponents": [line, ...]}``."""
    kept = list(records)
    tests = {t["opponent"]: t for t in sprt if t.get("candidate") == candidate}
    lines = []
    for opponent in opponents:
        mine = [r for r in kept if {r.blue, r.red} == {candidate, opponent}]
        standings = compute_standings(mine, candidates=(candidate, opponent), paired=paired)
        rows = {c.id: c for c in standings.candidates}
        me, them = rows[candidate], rows[opponent]
        line: dict[str, Any] = {
            "opponent": opponent,
            "battles": me.battles,
            "wins": me.wins,
            "losses": me.losses,
            "ties": me.ties,
            "no_result": me.no_result,
            "win_rate": me.win_rate,
            "win_rate_lo": me.win_rate_lo,
            "win_rate_hi": me.win_rate_hi,
            "elo_diff": me.rating - them.rating,
        }
        if paired:
            line["pairs"] = me.pairs
            line["pentanomial"] = list(me.pentanomial)
        if opponent in tests:
            line["sprt"] = dict(tests[opponent])
        lines.append({k: (None if isinstance(v, float) and v != v else v) for k, v in line.items()})
    return {"candidate": candidate, "opponents": lines}
