"""``LOG_DIR/run.json`` (a run's parameters), the software versions and the dates records carry.

:func:`open_run` records the run's parameters (:class:`RunConfig`) so that a rerun with a different
configuration is refused instead of mixing two runs in one LOG_DIR; a rerun of the same command
resumes, and a larger N or more league candidates extend the run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from center.env.backend import BACKENDS
from center.env.tiebreak import TurnCap, check_turn_cap
from center.errors import ResultsError, RunConflictError
from center.evaluation.judging.sprt import SprtSettings
from center.evaluation.recording.battles_csv import check_recorded, load_records
from center.evaluation.schedule import (
    ScheduledBattle,
    check_paired_n,
    schedule_gauntlet,
    schedule_league,
    schedule_match,
    series_games,
)
from center.files import write_atomically

__all__ = [
    "RUN_JSON",
    "RunConfig",
    "open_run",
    "read_run_config",
    "read_run_json",
    "record_run_results",
    "software_versions",
    "utc_now",
]

logger = logging.getLogger(__name__)

RUN_JSON = "run.json"
_RUN_SCHEMA = 1


def utc_now() -> str:
    """The current time as ISO 8601 UTC with milliseconds, e.g. ``2025-01-31T12:00:00.123Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@functools.lru_cache(maxsize=1)
def _installed_versions() -> tuple[str, str]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return ""

    return version("maple-sep"), version("poke-env")


def software_versions(showdown: str = "") -> dict[str, str]:
    """The ``version_*`` fields of a record: this package, poke-env and the given Showdown."""
    sep, poke_env = _installed_versions()
    return {"version_sep": sep, "version_poke_env": poke_env, "version_showdown": showdown}


RunMode = Literal["match", "league", "gauntlet"]


@dataclass(frozen=True)
class RunConfig:
    """The parameters of a run, as stored in run.json.

    ``candidates`` is ``(blue, red)`` for a match and the league's ids (stored sorted) for a league.
    ``seed`` None means "the stored one, or a fresh random one for a new LOG_DIR" (see
    :func:`open_run`). ``extra`` holds anything else the command wants recorded (time budgets,
    versions); it is informational, never compared, and the latest run's value is kept.
    ``paired`` plays each seed twice with the sides swapped (N even; see
    :mod:`center.evaluation.schedule`). ``backend`` is where the battles run: ``sim`` (the seeded
    simulator, reproducible) or ``server`` (the Showdown server; a run.json without a backend is
    older than backends and ran there). ``sprt`` plays a match or gauntlet as sequential tests
    (paired; ``n`` is the maximum). A ``gauntlet``'s ``candidates`` are its candidate first, then
    the field (stored sorted). ``timer`` is each side's time
    (:func:`~center.evaluation.playing.timers.timer_record`): a rerun with other numbers is refused
    (a run.json without one is older than timers and takes the rerun's). ``best_of`` above 1 plays
    each scheduled battle as a series of up to that many games (``n`` counts series);
    ``open_team_sheets`` shows both teams' sheets at team preview.
    """

    mode: RunMode
    candidates: tuple[str, ...]
    n: int
    format: str
    seed: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    paired: bool = False
    backend: str = "server"
    sprt: SprtSettings | None = None
    #: what ends a battle at the turn cap; a rerun keeps the stored one (a run.json without one
    #: is older than the tiebreak: a tie)
    turn_cap: TurnCap = "tiebreak"
    timer: Mapping[str, Any] | None = None
    best_of: int = 1
    open_team_sheets: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("match", "league", "gauntlet"):
            raise ValueError(f"mode must be 'match', 'league' or 'gauntlet', got {self.mode!r}")
        candidates = tuple(self.candidates)
        if self.mode == "match" and len(candidates) != 2:
            raise ValueError(f"a match has exactly 2 candidates, got {candidates}")
        if self.mode == "league":
            candidates = tuple(sorted(candidates))
        if self.mode == "gauntlet":
            if len(candidates) < 2:
                raise ValueError("a gauntlet needs a candidate and at least one opponent")
            candidates = (candidates[0], *sorted(set(candidates[1:]) - {candidates[0]}))
        if self.sprt is not None and (self.mode == "league" or not self.paired):
            raise ValueError("an SPRT is played in pairs, in a match or a gauntlet")
        object.__setattr__(self, "candidates", candidates)
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        if self.paired:
            check_paired_n(self.n)
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")

    def schedule(self) -> list[ScheduledBattle]:
        """Every battle of the run, in playing order (the seed must be resolved)."""
        if self.seed is None:
            raise ValueError("the run's seed is not resolved yet; use open_run()")
        if self.mode == "match":
            blue, red = self.candidates
            battles = schedule_match(blue, red, self.n, self.seed, paired=self.paired)
        elif self.mode == "gauntlet":
            battles = schedule_gauntlet(
                self.candidates[0], self.candidates[1:], self.n, self.seed, paired=self.paired
            )
        else:
            battles = schedule_league(self.candidates, self.n, self.seed, paired=self.paired)
        return battles if self.best_of == 1 else series_games(battles, self.best_of)

    def to_json(self) -> dict[str, Any]:
        """The run.json document."""
        return {
            "schema": _RUN_SCHEMA,
            "mode": self.mode,
            "candidates": list(self.candidates),
            "n": self.n,
            "format": self.format,
            "seed": self.seed,
            "paired": self.paired,
            "backend": self.backend,
            "sprt": None if self.sprt is None else self.sprt.to_json(),
            "turn_cap": self.turn_cap,
            "timer": None if self.timer is None else dict(self.timer),
            "best_of": self.best_of,
            "open_team_sheets": self.open_team_sheets,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunConfig:
        """Parse a run.json document; ValueError/KeyError/TypeError when it is not one."""
        if doc.get("schema") != _RUN_SCHEMA:
            raise ValueError(f"unknown run.json schema {doc.get('schema')!r}")
        seed = doc["seed"]
        sprt = doc.get("sprt")  # absent from runs older than the SPRT
        return cls(
            mode=doc["mode"],
            candidates=tuple(str(c) for c in doc["candidates"]),
            n=int(doc["n"]),
            format=str(doc["format"]),
            seed=None if seed is None else int(seed),
            extra=dict(doc.get("extra") or {}),
            paired=bool(doc.get("paired", False)),  # absent from runs older than pairing
            backend=doc.get("backend", "server"),  # runs older than backends: the server
            sprt=None if sprt is None else SprtSettings.from_json(sprt),
            turn_cap=check_turn_cap(str(doc.get("turn_cap", "tie"))),  # older runs: a tie
            timer=_timer_of(doc.get("timer")),  # absent from runs older than timers
            best_of=int(doc.get("best_of", 1)),  # absent from runs older than series: 1
            open_team_sheets=bool(doc.get("open_team_sheets", False)),
        )


def _timer_of(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"timer must be an object, got {value!r}")
    return value


def _timer(timer: Mapping[str, Any] | None, fields: list[str]) -> str:
    """A timer as a rerun's refusal shows it: its profile and the ``fields`` that differ."""
    if timer is None:
        return "none"
    numbers = ", ".join(f"{f} {timer.get(f)}" for f in fields)
    return f"--timer {timer.get('name')}" + (f" ({numbers})" if numbers else "")


def _timer_conflict(stored: Mapping[str, Any], new: Mapping[str, Any] | None) -> str | None:
    """What differs between two timers' numbers (None: nothing)."""
    other = dict(new or {})
    fields = [f for f in stored if f != "name" and stored[f] != other.get(f)]
    if not fields:
        return None
    return f"its timer is {_timer(stored, fields)}, not {_timer(new, fields)}"


def read_run_config(log_dir: str | os.PathLike[str]) -> RunConfig | None:
    """The run recorded in ``LOG_DIR/run.json``, or None if there is none."""
    path = Path(log_dir) / RUN_JSON
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return RunConfig.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"{path} is not a valid run.json ({exc}); use a new LOG_DIR") from exc


def _pairing(config: RunConfig) -> str:
    return "paired (--paired)" if config.paired else "unpaired"


def _sprt(config: RunConfig) -> str:
    if config.sprt is None:
        return "none (no --sprt)"
    s = config.sprt
    return f"--sprt {s.elo0:g},{s.elo1:g} --alpha {s.alpha:g} --beta {s.beta:g}"


def _merge(stored: RunConfig, new: RunConfig, log_dir: Path) -> RunConfig:
    def conflict(what: str) -> RunConflictError:
        return RunConflictError(
            f"{log_dir} holds another run: {what}; rerun with the original parameters "
            "or use a new LOG_DIR"
        )

    if new.mode != stored.mode:
        raise conflict(f"it is a {stored.mode}, this command is a {new.mode}")
    if new.format != stored.format:
        raise conflict(f"its format is {stored.format}, not {new.format}")
    if new.seed is not None and new.seed != stored.seed:
        raise conflict(f"its seed is {stored.seed}, not {new.seed}")
    if new.sprt != stored.sprt:
        raise conflict(f"its test is {_sprt(stored)}, not {_sprt(new)}")
    if new.paired != stored.paired:
        raise conflict(f"its battles are {_pairing(stored)}, not {_pairing(new)}")
    if new.backend != stored.backend:
        raise conflict(f"its battles ran on --backend {stored.backend}, not {new.backend}")
    if new.best_of != stored.best_of:
        raise conflict(f"it plays best-of-{stored.best_of}, not best-of-{new.best_of}")
    if new.open_team_sheets != stored.open_team_sheets:
        said = {True: "with --open-team-sheets", False: "without --open-team-sheets"}
        raise conflict(
            f"it plays {said[stored.open_team_sheets]}, not {said[new.open_team_sheets]}"
        )
    timer = None if stored.timer is None else _timer_conflict(stored.timer, new.timer)
    if timer is not None:
        raise conflict(timer)
    if stored.mode == "gauntlet" and new.candidates[0] != stored.candidates[0]:
        raise conflict(f"it is the gauntlet of {stored.candidates[0]}, not {new.candidates[0]}")
    if stored.mode == "match" and new.candidates != stored.candidates:
        raise conflict(
            f"it is {stored.candidates[0]} (blue) vs {stored.candidates[1]} (red), "
            f"not {new.candidates[0]} vs {new.candidates[1]}"
        )
    missing = sorted(set(stored.candidates) - set(new.candidates))
    if missing:
        raise conflict(
            f"its {stored.mode} includes {', '.join(missing)}, missing from this command"
        )
    if new.n < stored.n:
        raise conflict(
            f"it has -n {stored.n}; a rerun may keep or raise -n, not lower it to {new.n}"
        )
    return dataclasses.replace(new, seed=stored.seed, turn_cap=stored.turn_cap)


def open_run(log_dir: str | os.PathLike[str], config: RunConfig) -> RunConfig:
    """Check ``config`` against what LOG_DIR already holds, record it in run.json, return it.

    The returned config has its seed resolved. Rules for a rerun on a LOG_DIR with a run.json:

    - mode (match or league) and format must be the same;
    - the seed must be the same, or None (then the stored seed is used);
    - paired or not, as stored;
    - on the same backend (a run mixes no reproducible battles with server ones);
    - with the same timer's numbers (a run.json older than timers takes the rerun's);
    - a match must have the same blue and the same red;
    - a league must include every stored candidate; it may add candidates (the new pairs are
      appended, the existing battles keep their ids and seeds);
    - ``n`` may stay or grow (the new battles are appended), never shrink.

    Anything else raises :class:`RunConflictError` with one line saying what differs. A new
    LOG_DIR with seed None gets a random 31-bit seed. In every case each row already in
    battles.csv must belong to the resulting schedule with the same sides and seed (this also
    guards a LOG_DIR whose run.json was lost) and be of the same format.
    """
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    stored = read_run_config(log_dir)
    if stored is not None:
        effective = _merge(stored, config, log_dir)
    elif config.seed is None:
        effective = dataclasses.replace(config, seed=secrets.randbits(31))
    else:
        effective = config
    records = load_records(log_dir)
    for r in records:
        if r.format != effective.format:
            raise RunConflictError(
                f"{log_dir}: battle {r.battle_id} was played in {r.format}, not {effective.format}"
            )
    check_recorded(effective.schedule(), records)
    write_atomically(
        log_dir / RUN_JSON, json.dumps(effective.to_json(), indent=2) + "\n", durable=True
    )
    if stored is not None and effective != stored:
        logger.info("%s: extending the run to %s", log_dir, effective)
    return effective


def read_run_json(log_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """LOG_DIR's run.json as a plain document, results included ({} without one or unreadable)."""
    try:
        doc = json.loads((Path(log_dir) / RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def record_run_results(log_dir: str | os.PathLike[str], results: Mapping[str, Any]) -> None:
    """Add ``results`` (e.g. ``{"sprt_results": [...]}``) to LOG_DIR's run.json, replacing those
    keys; the run's parameters are untouched. Nothing happens without a run.json."""
    path = Path(log_dir) / RUN_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    doc.update(results)
    write_atomically(path, json.dumps(doc, indent=2) + "\n", durable=True)
