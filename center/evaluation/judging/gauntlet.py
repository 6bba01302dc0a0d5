"""A gauntlet's standings: its candidate against each opponent of the field, one line each.

Each line is the head to head of the candidate and one opponent, computed as the standings compute
a candidate's line (:func:`center.evaluation.judging.standings.compute_standings` on that
opponent's battles alone): wins, losses, ties, the win rate with its 95% interval (from pair totals
when paired), the rating difference with its bootstrap interval, the pair counts and, with
``--sprt``, the test's decision.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from center.evaluation.judging.rating_methods import RATING_METHODS
from center.evaluation.judging.standings import compute_standings
from center.evaluation.records import BattleRecord

__all__ = ["format_gauntlet", "gauntlet_section"]


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
        }
        for key, method in RATING_METHODS.items():
            line[method.diff_column] = me.ratings[key][0] - them.ratings[key][0]
        if paired:
            line["pairs"] = me.pairs
            line["pentanomial"] = list(me.pentanomial)
        if opponent in tests:
            line["sprt"] = dict(tests[opponent])
        lines.append({k: (None if isinstance(v, float) and v != v else v) for k, v in line.items()})
    return {"candidate": candidate, "opponents": lines}


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}"


def _sprt_cell(test: Mapping[str, Any] | None) -> str:
    if not test:
        return ""
    decision = test.get("decision") or "none yet"
    return f"{decision} (LLR {test['llr']:.2f} in [{test['lower']:.2f}, {test['upper']:.2f}])"


def format_gauntlet(section: Mapping[str, Any]) -> str:
    """The terminal's per-opponent table of :func:`gauntlet_section`'s entry: one line each."""
    lines = section["opponents"]
    paired = any("pentanomial" in line for line in lines)
    sprt = any("sprt" in line for line in lines)
    width = max([len("opponent"), *(len(line["opponent"]) for line in lines)])
    head = (
        f"{'opponent':<{width}}  {'battles':>7}  {'W':>4} {'L':>4} {'T':>4}  "
        f"{'win%':>6}  {'95% CI':<15}"
    )
    methods = list(RATING_METHODS.values())
    head += "".join(f"  {m.diff_head:>8}" for m in methods)
    head += "  pairs 0-½-1-1½-2" if paired else ""
    head += "  SPRT" if sprt else ""
    out = [f"gauntlet: {section['candidate']} against each opponent", head, "-" * len(head)]
    for line in lines:
        ci = f"[{_pct(line['win_rate_lo'])}, {_pct(line['win_rate_hi'])}]"
        row = (
            f"{line['opponent']:<{width}}  {line['battles']:>7}  {line['wins']:>4} "
            f"{line['losses']:>4} {line['ties']:>4}  {_pct(line['win_rate']):>6}  {ci:<15}"
        )
        for m in methods:
            diff = line.get(m.diff_column)
            cell = "-" if diff is None else f"{diff:+.0f}"
            row += f"  {cell:>{max(8, len(m.diff_head))}}"
        if paired:
            row += f"  {'-'.join(str(n) for n in line.get('pentanomial') or []):<16}"
        if sprt:
            row += f"  {_sprt_cell(line.get('sprt'))}"
        out.append(row.rstrip())
    return "\n".join(out)
