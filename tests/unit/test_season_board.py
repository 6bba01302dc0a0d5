"""A season's board: warm-started refits equal cold fits, one transaction for every format's
snapshot, and a snapshot that counts exactly the battles up to its ``through``."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import center.evaluation.judging.rating_methods as rating_methods
from center.evaluation.judging.rating_methods import pair_matrices
from center.evaluation.judging.rating_model import bradley_terry
from center.evaluation.judging.standings import compute_standings
from center.evaluation.records import BattleRecord, SideRecord, Winner
from center.evaluation.schedule import ScheduledBattle, schedule_league
from center.season.board import refit, refit_boards
from center.season.settings import SeasonSettings
from center.season.store import BattleKind, EntrantState, SeasonStore
from edge.contract.outcomes import EndReason, SideStatus

FORMATS = ("gen9randombattle", "gen8randombattle")
STRENGTH = {"a": 0.0, "b": 150.0, "c": -100.0, "d": 300.0}


def battles(count: int, seed: int = 3, skip: int = 0) -> list[ScheduledBattle]:
    """``count`` battles of a paired league of the four (index-major, twins one round apart),
    after the first ``skip``."""
    return schedule_league(sorted(STRENGTH), 80, seed, paired=True)[skip : skip + count]


def results(
    scheduled: list[ScheduledBattle], battle_format: str = FORMATS[0]
) -> list[BattleRecord]:
    """Each battle won by a draw from the known strengths (Elo scale), seeded by its id."""
    played = []
    for b in scheduled:
        p = 1.0 / (1.0 + 10.0 ** ((STRENGTH[b.red] - STRENGTH[b.blue]) / 400.0))
        played.append(
            BattleRecord(
                battle_id=b.battle_id,
                blue=b.blue,
                red=b.red,
                winner=Winner.BLUE if random.Random(b.battle_id).random() < p else Winner.RED,
                end_reason=EndReason.WIN,
                turns=10,
                duration_s=1.0,
                seed=b.seed,
                format=battle_format,
                blue_side=SideRecord(SideStatus.OK),
                red_side=SideRecord(SideStatus.OK),
            )
        )
    return played


@pytest.fixture
def store(tmp_path: Path) -> SeasonStore:
    s = SeasonStore(tmp_path, create=True)
    for entry in STRENGTH:
        s.add_entrant(
            entry,
            entry,
            list(FORMATS),
            baseline=False,
            final=False,
            admitted_at=0.0,
            state=EntrantState.ACTIVE,
        )
    yield s
    s.close()


def put(store: SeasonStore, scheduled: list[ScheduledBattle], battle_format: str) -> None:
    """Battles queued, then recorded, as the ladder does."""
    store.enqueue(scheduled, battle_format, BattleKind.LADDER)
    store.record(results(scheduled, battle_format))


def test_a_fit_started_from_its_answer_is_there_at_once() -> None:
    rng = np.random.default_rng(1)
    i = rng.integers(0, 4, 200)
    j = (i + rng.integers(1, 4, 200)) % 4
    scores, games = pair_matrices(i, j, (rng.random(200) < 0.6).astype(float), 4)
    exact = bradley_terry(scores, games)
    assert np.allclose(bradley_terry(scores, games, start=exact, max_iter=1), exact, atol=1e-8)
    assert not np.allclose(bradley_terry(scores, games, max_iter=1), exact, atol=1e-3)


def test_warm_started_standings_equal_cold_ones_within_the_fits_tolerance() -> None:
    played = results(battles(240, seed=7))
    before = compute_standings(played[:-20], bootstrap=100, seed=3, paired=True)
    start = {c.id: c.rating for c in before.candidates}
    start["a"] += 400.0  # a start far from the answer converges as well
    cold = compute_standings(played, bootstrap=100, seed=3, paired=True)
    warm = compute_standings(played, bootstrap=100, seed=3, paired=True, start=start)
    assert [c.id for c in warm.candidates] == [c.id for c in cold.candidates]
    for w, c in zip(warm.candidates, cold.candidates, strict=True):
        for field in ("rating", "rating_lo", "rating_hi", "gxe", "gxe_lo", "gxe_hi", "p_best"):
            assert getattr(w, field) == pytest.approx(getattr(c, field), abs=1e-4), field


def test_a_refit_starts_from_the_last_snapshot(
    store: SeasonStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = SeasonSettings(formats=FORMATS[:1], bootstrap=50)
    put(store, battles(110), FORMATS[0])
    first = refit(store, settings, tmp_path, FORMATS[0], 3)
    put(store, battles(10, skip=110), FORMATS[0])
    starts = []
    fit = rating_methods.bradley_terry

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        starts.append(kwargs.get("start"))
        return fit(*args, **kwargs)

    monkeypatch.setattr(rating_methods, "bradley_terry", spy)
    second = refit(store, settings, tmp_path, FORMATS[0], 3)
    elo = {r["entry"]: r["rating"] for r in first["rows"]}
    expected = np.log(10.0) / 400.0 * (np.array([elo[e] for e in sorted(elo)]) - 1500.0)
    assert starts and all(np.allclose(s, expected) for s in starts)
    cold = compute_standings(results(battles(120)), bootstrap=50, seed=3, paired=True)
    rows = {r["entry"]: r for r in second["rows"]}
    for c in cold.candidates:
        assert rows[c.id]["rating"] == pytest.approx(c.rating, abs=1e-4)


def test_every_formats_snapshot_is_one_transaction_counting_up_to_through(
    store: SeasonStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = SeasonSettings(formats=FORMATS, bootstrap=20)
    put(store, battles(20), FORMATS[0])
    put(store, battles(4, skip=20), FORMATS[1])
    boards = refit_boards(store, settings, tmp_path, 5)
    through = store.conn.execute("SELECT MAX(seq) FROM battles").fetchone()[0]
    for battle_format, board in boards.items():
        assert board["through"] == through
        assert board == store.latest_board(battle_format)
        counted = store.conn.execute(
            "SELECT COUNT(*) FROM battles WHERE format = ? AND seq <= ?", (battle_format, through)
        ).fetchone()[0]
        assert board["battles"] == counted
    assert (boards[FORMATS[0]]["battles"], boards[FORMATS[1]]["battles"]) == (20, 4)

    # Killed while the second format is fitted: neither snapshot is kept, the last ones stay.
    import center.season.board as board_module

    fit = board_module._fit

    def killed(store_, settings_, season_dir, battle_format, seed):  # type: ignore[no-untyped-def]
        if battle_format == FORMATS[1]:
            raise KeyboardInterrupt
        return fit(store_, settings_, season_dir, battle_format, seed)

    monkeypatch.setattr(board_module, "_fit", killed)
    put(store, battles(4, skip=24), FORMATS[0])
    with pytest.raises(KeyboardInterrupt):
        refit_boards(store, settings, tmp_path, 5)
    assert store.latest_board(FORMATS[0]) == boards[FORMATS[0]]
    assert store.conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 2
