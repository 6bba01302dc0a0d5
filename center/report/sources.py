"""What a LOG_DIR holds, read for the report: the run, its battles, the standings, who played.

Only reads, so it is safe while a run is writing: a torn last row of battles.csv is ignored, a
battle is listed once its row is there, and what is still to play is the schedule of run.json less
the recorded battles. The standings are computed as the run commands compute standings.csv (same
battles, same candidates, same method), so the report shows the same numbers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from center.errors import NoRunError
from center.evaluation.judging.gauntlet import gauntlet_section
from center.evaluation.judging.sequential import SequentialTests
from center.evaluation.judging.series import series_record, series_results
from center.evaluation.judging.standings import Standings, compute_standings
from center.evaluation.playing.match import PLAYERS_SUFFIX
from center.evaluation.recording.battles_csv import BATTLES_CSV, load_records
from center.evaluation.recording.run_info import RUN_JSON, RunConfig, read_run_config, utc_now
from center.evaluation.recording.voided import VoidedBattle, read_voided
from center.evaluation.records import REPLAY_SUBDIR, BattleRecord, log_relpath, replay_relpath
from center.files import existing
from edge.contract.outcomes import FAILURE_STATUSES, SIDE_STATUSES

logger = logging.getLogger(__name__)

SIDES = ("blue", "red")
FAILURES = tuple(s.value for s in FAILURE_STATUSES)
"""The report's status columns (the failure rows of the status table, in its order)."""


@dataclass(frozen=True)
class Player:
    """Who played a side of a battle (``replays/ID.players.json``)."""

    id: str
    log_name: str
    username: str = ""
    decision_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class FirstError:
    """The first battle (in finishing order) where a candidate's side failed, and why."""

    battle_id: str
    status: str
    line: str
    log: str


@dataclass
class CandidateSummary:
    """What the report says of one candidate besides its standing."""

    id: str
    log_name: str
    statuses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAILURES, 0))
    """Battles that ended with each non-OK status, counted as the standings count them."""
    first_error: FirstError | None = None
    decisions: int = 0
    decision_ms: list[float] = field(default_factory=list)
    per_decision: bool = True  # False: decision_ms holds per-battle means (no players files)
    max_ms: float = 0.0
    """The longest decision, from battles.csv's per-battle maxima (0: none timed)."""


@dataclass(frozen=True)
class LogDir:
    """Everything the report shows, read from one LOG_DIR at one moment."""

    path: Path
    run: RunConfig | None
    records: list[BattleRecord]
    scheduled: int | None  # battles in the run's schedule; None without run.json
    standings: Standings
    players: dict[str, dict[str, Player]]  # battle id -> side -> player
    names: dict[str, str]  # candidate id -> logName
    candidates: list[CandidateSummary]
    read_at: str
    sprt: list[dict[str, Any]] = field(default_factory=list)
    """The run's sequential tests so far, as the run computes them (from battles.csv's order)."""
    gauntlet: dict[str, Any] = field(default_factory=dict)
    """A gauntlet's candidate against each opponent (standings.json's ``gauntlet``), else {}."""
    voided: list[VoidedBattle] = field(default_factory=list)
    """Battles voided by the center's failures (not recorded, played again), oldest first."""
    run_doc: dict[str, Any] = field(default_factory=dict)
    """run.json as stored (its results, e.g. provenance, beside the parameters)."""

    @property
    def pending(self) -> int | None:
        return None if self.scheduled is None else max(0, self.scheduled - len(self.records))

    def name(self, candidate: str) -> str:
        return self.names.get(candidate, candidate)

    def replay_path(self, record: BattleRecord) -> str:
        return record.replay or replay_relpath(record.battle_id)

    def log_path(self, record: BattleRecord) -> str:
        return record.log or log_relpath(record.battle_id)


def _players(log_dir: Path, records: Sequence[BattleRecord]) -> dict[str, dict[str, Player]]:
    found: dict[str, dict[str, Player]] = {}
    for r in records:
        path = (log_dir / (r.replay or replay_relpath(r.battle_id))).with_suffix(PLAYERS_SUFFIX)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            found[r.battle_id] = {
                side: Player(
                    id=str(doc[side].get("id") or getattr(r, side)),
                    log_name=str(doc[side].get("logName") or getattr(r, side)),
                    username=str(doc[side].get("username") or ""),
                    decision_ms=tuple(float(x) for x in doc[side].get("decision_ms") or ()),
                )
                for side in SIDES
            }
        except FileNotFoundError:
            continue  # recorded before replays named their players, or the replay failed
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            logger.warning("%s: unreadable (%s); names from candidates.json or ids", path, exc)
    return found


def _names_from_replays(log_dir: Path, ids: Iterable[str]) -> dict[str, str]:
    """The logName each candidate of ``ids`` played under, from every replay's players file
    (a battle still running has one already; the latest file wins)."""
    wanted, names = set(ids), {}
    files = sorted(
        (log_dir / REPLAY_SUBDIR).glob(f"*{PLAYERS_SUFFIX}"), key=lambda p: (p.stat().st_mtime, p)
    )
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            for side in SIDES:
                if doc[side]["id"] in wanted and doc[side].get("logName"):
                    names[str(doc[side]["id"])] = str(doc[side]["logName"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.debug("%s: no names (%s)", path, exc)
    return names


def _names_from_candidates(path: Path | None) -> dict[str, str]:
    if path is None or not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {
            str(cid): str(entry.get("logName") or cid)
            for cid, entry in doc.items()
            if isinstance(entry, dict)
        }
    except (OSError, ValueError, AttributeError) as exc:
        logger.warning("%s: cannot read logNames (%s); ids are shown instead", path, exc)
        return {}


def _error_line(log_dir: Path, record: BattleRecord, side: str) -> str:
    """The one-line reason of a side's failure: the row's ``*_error`` column, else its .err file."""
    line = record.side(side).error
    if line:
        return line
    err = (log_dir / (record.log or log_relpath(record.battle_id))).with_suffix(f".{side}.err")
    try:
        with err.open(encoding="utf-8") as f:
            return f.readline().strip()
    except OSError:
        return ""


def _summaries(
    log_dir: Path,
    ids: Sequence[str],
    records: Sequence[BattleRecord],
    players: dict[str, dict[str, Player]],
    names: dict[str, str],
) -> list[CandidateSummary]:
    summaries = {cid: CandidateSummary(cid, names.get(cid, cid)) for cid in ids}
    means: dict[str, list[float]] = {cid: [] for cid in ids}
    timed: set[str] = set()  # candidates with per-decision times (from players files)
    for r in sorted(records, key=lambda r: (r.finished_at, r.battle_id)):
        for side in SIDES:
            cid = getattr(r, side)
            summary = summaries.get(cid)
            if summary is None:
                continue
            played = r.side(side)
            status = played.status
            summary.decisions += played.decisions
            longest = played.decision_ms_max
            summary.max_ms = max(summary.max_ms, longest)
            # A battle's mean says something only when one of its decisions was timed: a side can
            # count a decision it never took (its battle ended first), recorded as mean 0.
            if played.decisions and longest > 0:
                means[cid].append(played.decision_ms_mean)
            player = players.get(r.battle_id, {}).get(side)
            if player is not None:
                summary.decision_ms.extend(player.decision_ms)
                timed.add(cid)
            if SIDE_STATUSES[status].failure and summary.first_error is None:
                line = _error_line(log_dir, r, side)
                log = r.log or log_relpath(r.battle_id)
                stored = existing(log_dir / log)  # logs/ID.log.gz, or an older run's ID.log
                if stored is not None:
                    log = stored.relative_to(log_dir).as_posix()
                summary.first_error = FirstError(r.battle_id, status.value, line, log)
    for cid, summary in summaries.items():
        if cid not in timed and means[cid]:
            summary.decision_ms, summary.per_decision = means[cid], False
    return list(summaries.values())


def read_log_dir(log_dir: str | Path, *, candidates: Path | None = None) -> LogDir:
    """Read ``log_dir`` now. ``candidates`` (a candidates.json) names candidates by their logName
    in battles recorded before replays named their players.

    Raises :class:`NoRunError` when the folder holds no run, ResultsError when its files are not
    a run's.
    """
    path = Path(log_dir)
    if not (path / BATTLES_CSV).exists() and not (path / RUN_JSON).exists():
        raise NoRunError(f"{path} holds no run (neither {BATTLES_CSV} nor {RUN_JSON})")
    run = read_run_config(path)
    records = load_records(path)
    scheduled: int | None = None
    ids: list[str] = []
    if run is not None and run.seed is not None:
        schedule = run.schedule()
        in_run = {b.battle_id for b in schedule}
        records = [r for r in records if r.battle_id in in_run]  # as the run commands count them
        scheduled = len(schedule)
        ids = list(run.candidates)
    ids = sorted({*ids, *(r.blue for r in records), *(r.red for r in records)})
    players = _players(path, records)
    names = {cid: cid for cid in ids}
    names.update({k: v for k, v in _names_from_candidates(candidates).items() if k in names})
    names.update(_names_from_replays(path, names))
    paired = bool(run is not None and run.paired)
    rated = records
    if run is not None and run.best_of > 1 and run.seed is not None:  # as the run rates them
        series = series_results(run.schedule(), records, run.best_of)
        scheduled = len(records) + sum(
            run.best_of - len(r.games) for r in series if r.winner is None
        )
        if run.extra.get("rate", "series") == "series":
            rated = [series_record(r) for r in series if r.winner is not None]
    standings = compute_standings(rated, candidates=ids, paired=paired)
    games = standings if rated is records else compute_standings(records, candidates=ids)
    summaries = _summaries(path, ids, records, players, names)
    for summary, standing in zip(
        summaries, sorted(games.candidates, key=lambda c: c.id), strict=True
    ):
        summary.statuses = dict(standing.statuses)  # as standings.csv counts them
    sprt: list[dict[str, Any]] = []
    if run is not None and run.sprt is not None and run.seed is not None:
        tests = SequentialTests.from_records(run.sprt, run.schedule(), records)
        sprt = tests.results()
        # A battle whose test has decided will not be played: it is not pending.
        recorded = {r.battle_id for r in records}
        left = [b for b in run.schedule() if b.battle_id not in recorded and not tests.skip(b)]
        scheduled = len(records) + len(left)
    gauntlet: dict[str, Any] = {}
    if run is not None and run.mode == "gauntlet":
        gauntlet = gauntlet_section(
            records, run.candidates[0], run.candidates[1:], paired=run.paired, sprt=sprt
        )
    try:
        run_doc = json.loads((path / RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        run_doc = {}
    return LogDir(
        sprt=sprt,
        gauntlet=gauntlet,
        voided=read_voided(path),
        run_doc=run_doc if isinstance(run_doc, dict) else {},
        path=path,
        run=run,
        records=records,
        scheduled=scheduled,
        standings=standings,
        players=players,
        names=names,
        candidates=summaries,
        read_at=utc_now(),
    )
