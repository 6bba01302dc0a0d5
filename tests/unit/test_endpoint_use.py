"""Endpoint requests and tokens per candidate: summed from battles.csv for the terminal summary and
the report, and read back by the checker for its report (its battles, then their sum)."""

from __future__ import annotations

from pathlib import Path

from center.evaluation.judging.standings_output import (
    EndpointUse,
    endpoint_use,
    format_endpoint_use,
)
from center.evaluation.recording.battles_csv import ResultsWriter, load_records
from center.evaluation.records import BattleRecord, SideRecord
from edge.checker.battles import _read_battles
from edge.checker.report import CheckReport, CheckResult, Status
from edge.contract.outcomes import SideStatus


def _battle(n: int, blue: str, red: str, blue_asked: tuple[int, int], red_asked: tuple[int, int]):
    def side(asked: tuple[int, int]) -> SideRecord:
        requests, tokens = asked
        return SideRecord(
            SideStatus.OK,
            endpoint_requests=requests,
            endpoint_tokens=tokens,
            endpoint_bytes=100 * requests,
        )

    return BattleRecord(
        battle_id=f"{blue}-vs-{red}-{n:04d}",
        blue=blue,
        red=red,
        winner="blue",  # type: ignore[arg-type]
        end_reason="win",  # type: ignore[arg-type]
        turns=9,
        duration_s=1.0,
        seed=n,
        format="gen9randombattle",
        blue_side=side(blue_asked),
        red_side=side(red_asked),
    )


def _log_dir(tmp_path: Path) -> Path:
    with ResultsWriter(tmp_path) as writer:
        writer.write(_battle(0, "llm", "random", (12, 1200), (0, 0)))
        writer.write(_battle(1, "random", "llm", (0, 0), (8, 805)))
        writer.write(_battle(2, "random", "heuristic", (0, 0), (0, 0)))
    return tmp_path


def test_each_candidate_that_asked_its_endpoints_gets_a_line(tmp_path: Path) -> None:
    records = load_records(_log_dir(tmp_path))
    assert endpoint_use(records) == {"llm": EndpointUse(20, 2005, 2000, 2)}
    assert format_endpoint_use(records) == [
        "model endpoints of llm: 20 requests, 2,005 tokens in 2 battles "
        "(10.0 requests, 1,002 tokens a battle)"
    ]
    quiet = [r for r in records if "llm" not in (r.blue, r.red)]
    assert format_endpoint_use(quiet) == []


def test_the_checkers_report_shows_each_battles_requests_and_tokens_and_their_sum(
    tmp_path: Path,
) -> None:
    # The checker's own run: its model against the random opponent, on both sides.
    with ResultsWriter(tmp_path / "llm") as writer:
        writer.write(_battle(0, "llm", "random", (12, 1200), (0, 0)))
        writer.write(_battle(1, "random", "llm", (0, 0), (8, 805)))
    battles = _read_battles(tmp_path / "llm" / "battles.csv", "llm")
    assert [(b.endpoint_requests, b.endpoint_tokens) for b in battles] == [(12, 1200), (8, 805)]
    report = CheckReport("llm", tmp_path / "candidates.json", battles=battles)
    report.results.append(CheckResult("battles", Status.PASS, "2 battles, all OK"))
    text = report.format()
    first = "llm-vs-random-0000: OK, winner llm (win, 9 turns), 12 endpoint requests, 1,200 tokens"
    assert first in text
    assert "model endpoints: 20 requests, 2,005 tokens in 2 battles (10.0 requests, 1,002" in text
    with ResultsWriter(tmp_path / "plain") as writer:
        writer.write(_battle(2, "random", "heuristic", (0, 0), (0, 0)))
    plain = _read_battles(tmp_path / "plain" / "battles.csv", "heuristic")
    quiet = CheckReport("heuristic", tmp_path / "candidates.json", battles=plain)
    quiet.results.append(CheckResult("battles", Status.PASS, "1 battle"))
    assert "endpoint" not in quiet.format()
