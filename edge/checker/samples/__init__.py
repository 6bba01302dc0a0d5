"""Sample battles shipped with the package: real recorded decision points for the checker.

Each ``*.json.gz`` file is one player's side of a recorded battle (``{"format", "battle_tag",
"frames"}``, made by ``scripts/make_checker_samples.py``). :func:`decision_points` replays a sample
through a :class:`~edge.maple.replica.ReplicaBattle`, as an edge does, and stops at every request
that asks for a decision.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from poke_env.battle import AbstractBattle

from edge.contract.game_type import is_doubles_format
from edge.contract.legality import decision_required
from edge.errors import ReplicaError
from edge.maple.replica import ReplicaBattle

__all__ = [
    "SAMPLES_DIR",
    "DecisionPoint",
    "SampleBattle",
    "decision_points",
    "load_sample_battles",
    "samples_for_formats",
    "shipped_sample_battles",
]

SAMPLES_DIR = Path(__file__).parent


@dataclass(frozen=True)
class SampleBattle:
    """One player's frames of one recorded battle."""

    name: str
    battle_format: str
    username: str
    frames: tuple[str, ...]
    team: str | None = None


@dataclass(frozen=True)
class DecisionPoint:
    """The replica battle right after a request that asks for a decision.

    ``battle`` is updated in place as the replay goes on: use it before asking for the next point.
    Once the replay is exhausted it is the finished battle.
    """

    sample: SampleBattle
    index: int
    battle: AbstractBattle

    @property
    def kind(self) -> str:
        """``team preview``, ``forced switch`` or ``move request``."""
        if self.battle.teampreview:
            return "team preview"
        force_switch = self.battle.force_switch
        if isinstance(force_switch, list):  # a DoubleBattle: one flag per active slot
            return "forced switch" if any(force_switch) else "move request"
        if force_switch or self.battle.active_pokemon is None:
            return "forced switch"
        return "move request"

    @property
    def where(self) -> str:
        """A short human description, e.g. ``gen9randombattle sample, turn 4 (forced switch)``."""
        return f"{self.sample.name}, turn {self.battle.turn} ({self.kind})"


def load_sample_battles(path: str | Path) -> list[SampleBattle]:
    """Every player's side of a recording file (``.json`` or ``.json.gz``) as samples."""
    path = Path(path)
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    document = json.loads(data)
    name = path.name.split(".")[0]
    frames = document["frames"]
    return [
        SampleBattle(
            name=name if len(frames) == 1 else f"{name}:{username}",
            battle_format=str(document["format"]),
            username=str(username),
            frames=tuple(str(f) for f in player_frames),
        )
        for username, player_frames in frames.items()
    ]


def shipped_sample_battles(battle_format: str | None = None) -> list[SampleBattle]:
    """The samples shipped in this folder that a module of ``battle_format`` is checked on.

    Those of ``battle_format`` itself when some are shipped, else every one of its game type
    (singles or doubles); without a format, every singles sample (the checker's default). Sorted by
    file name.
    """
    samples: list[SampleBattle] = []
    for path in sorted(SAMPLES_DIR.glob("*.json.gz")):
        samples.extend(load_sample_battles(path))
    own = [s for s in samples if s.battle_format == battle_format]
    if own:
        return own
    doubles = battle_format is not None and is_doubles_format(battle_format)
    return [s for s in samples if is_doubles_format(s.battle_format) == doubles]


def samples_for_formats(formats: Sequence[str]) -> list[SampleBattle]:
    """The shipped samples a module that plays ``formats`` (its candidates.json ``formats``) is
    checked on: those of each format in turn (:func:`shipped_sample_battles`), each sample once;
    every singles one when it names no format."""
    if not formats:
        return shipped_sample_battles()
    chosen: dict[str, SampleBattle] = {}
    for battle_format in formats:
        for sample in shipped_sample_battles(battle_format):
            chosen.setdefault(sample.name, sample)
    return list(chosen.values())


def decision_points(sample: SampleBattle) -> Iterator[DecisionPoint]:
    """Replay ``sample`` and yield at every decision the player had to take.

    As poke-env's Player, a decision is due right after a request frame that is not a wait.
    Raises :class:`~edge.errors.ReplicaError` if a frame cannot be applied.
    """
    replica = ReplicaBattle(sample.username, sample.battle_format, team=sample.team)
    for index, frame in enumerate(sample.frames):
        battle = replica.feed([frame])
        if battle is None:
            raise ReplicaError(f"{sample.name}: frame {index} created no battle")
        if "|request|" in frame and decision_required(battle):
            yield DecisionPoint(sample, index, battle)
