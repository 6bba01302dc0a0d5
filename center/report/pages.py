"""The report's HTML pages, rendered by jinja2 from the package's templates.

Every page is self-contained: its CSS and JavaScript are inlined from ``static/``, its plots are
inline SVG, and a Content-Security-Policy forbids fetching anything, so it works the same with or
without a network, and running any script but the page's own (allowed by its hash). Text from the run (candidate names, errors, protocol lines) is escaped by the
template engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2
import numpy as np
from markupsafe import Markup

from center.csp import script_hash_source
from center.env.backend import BACKENDS
from center.evaluation.judging.collusion import check_collusion
from center.evaluation.judging.rating_methods import RATING_METHODS
from center.evaluation.judging.sequential import SequentialTests
from center.evaluation.judging.standings import CandidateStanding
from center.evaluation.judging.standings_output import endpoint_use
from center.evaluation.recording.provenance import describe_change
from center.evaluation.recording.voided import count_causes
from center.evaluation.records import BattleRecord, Winner
from center.report import plots
from center.report.dex import move_names, pokedex
from center.report.narrator import Narrator
from center.report.protocol import Battle, Mon, Team, to_id
from center.report.sources import FAILURES, SIDES, CandidateSummary, FirstError, LogDir
from edge.contract.outcomes import SIDE_STATUSES, SideStatus


@cache
def _static(name: str) -> str:
    return (resources.files("center.report") / "static" / name).read_text(encoding="utf-8")


# Rates and ratings are shown to the precision standings.csv has (4 and 1 decimals), so that the
# page and the file say the same numbers.
def _percent(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:.2f}%"


def _rating(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.1f}"


def _ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _href(path: str) -> str:
    """A relative path as a URL: each segment percent-encoded (ids may hold '#', '?' or spaces)."""
    return quote(path, safe="/")


def _short_time(stamp: str) -> str:
    return stamp.replace("T", " ")[:19]


def _time(stamp: str) -> Markup:
    """A recorded UTC time shown to the second, in a <time> that keeps it whole."""
    return Markup('<time datetime="{}">{}</time>').format(stamp, _short_time(stamp))


@cache
def environment() -> jinja2.Environment:
    """The template environment: package templates, autoescaping, strict undefined names."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("center.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["inline"] = lambda name: Markup(_static(name))
    env.filters.update(percent=_percent, rating=_rating, ms=_ms, href=_href, short_time=_short_time)
    env.filters["tone"] = lambda status: SIDE_STATUSES[SideStatus(status)].tone
    env.filters["csp_hash"] = lambda script: Markup(script_hash_source(str(script)))
    return env


# -- report.html ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _StandingRow:
    c: CandidateStanding
    name: str


@dataclass(frozen=True)
class _Summary:
    id: str
    log_name: str
    statuses: dict[str, int]
    first_error: FirstError | None
    decisions: int
    median: float | None
    p95: float | None
    max: float | None


@dataclass(frozen=True)
class _BattleRow:
    n: int
    r: BattleRecord
    blue: str
    red: str
    winner: str
    offline: str | None
    showdown: str | None
    log: str | None


def _summary(s: CandidateSummary) -> _Summary:
    times = np.asarray(s.decision_ms, dtype=float)
    stats: list[float | None] = [None, None, None]
    if times.size:
        # The longest decision is battles.csv's, also when the times are per-battle means.
        longest = max(s.max_ms, float(times.max()))
        stats = [float(np.median(times)), float(np.percentile(times, 95)), longest]
    return _Summary(s.id, s.log_name, s.statuses, s.first_error, s.decisions, *stats)


def winner_label(record: BattleRecord, names: Mapping[str, str]) -> str:
    """Who won, as the report and the replay pages say it: ``logName (side)``, tie or none."""
    if record.winner in (Winner.BLUE, Winner.RED):
        side = record.winner.value
        return f"{names.get(getattr(record, side), getattr(record, side))} ({side})"
    return "tie" if record.winner is Winner.TIE else "no result"


_EDGE_LOSS = {
    "void": "void: a battle during which an edge process was lost is voided and played again",
    "forfeit": "forfeit: a lost edge is that side's DISCONNECT forfeit",
    None: "none: in-process (sep_eval), no edges",
}


def _voided_text(data: LogDir) -> str:
    if not data.voided:
        return "none"
    causes = count_causes(data.voided)
    listed = "; ".join(f"{n}× {cause}" for cause, n in causes.most_common())
    return f"{len(data.voided)} ({listed})"


def _provenance_info(data: LogDir) -> list[tuple[str, str]]:
    """A ``code`` line per candidate (the digest of its files where it ran, from run.json) and a
    ``code change`` line per change a rerun was allowed to make."""
    info: list[tuple[str, str]] = []
    provenance = data.run_doc.get("provenance") or {}
    for model in sorted(provenance):
        places = provenance[model] or {}
        where = "; ".join(f"{digest} ({place})" for place, digest in sorted(places.items()))
        info.append(("code", f"{data.name(model)} ({model}): {where}"))
    for change in data.run_doc.get("code_changes") or []:
        try:
            if change.get("during_run"):
                text = (
                    f"{describe_change(change)}, during the run at {change['at']} "
                    f"(first played in {change['battle']})"
                )
            else:
                text = (
                    f"{describe_change(change)}, allowed at {change['at']} after "
                    f"{change['battles_before']} battles"
                )
        except (KeyError, TypeError, AttributeError):
            continue
        info.append(("code change", text))
    return info


def _endpoint_info(data: LogDir) -> list[tuple[str, str]]:
    """A ``model endpoints`` line per candidate whose decisions asked its edge's model endpoints
    (``sep_edge --endpoint``): requests, tokens and bytes over its battles, from battles.csv."""
    return [
        (
            "model endpoints",
            f"{data.name(model)} ({model}): {use.requests} requests, {use.tokens} tokens, "
            f"{use.bytes} bytes over {use.battles} battles",
        )
        for model, use in endpoint_use(data.records).items()
    ]


def _run_info(data: LogDir) -> list[tuple[str, str]]:
    """The run section: (label, text) pairs; the dates' texts are markup (<time> elements)."""
    info: list[tuple[str, str]] = [("folder", str(data.path.resolve()))]
    run = data.run
    if run is not None:
        who = ", ".join(f"{data.name(c)} ({c})" for c in run.candidates)
        per = {
            "league": "per pair (sides alternate)",
            "gauntlet": f"per opponent of {run.candidates[0]} (sides alternate)",
        }.get(run.mode, "(blue vs red)")
        if run.sprt is not None:
            per += ", at most: the SPRT stops earlier"
        info += [
            ("mode", run.mode),
            ("candidates", who),
            ("battles", f"{run.n} {per}"),
            ("format", run.format),
            ("seed", str(run.seed)),
            ("backend", BACKENDS[run.backend].label if run.backend in BACKENDS else run.backend),
            (
                "pairing",
                "paired: each seed played twice with the sides swapped; standings count pairs"
                if run.paired
                else "unpaired",
            ),
        ]
        if run.sprt is not None:
            lower, upper = run.sprt.bounds
            info.append(
                (
                    "SPRT",
                    f"{run.sprt.describe()}; LLR bounds [{lower:.2f}, {upper:.2f}]; generalised "
                    "LLR on pentanomial pair outcomes (fishtest, fastchess)",
                )
            )
        budget = {k: v for k, v in run.extra.items() if k in ("decision_time", "bank", "call_cap")}
        if budget:
            info.append(
                ("budget", ", ".join(f"{k.replace('_', ' ')} {v} s" for k, v in budget.items()))
            )
        if "edge_loss" in run.extra:
            edge_loss = run.extra["edge_loss"]
            info.append(("edge loss", _EDGE_LOSS.get(edge_loss, str(edge_loss))))
        for key, value in run.extra.items():
            if key not in budget and key != "edge_loss":
                info.append((key.replace("_", " "), str(value)))
    info.append(("voided battles", _voided_text(data)))
    info += _provenance_info(data)
    info += _endpoint_info(data)
    recs = data.records
    versions = sorted(
        {(r.version_sep, r.version_poke_env, r.version_showdown) for r in recs if r.version_sep}
    )
    for sep, poke_env, showdown in versions:
        info.append(("versions", f"maple-sep {sep}, poke-env {poke_env}, Showdown {showdown}"))
    if recs:
        first = min((r.started_at for r in recs if r.started_at), default="")
        last = max((r.finished_at for r in recs if r.finished_at), default="")
        info.append(("dates", Markup("{} to {} UTC").format(_time(first), _time(last))))
    done = f"{len(recs)} done"
    if data.pending is not None:
        done += f", {data.pending} pending of {data.scheduled}"
    info.append(("battles so far", done))
    info.append(("report written", Markup("{} UTC").format(_time(data.read_at))))
    return info


def _sprt_plot(data: LogDir) -> Markup | None:
    """The SPRT's LLR after each pair, replayed from battles.csv as the run counted them."""
    run = data.run
    if run is None or run.sprt is None or run.seed is None:
        return None
    tests = SequentialTests.from_records(run.sprt, run.schedule(), data.records)
    return plots.sprt_llr(tests.histories(), run.sprt.bounds, data.names)


def render_report(data: LogDir, links: Mapping[str, Mapping[str, str | None]]) -> str:
    """report.html for ``data``; ``links[battle_id]`` has the battle's offline, showdown and log
    paths relative to LOG_DIR (None for a file that does not exist)."""
    standings = data.standings
    ranked = [c.id for c in standings.candidates]
    by_id = {s.id: s for s in data.candidates}
    summaries = [_summary(by_id[cid]) for cid in ranked if cid in by_id]
    free_ms = None
    if data.run is not None and "decision_time" in data.run.extra:
        free_ms = 1000 * float(data.run.extra["decision_time"])
    per_decision = all(s.per_decision for s in data.candidates)
    ordered = sorted(data.records, key=lambda r: (r.finished_at, r.battle_id))
    battles = [
        _BattleRow(
            n=n,
            r=r,
            blue=data.name(r.blue),
            red=data.name(r.red),
            winner=winner_label(r, data.names),
            **links.get(r.battle_id, {"offline": None, "showdown": None, "log": None}),
        )
        for n, r in enumerate(ordered, start=1)
    ]
    run = data.run
    kind = "League" if run is None else run.mode.capitalize()
    if run is None:
        title = f"{kind}: {data.path.name}"
    elif len(run.candidates) <= 4:
        title = f"{kind}: " + " vs ".join(data.name(c) for c in run.candidates)
    else:
        title = f"{kind} of {len(run.candidates)} candidates"
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            run_format=run.format if run else ", ".join(sorted({r.format for r in data.records})),
            read_at=f"{_short_time(data.read_at)} UTC",
            done=len(data.records),
            scheduled=data.scheduled,
            pending=data.pending,
            failures=FAILURES,
            statuses=[s.value for s in SIDE_STATUSES],
            standings=[_StandingRow(c, data.name(c.id)) for c in standings.candidates],
            bootstrap=standings.bootstrap,
            rating_methods=list(RATING_METHODS.items()),
            resampled="pairs" if standings.paired else "battles",
            ratings_svg=plots.ratings(standings, data.names),
            pairwise_svg=plots.pairwise(standings, data.names),
            times_svg=plots.decision_times(
                {s.id: s.decision_ms for s in data.candidates},
                data.names,
                ranked,
                free_ms,
                per_decision,
            ),
            per_decision=per_decision,
            summaries=summaries,
            battles=battles,
            run_info=_run_info(data),
            paired=standings.paired,
            pairs=standings.pairs,
            sprt=data.sprt,
            gauntlet=data.gauntlet,
            sprt_settings=data.run.sprt.describe() if data.run and data.run.sprt else "",
            collusion=check_collusion(data.records),
            sprt_svg=_sprt_plot(data),
            names=data.names,
        )
    )


# -- replay pages ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Move:
    name: str
    used: bool


@dataclass(frozen=True)
class _MonView:
    name: str
    species: str
    types: list[str]
    active: bool
    fainted: bool
    status: str
    tera: str
    item: str
    ability: str
    percent: float
    hp_text: str
    hp_class: str
    moves: list[_Move]


@dataclass(frozen=True)
class _TeamView:
    preview: list[str]
    mons: list[_MonView]


@dataclass(frozen=True)
class _StepView:
    turn: int
    title: str
    blue: _TeamView
    red: _TeamView
    log: list[Any]


class _Dex:
    """Display names of moves and abilities, and species' types, from poke-env's data."""

    def __init__(self, gen: int) -> None:
        self.moves = move_names(gen)
        self.species = pokedex(gen)

    def move(self, move: str) -> str:
        return self.moves.get(to_id(move), move)

    def _entry(self, species: str) -> tuple[list[str], list[str]]:
        found = self.species.get(to_id(species)) or self.species.get(to_id(species.split("-")[0]))
        return found or ([], [])

    def types(self, species: str) -> list[str]:
        return self._entry(species)[0]

    def ability(self, species: str, ability: str) -> str:
        names = {to_id(a): a for a in self._entry(species)[1]}
        return names.get(to_id(ability), ability)


def _mon_view(mon: Mon, used: set[str], dex: _Dex) -> _MonView:
    percent = mon.hp_percent
    if mon.max_hp != 100:  # the side's own view: exact HP
        hp_text = f"{mon.hp}/{mon.max_hp} HP ({percent:.0f}%)"
    else:
        hp_text = f"{percent:.0f}% HP"
    return _MonView(
        name=mon.name,
        species=mon.species,
        types=dex.types(mon.species),
        active=mon.active,
        fainted=mon.fainted,
        status=mon.status,
        tera=mon.tera,
        item=mon.item,
        ability=dex.ability(mon.species, mon.ability) if mon.ability else "",
        percent=percent,
        hp_text=hp_text,
        hp_class="low" if percent <= 20 else "mid" if percent <= 50 else "",
        moves=[_Move(dex.move(m), to_id(m) in used) for m in mon.moves],
    )


def _team_view(team: Team, used: set[tuple[str, str]], dex: _Dex, first: bool) -> _TeamView:
    return _TeamView(
        preview=team.preview if first else [],
        mons=[_mon_view(m, {u for n, u in used if n == m.name}, dex) for m in team.shown()],
    )


def _used_moves(lines: list[list[str]], player: str) -> set[tuple[str, str]]:
    """(Pokémon name, move id) of the moves ``player``'s Pokémon used in ``lines``."""
    used = set()
    for parts in lines:
        if parts[0] == "move" and len(parts) > 2 and parts[1].startswith(player):
            used.add((parts[1].split(":", 1)[-1].strip(), to_id(parts[2])))
    return used


def render_replay(
    record: BattleRecord,
    battle: Battle | None,
    players: Mapping[str, Mapping[str, str]],
    links: Mapping[str, str | None],
) -> str:
    """An offline replay page of ``record`` from its recorded ``battle`` (None: no log).

    ``players[side]`` has the side's ``id`` and ``label`` (the candidate's logName); ``links`` the
    report, Showdown replay and raw log, relative to the page.
    """
    labels = {side: players[side]["label"] for side in SIDES}
    steps: list[_StepView] = []
    if battle is not None:
        dex = _Dex(battle.gen)
        narrator = Narrator(battle, labels)
        for k, step in enumerate(battle.steps):
            views = {}
            for side in SIDES:
                player = battle.player_of[side]
                used = _used_moves(step.lines, player)
                views[side] = _team_view(step.teams[player], used, dex, k == 0)
            title = "Team preview and leads" if k == 0 else f"Turn {step.turn}"
            steps.append(
                _StepView(
                    step.turn, title, views["blue"], views["red"], narrator.entries(step.lines)
                )
            )
    winner = winner_label(record, {record.blue: labels["blue"], record.red: labels["red"]})
    if record.winner in (Winner.BLUE, Winner.RED):
        result = f"Winner: {winner}"
    else:
        result = "Tie" if record.winner is Winner.TIE else "No result"
    result += f" · {record.end_reason} after {record.turns} turns"
    statuses = [f"{labels[s]} {record.side(s).status.value}" for s in SIDES]
    if any(SIDE_STATUSES[record.side(s).status].failure for s in SIDES):
        result += " · " + ", ".join(statuses)
    player_ids = battle.player_of if battle is not None else {"blue": "p1", "red": "p2"}
    return (
        environment()
        .get_template("replay.html.j2")
        .render(
            battle_id=record.battle_id,
            format=record.format,
            seed=record.seed,
            players={
                side: {"label": labels[side], "id": players[side]["id"], "player": player_ids[side]}
                for side in SIDES
            },
            links=links,
            steps=steps,
            result=result,
        )
    )
