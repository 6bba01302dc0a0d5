"""Which tests are ``slow``, which run ``serial`` and which are ``quick``, in one table each;
``--serial`` (run, skip or only them: ``scripts/test.sh`` runs the serial ones in a pytest run of
their own), and the lock that lets a serial test run alone when pytest-xdist runs it beside others.

``slow``: a module whose tests each take about 5 s or more (real edges, battles, Ray, Chromium,
benchmarks), or one such test of a quicker module. ``pytest -m "not slow"`` is the first run.

``serial``: a test that must have the machine to itself. Edges share host-wide claims (worker user
ids, CPUs, and the host's memory budget under ``/run/sep-edge``), so a test that measures CPU
time, emulates a small host's memory, times a budget or a clock, reads host-wide state another
test's edges change, or uses fixed ports, would fail now and then beside another test. Opening
sessions on its edges itself is not a reason: the tests' edges give each worker 1 GiB, and such a
test waits while the budget is taken (``when_room``, ``tests/integration/edges.py``). Nor are Ray
runs: test_scale finds its run's processes by a marker, and Ray's local clusters take free ports.
Nor are the smoke runs of the benchmarks that play through ``sep_main``'s battle path
(bench_league unpinned, bench_scale, bench_template): their edges get the tests' 1 GiB
(``--memory-limit``), their battles wait for room, and they assert no figure. Nor is a
wall-clock limit whose outcome a slower machine cannot change: test_battle_clock's sides run out
of the battle clock sooner, never later, and test_load_limit's 2 s import stays twice the limit
it must fail and a tenth of the one it must pass.

``quick``: the inner loop (``scripts/test.sh --quick``, ``pytest -m quick``): the unit tests and a
few integration tests of the main path through edges of the test's own process, less what is slow.

A name in a table that no longer names a test file or function fails the collection, so a rename
cannot drop a mark silently.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Paths under tests/; "FILE::name" marks one test function (all its parameters) of FILE, and
# "FOLDER/" every test under FOLDER.
SLOW = frozenset(
    {
        "integration/test_battle_clock.py",
        "integration/test_bench_delegation.py",
        "integration/test_bench_env.py",
        "integration/test_bench_hosts.py",
        "integration/test_bench_league.py",
        "integration/test_bench_logdir.py",
        "integration/test_bench_pairing.py",
        "integration/test_bench_scale.py",
        "integration/test_bench_sprt.py",
        "integration/test_bench_template.py",
        "integration/test_center_fair_play.py",
        "integration/test_checker_battles.py",
        "integration/test_checker_doubles_battles.py",
        "integration/test_collusion.py",
        "integration/test_count_hops.py",
        "integration/test_demo.py",
        "integration/test_doubles_env.py::test_maskable_ppo_trains_on_the_seeded_doubles_env",
        "integration/test_doubles_outside.py",
        "integration/test_doubles_service.py",
        "integration/test_edge_reload.py",
        "integration/test_fair_play.py",
        "integration/test_hosted_edge.py",
        "integration/test_import_path.py",
        "integration/test_isolation.py",
        "integration/test_largest_observation.py",
        "integration/test_league.py",
        "integration/test_lenient_space.py",
        "integration/test_llm_endpoints.py",
        "integration/test_load_limit.py",
        "integration/test_loaded_server.py",
        "integration/test_memory_attack.py",
        "integration/test_model_template.py",
        "integration/test_outside_agents_player.py",
        "integration/test_outside_agents_replay.py",
        "integration/test_outside_modules.py",
        "integration/test_paired.py",
        "integration/test_provenance.py",
        "integration/test_ray_loopback.py",
        "integration/test_readme_samples.py",
        "integration/test_sample_agents_strength.py",
        "integration/test_sandbox.py",
        "integration/test_scale.py",
        "integration/test_season.py",
        "integration/test_season_health.py",
        "integration/test_season_web.py",
        "integration/test_seccomp.py",
        "integration/test_series.py",
        "integration/test_sides_at_once.py",
        "integration/test_sim_backend.py",
        "integration/test_sprt.py",
        "integration/test_submit.py",
        "integration/test_submit_kinds.py",
        "integration/test_timers_and_formats.py",
        "integration/test_train_to_league.py",
        "integration/test_turn_cap.py::test_a_run_tiebreaks_at_the_cap_and_an_older_log_dir_keeps_its_tie",
        "integration/test_waits_said.py",
        "unit/test_marks.py::test_skip_and_only_split_the_tests_between_them",
    }
)

SERIAL = frozenset(
    {
        # Benchmarks that pin edges to CPUs, make freezer groups, or open sessions themselves
        # (timed, so they do not wait for room in the host's memory budget).
        "integration/test_bench_delegation.py",
        "integration/test_bench_freezer.py",
        "integration/test_bench_league.py::test_bench_league_pinned_puts_the_edges_on_their_own_cpus_with_a_thinking_agent",
        "integration/test_bench_league.py::test_bench_league_apart_puts_the_two_edges_on_cpus_of_their_own",
        # Steps that must overlap on CPUs of their own: another test's edge's calls hold them.
        "integration/test_sides_at_once.py::test_a_league_plays_the_same_battles_whether_its_sides_are_asked_at_once_or_not",
        # A simulator run in a worker (8 GiB each); an edge's places and its idle-session reaping
        # timed with a few seconds' margin.
        "integration/test_center_fair_play.py::test_a_module_cannot_rebuild_its_opponents_team_from_what_it_is_given",
        "integration/test_center_fair_play.py::test_an_interrupted_sep_main_closes_its_sessions_on_the_edges",
        # CPU time per decision, CPU hogs, the host's memory budget emulated or exhausted.
        "integration/test_fair_play.py::test_a_cpu_hog_cannot_starve_an_honest_opponent_of_decision_time",
        "integration/test_fair_play.py::test_with_one_listed_cpu_one_worker_decides_at_a_time_pinned_to_it",
        "integration/test_memory_attack.py",
        # Host-wide state another test's edges change: the next edge on the host removes a killed
        # edge's work folder; the host IPC namespace's SysV segments are listed; the edge's
        # deadlines timed with a few seconds' margin; the sandbox's worker user ids and processes,
        # and its hostile leagues' small wall-clock bank and battles that must overlap (a battle
        # that waits for room in the host's memory budget starts late).
        "integration/test_fair_play.py::test_an_edge_removes_the_work_folder_a_killed_edge_left",
        "integration/test_fair_play.py::test_sysv_shared_memory_dies_with_its_worker_and_is_never_seen_by_another",
        "integration/test_fair_play.py::test_an_edge_ends_the_sessions_of_a_center_that_vanished_and_kills_their_workers",
        "integration/test_sandbox.py",
        # sep_config.json's fixed ports; it counts every sep_edge started in the repository.
        "integration/test_demo.py",
    }
)

# The quick run: a battle through edges of the test's process (real socket servers, the real
# protocol, sep_main's own process) with modules written from the contract, a status, a resume.
QUICK = frozenset(
    {
        "unit/",
        "integration/test_main_path.py",
    }
)


def quick_paths() -> list[str]:
    """QUICK's entries as pytest arguments from the repository's root (``scripts/test.sh --quick``
    collects only them)."""
    return sorted(f"tests/{entry}" for entry in QUICK)


def _check(table: frozenset[str]) -> None:
    for entry in table:
        path, _, function = entry.partition("::")
        if path.endswith("/"):
            if function or not (TESTS / path).is_dir():
                raise pytest.UsageError(f"tests/marks.py names {entry}, which is not a folder")
            continue
        if not (TESTS / path).is_file():
            raise pytest.UsageError(f"tests/marks.py names {path}, which is not a test file")
        if function and f"def {function}(" not in (TESTS / path).read_text():
            raise pytest.UsageError(f"tests/marks.py names {entry}, which is not a test of it")


def _marked(item: pytest.Item, table: frozenset[str]) -> bool:
    path = Path(str(item.path)).resolve()
    if not path.is_relative_to(TESTS):
        return False
    name = path.relative_to(TESTS).as_posix()
    function = getattr(item, "originalname", item.name)
    if name in table or f"{name}::{function}" in table:
        return True
    return any(entry.endswith("/") and name.startswith(entry) for entry in table)


def apply(items: list[pytest.Item]) -> None:
    """Add the ``slow``, ``serial`` and ``quick`` marks of the tables to the collected tests (a
    slow test is never quick)."""
    for table in (SLOW, SERIAL, QUICK):
        _check(table)
    for item in items:
        slow = _marked(item, SLOW)
        if slow:
            item.add_marker(pytest.mark.slow)
        if _marked(item, SERIAL):
            item.add_marker(pytest.mark.serial)
        if not slow and _marked(item, QUICK):
            item.add_marker(pytest.mark.quick)


SERIAL_CHOICES = ("run", "skip", "only")


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests ``--serial`` asks for (``skip``: the others; ``only``: the serial ones)."""
    choice = config.getoption("serial")
    if choice == "run":
        return
    keep_serial = choice == "only"
    kept, dropped = [], []
    for item in items:
        serial = item.get_closest_marker("serial") is not None
        (kept if serial == keep_serial else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@contextlib.contextmanager
def turn(item: pytest.Item) -> Iterator[None]:
    """Hold the run's test lock for one test (setup, call, teardown) under pytest-xdist: shared
    by ordinary tests, exclusive for a ``serial`` one. A serial test that waits holds the gate, so
    no new ordinary test starts meanwhile. Without xdist there is nothing to share: no lock."""
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        yield
        return
    # The run's own folder (pytest-N, the parent of each worker's basetemp): one lock per run.
    folder = item.config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
    exclusive = item.get_closest_marker("serial") is not None
    with (folder / "serial.gate").open("a") as gate, (folder / "serial.lock").open("a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
