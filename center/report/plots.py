"""The report's plots, drawn by matplotlib and returned as inline SVG markup.

Figures are built with matplotlib's object API (no pyplot, no global backend), so drawing is safe
from any thread and leaves the caller's matplotlib settings alone. Text stays text in the SVG
(``svg.fonttype: none``): it is searchable, small, and drawn with the browser's own fonts.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import numpy as np
from markupsafe import Markup, escape
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from center.evaluation.judging.standings import Standings

BLUE = "#2563eb"
GREY = "#6b7280"
_STYLE: dict[str, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#9ca3af",
    "axes.labelcolor": "#374151",
    "xtick.color": "#374151",
    "ytick.color": "#374151",
}


@contextmanager
def _style(name: str) -> Iterator[None]:
    # The salt makes the ids of clip paths differ between figures inlined in one page.
    rc: Any = {**_STYLE, "svg.hashsalt": f"sep-report-{name}"}  # matplotlib types keys as literals
    with mpl.rc_context(rc):
        yield


@dataclass(frozen=True)
class _Mark:
    """What the page says of one drawn element (an artist with a gid): a class, data attributes,
    and a ``<title>`` (shown on hover, read by screen readers, and what the tests read back)."""

    cls: str
    data: Mapping[str, str]
    title: str

    def attributes(self) -> str:
        data = "".join(f' data-{k}="{escape(v)}"' for k, v in self.data.items())
        return f' class="{self.cls}"{data}><title>{escape(self.title)}</title>'


def _svg(fig: Figure, name: str, marks: Mapping[str, _Mark] | None = None) -> Markup:
    buf = io.StringIO()
    with _style(name):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    # Inline SVG in HTML needs neither the XML declaration nor the DOCTYPE.
    svg = text[text.index("<svg") :]
    # matplotlib writes an artist with a gid as <g id="gid">; its numbers go on that group.
    for gid, mark in (marks or {}).items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"{mark.attributes()}', 1)
    return Markup(svg.replace("<svg ", f'<svg role="img" aria-label="{name}" ', 1))


def _rating(value: float) -> str:  # as the standings table shows it
    return "–" if math.isnan(value) else f"{value:.1f}"


def ratings(standings: Standings, names: Mapping[str, str]) -> Markup | None:
    """Each rated candidate's rating with its 95% interval, best at the top."""
    rated = [c for c in standings.candidates if not math.isnan(c.rating)]
    if not rated:
        return None
    with _style("ratings"):
        fig = Figure(figsize=(6.6, 0.42 * len(rated) + 1.0))
        ax = fig.add_subplot()
        y = np.arange(len(rated))[::-1]
        x = np.array([c.rating for c in rated])
        lo = np.array([c.rating_lo if not math.isnan(c.rating_lo) else c.rating for c in rated])
        hi = np.array([c.rating_hi if not math.isnan(c.rating_hi) else c.rating for c in rated])
        ax.axvline(1500, color="#d1d5db", linewidth=1, linestyle="--", zorder=0)
        marks: dict[str, _Mark] = {}
        for n, (xi, yi, c) in enumerate(zip(x, y, rated, strict=True)):
            # One errorbar per candidate, so that its dot and its bar are groups of their own.
            drawn = ax.errorbar(
                [xi],
                [yi],
                xerr=[[max(xi - lo[n], 0)], [max(hi[n] - xi, 0)]],
                fmt="o",
                color=BLUE,
                ecolor="#93c5fd",
                elinewidth=3,
                capsize=0,
                markersize=6,
            )
            name = names.get(c.id, c.id)
            title = (
                f"{name}: rating {_rating(c.rating)}, "
                f"95% interval {_rating(c.rating_lo)} to {_rating(c.rating_hi)}"
            )
            label = ax.annotate(
                f"{c.rating:.0f}",
                (xi, yi),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color="#111827",
            )
            for part, artist in (
                ("point", drawn.lines[0]),
                ("interval", drawn.lines[2][0]),
                ("label", label),
            ):
                artist.set_gid(f"ratings-{part}-{n}")
                marks[f"ratings-{part}-{n}"] = _Mark(f"rating-{part}", {"candidate": c.id}, title)
        ax.set_yticks(y, labels=[names.get(c.id, c.id) for c in rated])
        ax.set_ylim(-0.7, len(rated) - 0.3)
        ax.set_xlabel("rating (Bradley–Terry, Elo scale; bar: 95% bootstrap interval)")
        ax.grid(axis="x", color="#f3f4f6")
        fig.tight_layout()
    return _svg(fig, "ratings", marks)


def pairwise(standings: Standings, names: Mapping[str, str]) -> Markup | None:
    """Heatmap of each candidate's (row) win rate against each other (column), with counts."""
    ids = [c.id for c in standings.candidates]
    k = len(ids)
    if k < 2 or not standings.pairwise:
        return None
    index = {cid: n for n, cid in enumerate(ids)}
    rate = np.full((k, k), np.nan)
    text = [["" for _ in range(k)] for _ in range(k)]
    said = [["no battle" for _ in range(k)] for _ in range(k)]  # the cells' titles
    for p in standings.pairwise:
        i, j = index[p.a], index[p.b]
        decided = p.a_wins + p.b_wins + p.ties
        none = f"\n+{p.no_result} none" if p.no_result else ""
        if decided:
            rate[i, j] = (p.a_wins + p.ties / 2) / decided
            rate[j, i] = 1 - rate[i, j]
        for row, col, wins, losses in ((i, j, p.a_wins, p.b_wins), (j, i, p.b_wins, p.a_wins)):
            share = f"{100 * rate[row, col]:.0f}%\n" if decided else "–\n"
            text[row][col] = f"{share}{wins}–{losses}–{p.ties}{none}"
            said[row][col] = (
                (f"win rate {100 * rate[row, col]:.0f}%, " if decided else "no decided battle, ")
                + f"{wins} won, {losses} lost, {p.ties} tied"
                + (f", {p.no_result} without a result" if p.no_result else "")
            )
    labels = [names.get(cid, cid) for cid in ids]
    marks: dict[str, _Mark] = {}
    with _style("pairwise"):
        size = max(3.2, 0.95 * k + 1.6)
        fig = Figure(figsize=(size + 1.3, size))
        ax = fig.add_subplot()
        cmap = mpl.colormaps["RdBu"].with_extremes(bad="#f3f4f6")
        edges = np.arange(k + 1) - 0.5
        # A mesh of rectangles stays vector in the SVG (an image would be an embedded bitmap).
        image = ax.pcolormesh(
            edges, edges, np.ma.masked_invalid(rate), cmap=cmap, vmin=0, vmax=1, edgecolors="white"
        )
        image.set_gid("pairwise-mesh")
        ax.set_aspect("equal")
        ax.invert_yaxis()
        for i in range(k):
            for j in range(k):
                if i == j:
                    continue
                dark = not math.isnan(rate[i, j]) and abs(rate[i, j] - 0.5) > 0.3
                ax.text(
                    j,
                    i,
                    text[i][j] or "no battle",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if dark else "#111827",
                    gid=f"pairwise-cell-{i}-{j}",
                )
                marks[f"pairwise-cell-{i}-{j}"] = _Mark(
                    "pairwise-cell",
                    {"row": ids[i], "col": ids[j]},
                    f"{labels[i]} against {labels[j]}: {said[i][j]}",
                )
        ax.set_xticks(range(k), labels=labels, rotation=30, ha="right")
        ax.set_yticks(range(k), labels=labels)
        ax.set_xlabel("opponent")
        ax.set_ylabel("candidate")
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        bar = fig.colorbar(image, ax=ax, shrink=0.8)
        bar.set_label("win rate of the row against the column (ties count half)")
        bar.outline.set_visible(False)
        if bar.solids is not None:
            bar.solids.set_rasterized(False)
        fig.tight_layout()
    return _svg(fig, "pairwise", marks)


def decision_times(
    samples: Mapping[str, Sequence[float]],
    names: Mapping[str, str],
    order: Sequence[str],
    free_ms: float | None,
    per_decision: bool,
) -> Markup | None:
    """Box plot of each candidate's decision times (ms, log scale), with the free time marked."""
    # Times of zero (a side that failed before timing anything) have no place on a log scale.
    positive = {cid: [t for t in samples.get(cid, ()) if t > 0] for cid in order}
    shown = [cid for cid in order if positive[cid]]
    if not shown:
        return None
    with _style("decision-times"):
        fig = Figure(figsize=(6.6, 0.42 * len(shown) + 1.2))
        ax = fig.add_subplot()
        data = [np.asarray(positive[cid], dtype=float) for cid in shown]
        ax.boxplot(
            data[::-1],
            orientation="horizontal",
            widths=0.55,
            whis=(5, 95),
            patch_artist=True,
            boxprops={"facecolor": "#dbeafe", "edgecolor": BLUE},
            medianprops={"color": "#1e3a8a"},
            whiskerprops={"color": BLUE},
            capprops={"color": BLUE},
            flierprops={"marker": ".", "markersize": 3, "markeredgecolor": GREY},
        )
        ax.set_yticks(range(1, len(shown) + 1), labels=[names.get(c, c) for c in shown][::-1])
        ax.set_xscale("log")
        if free_ms:
            ax.axvline(free_ms, color="#dc2626", linewidth=1, linestyle="--")
            ax.annotate(
                "free time per decision",
                (free_ms, len(shown) + 0.45),
                ha="right",
                va="center",
                fontsize=7,
                color="#dc2626",
                xytext=(-3, 0),
                textcoords="offset points",
            )
        what = "per decision" if per_decision else "mean per battle"
        ax.set_xlabel(f"decision time, ms ({what}; box: quartiles, whiskers: 5–95%)")
        ax.grid(axis="x", color="#f3f4f6")
        fig.tight_layout()
    return _svg(fig, "decision-times")


def sprt_llr(
    histories: Mapping[tuple[str, str], Sequence[float]],
    bounds: tuple[float, float],
    names: Mapping[str, str],
) -> Markup | None:
    """Each SPRT's log-likelihood ratio after each counted pair, with Wald's bounds."""
    drawn = {pair: list(llr) for pair, llr in histories.items() if llr}
    if not drawn:
        return None
    lower, upper = bounds
    marks: dict[str, _Mark] = {}
    with _style("sprt-llr"):
        fig = Figure(figsize=(6.6, 3.2))
        ax = fig.add_subplot()
        longest = max(len(llr) for llr in drawn.values())
        for value, label in ((upper, "H1 accepted"), (lower, "H0 accepted")):
            ax.axhline(value, color="#dc2626", linewidth=1, linestyle="--")
            ax.annotate(
                f"{label} ({value:.2f})",
                (0, value),
                xycoords=("axes fraction", "data"),
                xytext=(3, 3),
                textcoords="offset points",
                fontsize=7,
                color="#dc2626",
            )
        ax.axhline(0, color="#d1d5db", linewidth=1, zorder=0)
        colours = mpl.colormaps["tab10"]
        for n, ((candidate, opponent), llr) in enumerate(drawn.items()):
            x = np.arange(1, len(llr) + 1)
            label = f"{names.get(candidate, candidate)} vs {names.get(opponent, opponent)}"
            (line,) = ax.plot(
                x, llr, marker="o", markersize=3, linewidth=1.5, color=colours(n % 10), label=label
            )
            line.set_gid(f"sprt-llr-{n}")
            marks[f"sprt-llr-{n}"] = _Mark(
                "sprt-llr",
                {"candidate": candidate, "opponent": opponent, "pairs": str(len(llr))},
                f"{label}: LLR {llr[-1]:.2f} after {len(llr)} pairs, bounds [{lower:.2f}, "
                f"{upper:.2f}]",
            )
        span = max(upper, -lower, *(abs(v) for llr in drawn.values() for v in llr))
        ax.set_ylim(-1.1 * span, 1.1 * span)
        ax.set_xlim(0.5, max(longest, 2) + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("complete pairs")
        ax.set_ylabel("log-likelihood ratio")
        if len(drawn) > 1:
            ax.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
        ax.grid(axis="y", color="#f3f4f6")
        fig.tight_layout()
    return _svg(fig, "sprt-llr", marks)
