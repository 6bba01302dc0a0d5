"""What a battle runner sends back for each battle it was handed: plain data, no live objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from center.evaluation.records import COLUMNS, BattleRecord
from center.evaluation.schedule import ScheduledBattle

__all__ = ["BattleOutcome", "OutcomeKind", "battle_from_wire", "battle_to_wire"]


class OutcomeKind(StrEnum):
    """How a handed-out battle ended on its runner."""

    RECORDED = "recorded"  #: played: a record and its files, for the driver to write
    VOID = "void"  #: the center's infrastructure failed (Showdown, the simulator, an edge lost)
    FAILED = "failed"  #: a bug of the center: not played, not retried
    EDGE_DOWN = "edge_down"  #: an edge of the runner stayed down through --edge-wait


@dataclass(frozen=True)
class BattleOutcome:
    """One battle's outcome on a runner: ``row`` (battles.csv fields by column) and ``files``
    (relative path under LOG_DIR to bytes) when recorded, else ``message`` says why not."""

    kind: OutcomeKind
    battle_id: str
    row: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    message: str = ""
    #: the runner's code digests so far (model -> where -> digest): a runner's own edge sessions
    #: see them, the driver's process does not
    digests: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def recorded(cls, record: BattleRecord, files: dict[str, bytes]) -> BattleOutcome:
        """The outcome of a played battle."""
        return cls(
            OutcomeKind.RECORDED,
            record.battle_id,
            dict(zip(COLUMNS, record.to_row(), strict=True)),
            files,
        )

    def record(self) -> BattleRecord:
        """The battles.csv record of a recorded outcome."""
        return BattleRecord.from_row(self.row)


def battle_to_wire(battle: ScheduledBattle) -> dict[str, object]:
    """A scheduled battle as plain data for a runner."""
    return {
        "battle_id": battle.battle_id,
        "blue": battle.blue,
        "red": battle.red,
        "seed": battle.seed,
        "pair": list(battle.pair),
        "index": battle.index,
        "series": battle.series,
        "game": battle.game,
    }


def battle_from_wire(data: dict[str, object]) -> ScheduledBattle:
    """The inverse of :func:`battle_to_wire`."""
    pair = data["pair"]
    assert isinstance(pair, list) and len(pair) == 2
    seed, index, game = data["seed"], data["index"], data["game"]
    assert isinstance(seed, int) and isinstance(index, int) and isinstance(game, int)
    return ScheduledBattle(
        str(data["battle_id"]),
        str(data["blue"]),
        str(data["red"]),
        seed,
        (pair[0], pair[1]),
        index,
        str(data["series"]),
        game,
    )
