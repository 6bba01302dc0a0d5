"""A season's settings: ``SEASON_DIR/season.json``, one dataclass field per key (its default and help).

:class:`SeasonSettings` is the one declaration: the ladder schedules from it, ``sep_ladder run``
prints it (:meth:`SeasonSettings.lines`) and docs/seasons.md's settings table is checked against
it. A bad file or value is one line (:class:`~center.errors.ConfigError`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from center.env.backend import BACKENDS, DEFAULT_RUN_BACKEND
from center.errors import ConfigError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.match import MatchSettings
from center.evaluation.recording.voided import DEFAULT_MAX_VOIDS
from edge.contract.season_ledger import (
    DEFAULT_CANDIDATES,
    DEFAULT_QUOTA,
    DEFAULT_WINDOW_H,
    SEASON_JSON,
)

__all__ = ["SeasonSettings", "load_settings"]


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class SeasonSettings:
    """Every setting of a season, as season.json gives it (absent keys take these defaults)."""

    formats: tuple[str, ...] = field(
        default=("gen9bssfactory",),
        metadata=_help("the season's formats; an entry plays those its `formats` lists (all)"),
    )
    candidates: str = field(
        default=DEFAULT_CANDIDATES,
        metadata=_help(
            "the entries' candidates.json (relative to SEASON_DIR), reread as it changes"
        ),
    )
    config: str = field(
        default="sep_config.json",
        metadata=_help("where the blue and red edges listen (relative to SEASON_DIR)"),
    )
    baselines: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "entries that are the season's baselines: always in the pool, qualify others"
        ),
    )
    seed: int | None = field(
        default=None, metadata=_help("the season's seed (battle seeds, run secret); none: random")
    )
    backend: str = field(
        default=DEFAULT_RUN_BACKEND,
        metadata=_help("where battles run: the seeded simulator (replayable) or the server"),
    )
    decision_time: float = field(
        default=Budget.decision_time, metadata=_help("free seconds per decision")
    )
    bank: float = field(default=Budget.bank, metadata=_help("a side's bank per battle (s)"))
    battle_time: float = field(
        default=Budget.battle_time, metadata=_help("a side's battle clock (s)")
    )
    max_turns: int = field(default=MatchSettings.max_turns, metadata=_help("turns before a tie"))
    concurrency: int = field(default=2, metadata=_help("battles at once (per format)"))
    edge_wait: float = field(
        default=60.0, metadata=_help("seconds a lost edge is waited for before it pauses play")
    )
    edge_loss: Literal["void", "forfeit", ""] = field(
        default="",
        metadata=_help(
            "a lost edge: void (replayed) or forfeit (the side's DISCONNECT); empty: forfeit "
            'when an edge of sep_config.json says "trusted": false, else void'
        ),
    )
    qualification_pairs: int = field(
        default=1, metadata=_help("pairs (two battles, one seed) a new entry plays per baseline")
    )
    pair_floor: int = field(
        default=2, metadata=_help("battles every pair of the pool plays before others are chosen")
    )
    provisional_battles: int = field(
        default=20, metadata=_help("battles below which a rating is marked provisional")
    )
    refit_battles: int = field(default=10, metadata=_help("refit the standings every N battles"))
    refit_seconds: float = field(
        default=60.0, metadata=_help("... or S seconds after a battle landed, whichever first")
    )
    bootstrap: int = field(default=200, metadata=_help("bootstrap resamples of each refit"))
    quarantine_after: int = field(
        default=3, metadata=_help("consecutive battles with a failure charged to an entry")
    )
    void_alarm_window: int = field(
        default=20, metadata=_help("the last N battles and voids the void-rate alarm counts")
    )
    void_alarm_rate: float = field(
        default=0.25, metadata=_help("the share of voids in that window that raises the alarm")
    )
    idle_alarm_minutes: float = field(
        default=30.0, metadata=_help("minutes without a finished battle that raise the alarm")
    )
    retry_backoff_s: float = field(
        default=5.0, metadata=_help("wait before a voided battle is played again (doubles)")
    )
    retry_backoff_max_s: float = field(
        default=600.0, metadata=_help("the longest wait before a voided battle is retried")
    )
    max_voids: int = field(
        default=DEFAULT_MAX_VOIDS,
        metadata=_help("voidings of one battle after which it is given up"),
    )
    batch: int = field(
        default=20, metadata=_help("battles of one format handed out before the next format's")
    )
    submission_quota: int = field(
        default=DEFAULT_QUOTA, metadata=_help("admitted submissions per participant per window")
    )
    submission_window_h: float = field(
        default=DEFAULT_WINDOW_H, metadata=_help("the quota's rolling window (hours)")
    )
    closes_at: str = field(
        default="",
        metadata=_help("ISO 8601 time at which the season closes by itself; empty: never"),
    )

    def __post_init__(self) -> None:
        if not self.formats:
            raise ConfigError(f"{SEASON_JSON}: formats must list at least one format")
        if self.backend not in BACKENDS:
            raise ConfigError(
                f"{SEASON_JSON}: backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}"
            )
        if self.edge_loss not in ("void", "forfeit", ""):
            raise ConfigError(f"{SEASON_JSON}: edge_loss is void, forfeit or empty")
        positive = (
            "concurrency",
            "refit_battles",
            "quarantine_after",
            "void_alarm_window",
            "batch",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{SEASON_JSON}: {name} must be at least 1")
        if not 0 < self.void_alarm_rate <= 1:
            raise ConfigError(f"{SEASON_JSON}: void_alarm_rate must lie in (0, 1]")
        if self.pair_floor < 0 or self.pair_floor % 2:
            raise ConfigError(f"{SEASON_JSON}: pair_floor counts whole pairs: an even number >= 0")
        if self.closes_at:
            self.closes_at_unix()

    @property
    def budget(self) -> Budget:
        """Each side's time."""
        return Budget(
            decision_time=self.decision_time, bank=self.bank, battle_time=self.battle_time
        )

    def closes_at_unix(self) -> float | None:
        """``closes_at`` as unix time (None: never)."""
        if not self.closes_at:
            return None
        try:
            at = datetime.fromisoformat(self.closes_at.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(
                f"{SEASON_JSON}: closes_at must be an ISO 8601 time, got {self.closes_at!r}"
            ) from None
        return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()

    def to_json(self) -> dict[str, Any]:
        """The effective settings as a season.json document."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def lines(self) -> list[str]:
        """The effective settings, one ``key = value  (help)`` line each, as ``run`` prints them."""
        width = max(len(f.name) for f in dataclasses.fields(self))
        return [
            f"{f.name:<{width}} = {json.dumps(_plain(getattr(self, f.name)))}"
            for f in dataclasses.fields(self)
        ]


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def load_settings(season_dir: str | Path) -> SeasonSettings:
    """The settings of ``SEASON_DIR/season.json`` (every default when the file is absent)."""
    path = Path(season_dir) / SEASON_JSON
    if not path.exists():
        return SeasonSettings()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: must hold a JSON object of settings")
    fields = {f.name: f for f in dataclasses.fields(SeasonSettings)}
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r}; known: {', '.join(fields)}")
    values: dict[str, Any] = {}
    for name, value in doc.items():
        default = fields[name].default
        values[name] = _checked(path, name, value, default)
    return SeasonSettings(**values)


def _checked(path: Path, name: str, value: Any, default: Any) -> Any:
    """``value`` of the type of the setting's default, or a ConfigError naming it."""
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"{path}: {name} must be a list of names, got {value!r}")
        return tuple(dict.fromkeys(value))
    if name == "seed":
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"{path}: seed must be an integer or null, got {value!r}")
        return value
    if isinstance(default, bool) or isinstance(value, bool):
        raise ConfigError(f"{path}: {name} must be a {type(default).__name__}, got {value!r}")
    if isinstance(default, float) and isinstance(value, int):
        value = float(value)
    if not isinstance(value, type(default)):
        raise ConfigError(f"{path}: {name} must be a {type(default).__name__}, got {value!r}")
    if isinstance(value, (int, float)) and value < 0:
        raise ConfigError(f"{path}: {name} must not be negative, got {value!r}")
    return value
