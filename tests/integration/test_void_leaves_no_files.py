"""A voided battle leaves no file in LOG_DIR: an edge lost mid-battle forfeits the side with
DISCONNECT and writes its ``.err`` before the battle is voided; left there, that file would sit
next to the row of the battle played again and read as its result."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import InProcessSource
from center.evaluation.playing.match import MatchSettings
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.recording.battle_files import battle_file_relpaths
from center.evaluation.recording.battles_csv import ResultsWriter, load_records
from center.evaluation.schedule import schedule_match
from center.scale.local_pool import run_local
from edge.contract.outcomes import Seen, SideStatus
from tests.integration.edges import AGENTS

pytestmark = pytest.mark.showdown


class RedEdgeLostMidBattle(InProcessSource):
    """In-process sides, except that red's edge goes away at its third decision of each battle
    (as a remote side marks it when its edge process dies)."""

    def open_side(self, model_id: str, side: str, *args: Any, **kwargs: Any) -> SideGuard:
        guard = super().open_side(model_id, side, *args, **kwargs)
        if side == "red":
            decide, calls = guard.decide, itertools.count()

            def decide_then_lose(*call: Any) -> Any:
                if next(calls) == 2:
                    guard.fail(Seen.LOST, "the red edge went away")
                return decide(*call)

            guard.decide = decide_then_lose  # type: ignore[method-assign]
        return guard


def test_a_battle_voided_twice_is_not_played_and_leaves_no_file(tmp_path, sim_host):
    source = RedEdgeLostMidBattle(AGENTS / "candidates.json")
    settings = MatchSettings("gen9bssfactory", tmp_path, Budget(), backend="sim")
    (battle,) = schedule_match("good_random", "good_team_choice", 1, 5)
    with ResultsWriter(tmp_path) as writer:
        summary = run_local([battle], source, settings, writer, server=sim_host, retries=1)
    assert [b.battle_id for b, _ in summary.failed] == [battle.battle_id]
    assert "lost mid-battle; voided" in summary.failed[0][1]
    assert load_records(tmp_path) == []
    left = [p for p in battle_file_relpaths(battle.battle_id) if (tmp_path / p).exists()]
    assert left == []
    # ... nor any file it is named in, whatever battle_file_relpaths lists (gzipped logs too).
    anywhere = [p.name for p in tmp_path.rglob(f"{battle.battle_id}.*")]
    assert anywhere == []


def test_files_of_an_attempt_that_was_never_booked_are_gone_when_the_battle_is_played(
    tmp_path, sim_host
):
    """A run killed after a battle wrote its files but before its row: the rerun plays it again,
    and the old attempt's ``.err`` (a DISCONNECT, say) must not sit next to the new OK row."""
    source = InProcessSource(AGENTS / "candidates.json")
    settings = MatchSettings("gen9bssfactory", tmp_path, Budget(), backend="sim")
    (battle,) = schedule_match("good_random", "good_team_choice", 1, 5)
    stale = tmp_path / "logs" / f"{battle.battle_id}.red.err"
    stale.parent.mkdir(parents=True)
    stale.write_text("DISCONNECT: the red edge went away\n")
    assert f"logs/{battle.battle_id}.red.err" in battle_file_relpaths(battle.battle_id)
    with ResultsWriter(tmp_path) as writer:
        summary = run_local([battle], source, settings, writer, server=sim_host)
    assert not summary.failed
    (record,) = load_records(tmp_path)
    assert record.red_side.status is SideStatus.OK
    assert not stale.exists()
