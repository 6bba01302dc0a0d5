"""The standings as output: ``standings.csv`` and ``standings.json`` in LOG_DIR, each replaced
atomically, and a fixed-width table for the terminal, with what each candidate asked of its
model endpoints. The numbers come from :mod:`center.evaluation.judging.standings`."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from center.evaluation.judging.rating_methods import RATING_METHODS
from center.evaluation.judging.standings import (
    PENTANOMIAL_POINTS,
    Standings,
    compute_standings,
)
from center.evaluation.records import BattleRecord
from center.files import write_atomically
from edge.contract.outcomes import FAILURE_STATUSES, SIDE_STATUSES

__all__ = [
    "PAIRED_COLUMNS",
    "STANDINGS_COLUMNS",
    "STANDINGS_CSV",
    "STANDINGS_JSON",
    "EndpointUse",
    "endpoint_use",
    "format_endpoint_use",
    "format_standings",
    "standings_columns",
    "write_standings",
]

STANDINGS_CSV = "standings.csv"
STANDINGS_JSON = "standings.json"

_HEAD = (
    "rank",
    "id",
    "battles",
    "wins",
    "losses",
    "ties",
    "win_rate",
    "win_rate_lo",
    "win_rate_hi",
)
_TAIL = ("no_result", *(f"status_{s.value.lower()}" for s in FAILURE_STATUSES), "p_best")
_GXE = ("gxe", "gxe_lo", "gxe_hi")


def standings_columns(paired: bool) -> tuple[str, ...]:
    """standings.csv's columns for the rating methods of now (:data:`RATING_METHODS`): the
    primary method's keep the place ``rating`` always had, GXE's follow ``p_best``, then the
    other methods'."""
    first, *rest = RATING_METHODS.values()
    pairs = ("pairs", *(f"pairs_{points:g}" for points in PENTANOMIAL_POINTS)) if paired else ()
    return (*_HEAD, *first.columns, *_TAIL, *_GXE, *(c for m in rest for c in m.columns), *pairs)


STANDINGS_COLUMNS: tuple[str, ...] = standings_columns(paired=False)
"""The columns of standings.csv, in order, as the rating methods were when imported (``p_best``:
the share of bootstrap resamples in which the candidate rates highest)."""

PAIRED_COLUMNS: tuple[str, ...] = standings_columns(paired=True)
"""The columns of standings.csv for a paired run: ``pairs_X`` counts the pairs scored X of 2."""


def _fmt(value: float, digits: int) -> str:
    return "" if math.isnan(value) else f"{value:.{digits}f}"


def _csv_text(standings: Standings) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(standings_columns(standings.paired))
    first, *rest = RATING_METHODS
    for c in standings.candidates:
        paired = [c.pairs, *c.pentanomial] if standings.paired else []
        writer.writerow(
            [
                c.rank,
                c.id,
                c.battles,
                c.wins,
                c.losses,
                c.ties,
                _fmt(c.win_rate, 4),
                _fmt(c.win_rate_lo, 4),
                _fmt(c.win_rate_hi, 4),
                *(_fmt(x, 1) for x in c.ratings[first]),
                c.no_result,
                *(c.statuses[s.value] for s in FAILURE_STATUSES),
                _fmt(c.p_best, 3),
                *(_fmt(x, 4) for x in (c.gxe, c.gxe_lo, c.gxe_hi)),
                *(_fmt(x, 1) for key in rest for x in c.ratings[key]),
                *paired,
            ]
        )
    return buf.getvalue()


def write_standings(
    records: Iterable[BattleRecord],
    log_dir: str | os.PathLike[str],
    *,
    candidates: Sequence[str] = (),
    bootstrap: int = 200,
    seed: int = 0,
    prior_games: float = 1.0,
    paired: bool = False,
    sections: Mapping[str, Any] | None = None,
    start: Mapping[str, float] | None = None,
) -> Standings:
    """Compute the standings and (re)write ``standings.csv`` and ``standings.json`` in LOG_DIR.

    Each file is replaced atomically, so a reader never sees half of one. A ``paired`` run's files
    have the pair columns (:data:`PAIRED_COLUMNS`) and fields too. ``sections`` are more top-level
    entries of standings.json: ``sprt`` (the run's sequential tests), ``gauntlet`` (its candidate
    against each opponent). ``start``: a warm start (:func:`compute_standings`).
    """
    standings = compute_standings(
        records,
        candidates=candidates,
        bootstrap=bootstrap,
        seed=seed,
        prior_games=prior_games,
        paired=paired,
        start=start,
    )
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(log_dir / STANDINGS_CSV, _csv_text(standings), durable=True)
    body = standings.to_json()
    body.update(sections or {})
    doc = json.dumps(body, indent=2, ensure_ascii=False, allow_nan=False)
    write_atomically(log_dir / STANDINGS_JSON, doc + "\n", durable=True)
    return standings


@dataclass(frozen=True)
class EndpointUse:
    """What a candidate's decisions asked of its edge's model endpoints, summed over its battles
    (battles.csv's ``SIDE_endpoint_*`` columns)."""

    requests: int = 0
    tokens: int = 0
    bytes: int = 0
    battles: int = 0
    """The battles in which it asked them at all."""


def endpoint_use(records: Iterable[BattleRecord]) -> dict[str, EndpointUse]:
    """Per candidate that asked its model endpoints in any battle, what it asked, by id."""
    totals: dict[str, EndpointUse] = {}
    for r in records:
        for side in ("blue", "red"):
            played = r.side(side)
            counts = (played.endpoint_requests, played.endpoint_tokens, played.endpoint_bytes)
            if any(counts):
                model = getattr(r, side)
                was = totals.get(model, EndpointUse())
                totals[model] = EndpointUse(
                    was.requests + counts[0],
                    was.tokens + counts[1],
                    was.bytes + counts[2],
                    was.battles + 1,
                )
    return dict(sorted(totals.items()))


def format_endpoint_use(records: Iterable[BattleRecord]) -> list[str]:
    """A terminal line per candidate that asked its model endpoints: requests and tokens, in all
    and per battle (none when no candidate asked any)."""
    lines = []
    for model, use in endpoint_use(records).items():
        lines.append(
            f"model endpoints of {model}: {use.requests:,} requests, {use.tokens:,} tokens in "
            f"{use.battles} battle{'' if use.battles == 1 else 's'} ({use.requests / use.battles:,.1f} requests, "
            f"{use.tokens / use.battles:,.0f} tokens a battle)"
        )
    return lines


def _status_cells(cells: Iterable[str | int]) -> str:
    """The status columns of the terminal table, one per failure status (the status table's
    ``short`` heads them), 4 wide."""
    return " ".join(f"{cell:>4}" for cell in cells)


def format_standings(standings: Standings) -> str:
    """A fixed-width table of the standings for the terminal (with pair counts when paired)."""
    width = max([len("candidate"), *(len(c.id) for c in standings.candidates)])
    ptnml = {c.id: " ".join(str(n) for n in c.pentanomial) for c in standings.candidates}
    head = (
        f"{'rank':>4}  {'candidate':<{width}}  {'battles':>7}  {'W':>4} {'L':>4} {'T':>4}  "
        f"{'win%':>6}  {'95% CI':<15}  "
        + "".join(f"{m.head:>6}  {'95% CI':<15}  " for m in RATING_METHODS.values())
        + f"{'GXE':>6}  {'95% CI':<15}  "
        + f"{'none':>4} {_status_cells(SIDE_STATUSES[s].short for s in FAILURE_STATUSES)}  "
        f"{'P(best)':>7}"
    )
    if standings.paired:
        head += "  pairs 0-½-1-1½-2"
    lines = [head, "-" * len(head)]

    def pct(x: float) -> str:
        return "-" if math.isnan(x) else f"{100 * x:.1f}"

    def elo(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.0f}"

    for c in standings.candidates:
        rate_ci = f"[{pct(c.win_rate_lo)}, {pct(c.win_rate_hi)}]"
        ratings = "".join(
            f"{elo(point):>{max(6, len(m.head))}}  {f'[{elo(lo)}, {elo(hi)}]':<15}  "
            for key, m in RATING_METHODS.items()
            for point, lo, hi in [c.ratings[key]]
        )
        gxe_ci = f"[{pct(c.gxe_lo)}, {pct(c.gxe_hi)}]"
        lines.append(
            f"{c.rank:>4}  {c.id:<{width}}  {c.battles:>7}  {c.wins:>4} {c.losses:>4} {c.ties:>4}  "
            f"{pct(c.win_rate):>6}  {rate_ci:<15}  {ratings}{pct(c.gxe):>6}  {gxe_ci:<15}  "
            f"{c.no_result:>4} {_status_cells(c.statuses[s.value] for s in FAILURE_STATUSES)}  "
            f"{pct(c.p_best):>7}" + (f"  {ptnml[c.id]}" if standings.paired else "")
        )
    lines.append(
        f"{standings.battles} battles, {standings.no_result} without result; ties count half; "
        + "ratings on an Elo scale ("
        + ", ".join(f"{m.head}: {m.name}" for m in RATING_METHODS.values())
        + f"), {standings.bootstrap} bootstrap resamples; GXE: % chance to beat a random other "
        "candidate of the board (Bradley–Terry); "
        "P(best): % of resamples in which the candidate rates highest"
    )
    if standings.paired:
        lines.append(
            f"paired: {standings.pairs} complete pairs, counted by the points scored in them "
            "(0 to 2); the 95% CIs come from pair totals"
        )
    return "\n".join(lines)
