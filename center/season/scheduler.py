"""What the season plays next: qualifications first, then every pair's floor, then where a result
tells most.

Battles are scheduled a pair at a time: two battles of one seed with the sides swapped, with the
ids and seeds a paired league gives a pair's battles k and k + 1
(:func:`~center.evaluation.schedule.schedule_league`), so every battle is replayable and counted
in pairs. Above the floor, the pair chosen maximises ``p(1 - p) (w_a + w_b) / (1 + n_ab)``: close
ratings (p near ½), wide intervals (w) and few battles between them (n).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from center.evaluation.schedule import ScheduledBattle, schedule_league
from center.season.entrants import pool
from center.season.settings import SeasonSettings
from center.season.store import BattleKind, Entrant, EntrantState, SeasonStore

__all__ = ["PairChoice", "Scheduler", "information"]

#: The interval width (Elo) assumed for an entry that has no rating yet.
UNRATED_WIDTH = 800.0


@dataclass(frozen=True)
class PairChoice:
    """A pair to play next in a format, and why."""

    a: str
    b: str
    kind: BattleKind
    why: str


def information(rating_a: float, rating_b: float, width_a: float, width_b: float, n: int) -> float:
    """How much a pair's next result tells: ``p(1-p) (w_a + w_b) / (1 + n)``, p the expected
    score of a against b on the Elo scale."""
    p = 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))
    return p * (1.0 - p) * (width_a + width_b) / (1.0 + n)


class Scheduler:
    """Chooses and queues the season's next battles from the store and the latest boards."""

    def __init__(self, store: SeasonStore, settings: SeasonSettings, seed: int) -> None:
        self.store = store
        self.settings = settings
        self.seed = seed

    def _counts(self, battle_format: str, kind: BattleKind) -> Counter[tuple[str, str]]:
        """Battles per pair in a format, recorded or queued (given-up ones count: they hold a
        place in the pair's sequence but will not be played)."""
        rows = self.store.conn.execute(
            "SELECT pair_a, pair_b, COUNT(*) AS n FROM (SELECT pair_a, pair_b FROM battles WHERE "
            "format = ? AND kind = ? UNION ALL SELECT pair_a, pair_b FROM queue WHERE format = ? "
            "AND kind = ? AND given_up = 0) GROUP BY pair_a, pair_b",
            (battle_format, kind.value, battle_format, kind.value),
        ).fetchall()
        return Counter({(r["pair_a"], r["pair_b"]): int(r["n"]) for r in rows})

    def choose(
        self,
        battle_format: str,
        entrants: Mapping[str, Entrant],
        board: Mapping[str, Any] | None,
    ) -> PairChoice | None:
        """The pair to play next in ``battle_format`` (None: fewer than two can play)."""
        baselines = sorted(
            e.entry
            for e in entrants.values()
            if e.baseline and e.state is EntrantState.ACTIVE and battle_format in e.formats
        )
        qualifying = sorted(
            e.entry
            for e in entrants.values()
            if e.state is EntrantState.QUALIFYING and battle_format in e.formats
        )
        wanted = 2 * self.settings.qualification_pairs
        counts = self._counts(battle_format, BattleKind.QUALIFICATION)
        for entry in qualifying:
            for baseline in baselines:
                a, b = sorted((entry, baseline))
                if counts[(a, b)] < wanted:
                    return PairChoice(a, b, BattleKind.QUALIFICATION, f"qualification of {entry}")
        members = pool(entrants, battle_format)
        if len(members) < 2:
            return None
        counts = self._counts(battle_format, BattleKind.LADDER)
        pairs = list(itertools.combinations(members, 2))
        low = min(pairs, key=lambda p: (counts[p], p))
        if counts[low] < self.settings.pair_floor:
            return PairChoice(*low, BattleKind.LADDER, f"floor ({counts[low]} battles)")
        rows = {r["entry"]: r for r in (board or {}).get("rows", [])}

        def score(pair: tuple[str, str]) -> tuple[float, tuple[str, str]]:
            a, b = (rows.get(x, {}) for x in pair)
            return (
                information(
                    _number(a.get("rating"), 1500.0),
                    _number(b.get("rating"), 1500.0),
                    _width(a),
                    _width(b),
                    counts[pair],
                ),
                pair,
            )

        best = max(pairs, key=score)
        return PairChoice(*best, BattleKind.LADDER, f"information {score(best)[0]:.1f}")

    def queue_pair(self, choice: PairChoice, battle_format: str) -> list[ScheduledBattle]:
        """Queue the pair's next two battles (one seed, sides swapped) and return them."""
        k = self.store.next_index(choice.a, choice.b)
        k += k % 2  # a pair starts on an even index
        twins = schedule_league([choice.a, choice.b], k + 2, self.seed, paired=True)[k:]
        self.store.enqueue(twins, battle_format, choice.kind)
        return twins


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else default


def _width(row: Mapping[str, Any]) -> float:
    lo, hi = row.get("rating_lo"), row.get("rating_hi")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return max(float(hi) - float(lo), 1.0)
    return UNRATED_WIDTH
