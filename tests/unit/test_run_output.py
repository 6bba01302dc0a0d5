"""What a run prints: a gauntlet's per-opponent table, the SPRT's lines, sep_replay's winner."""

from __future__ import annotations

from typing import Any

from center.commands.replay import winner_label
from center.evaluation.judging.gauntlet import format_gauntlet, gauntlet_section
from center.evaluation.judging.rating_methods import RATING_METHODS
from center.evaluation.judging.sequential import SequentialTests
from center.evaluation.judging.sprt import SprtSettings
from center.evaluation.schedule import schedule_gauntlet, schedule_match
from center.showdown.sim_battle import SimPlayer, SimStart
from center.showdown.sim_replay import InputLog
from tests.unit.test_sprt import won_by
from tests.unit.test_standings import battle


def method_heads() -> str:
    """The gauntlet head's rating-method columns: one per entry of RATING_METHODS."""
    return "".join(f"  {m.diff_head:>8}" for m in RATING_METHODS.values())


def method_cells(line: dict[str, Any]) -> str:
    """A gauntlet line's rating-method cells: each method's diff, under its head."""
    return "".join(
        f"  {line[m.diff_column]:>+{max(8, len(m.diff_head))}.0f}" for m in RATING_METHODS.values()
    )


def test_a_gauntlet_prints_one_line_per_opponent():
    records = [
        battle("hero", "x", "blue", 0),
        battle("x", "hero", "red", 1),
        battle("hero", "longer_name", "red", 2),
        battle("longer_name", "hero", "red", 3),
    ]
    section = gauntlet_section(records, "hero", ["x", "longer_name"], paired=False)
    x, longer = section["opponents"]
    bt = RATING_METHODS["bt"].diff_column
    assert [f"{x[bt]:+.0f}", f"{longer[bt]:+.0f}"] == ["+352", "+0"]
    # The opponent's columns spelt out, then one column per rating method of the table.
    heads = method_heads()
    assert format_gauntlet(section).splitlines() == [
        "gauntlet: hero against each opponent",
        "opponent     battles     W    L    T    win%  95% CI         " + heads,
        "-" * (61 + len(heads)),
        "x                  2     2    0    0   100.0  [34.2, 100.0]  " + method_cells(x),
        "longer_name        2     1    1    0    50.0  [9.5, 90.5]    " + method_cells(longer),
    ]


def test_a_gauntlet_with_an_sprt_shows_each_test_with_its_llr_and_bounds():
    schedule = schedule_gauntlet("hero", ["x"], 4, 1, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 50), schedule, [])
    records = [won_by(b, "hero") for b in schedule[:2]]
    for r in records:
        tests.observe(r)
    section = gauntlet_section(records, "hero", ["x"], paired=True, sprt=tests.results())
    llr = tests.tests[("hero", "x")].current.llr
    lines = format_gauntlet(section).splitlines()
    assert lines[1].endswith(method_heads() + "  pairs 0-½-1-1½-2  SPRT")
    assert lines[3].endswith(f"  0-0-0-0-1         none yet (LLR {llr:.2f} in [-2.94, 2.94])")


def test_an_undecided_sprt_says_how_to_go_on():
    schedule = schedule_match("a", "b", 4, 1, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 50), schedule, [])
    (line,) = tests.summary_lines(4)
    assert line == (
        "SPRT a vs b: no decision yet (LLR 0.00 in [-2.94, 2.94]), 0 pairs (pentanomial "
        "0-0-0-0-0); SPRT elo0=0 elo1=50 (logistic Elo) alpha=0.05 beta=0.05; to go on, rerun the "
        "same command with a larger -n (e.g. -n 8): LOG_DIR resumes"
    )


def test_a_decision_is_announced_once_as_it_is_taken():
    schedule = schedule_match("a", "b", 40, 1, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 200), schedule, [])
    said: list[str] = []
    written = []
    for b in schedule:
        if tests.skip(b):
            break
        written.append(won_by(b, "a"))
        tests.observe(written[-1])
        said += tests.new_decisions()
    assert len(said) == 1 and said[0].startswith("SPRT a vs b: H1 accepted (LLR ")
    # A rerun reads the decision back: nothing new to announce.
    again = SequentialTests.from_records(SprtSettings(0, 200), schedule, written)
    assert again.tests[("a", "b")].decided is not None and again.new_decisions() == []


def test_the_live_line_of_several_tests_shows_the_latest_ones_llr_and_bounds():
    schedule = schedule_gauntlet("hero", ["x", "y"], 4, 1, paired=True)
    tests = SequentialTests.from_records(SprtSettings(0, 50), schedule, [])
    assert tests.live() == "SPRT 0/2 decided"
    for b in [b for b in schedule if "y" in (b.blue, b.red)][:2]:
        tests.observe(won_by(b, "hero"))
    llr = tests.tests[("hero", "y")].current.llr
    assert tests.live() == f"SPRT 0/2 decided; y: LLR {llr:.2f} [-2.94, 2.94]"
    assert tests.histories()[("hero", "y")] == [llr] and tests.histories()[("hero", "x")] == []


def test_sep_replay_names_the_winner_by_candidate_and_side():
    record = battle("alpha", "beta", "red", 0)
    players = {"p1": SimPlayer("sep p1"), "p2": SimPlayer("sep p2")}
    log = InputLog(SimStart("gen9randombattle", "seed", players, "tag"), [])
    assert winner_label("sep p2", record, log) == "beta (red)"
    assert winner_label("sep p1", record, log) == "alpha (blue)"
    assert winner_label("", record, log) == "none (tie)"
