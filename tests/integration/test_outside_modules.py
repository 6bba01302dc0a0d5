"""Modules written from docs/contract.md alone play like the team's own, in sep_main and sep_eval.

``contract_example``, ``plain_no_hooks`` and ``plain_raises_third`` (tests/agents) are plain classes
that import nothing from this project and define no optional hook. Real Showdown, real sep_edge
processes, the real CLIs.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from center.files import read_text
from tests.integration.edges import AGENTS, EdgeProcess, free_port, write_config

pytestmark = pytest.mark.showdown

SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
PLAIN = ["contract_example", "plain_no_hooks", "plain_raises_third"]


def _rows(log_dir: Path) -> list[dict[str, str]]:
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _check_plain_league(rows: list[dict[str, str]], log_dir: Path) -> None:
    assert len(rows) == 3 * 2
    for row in rows:
        for side in ("blue", "red"):
            model, status, error = row[side], row[f"{side}_status"], row[f"{side}_error"]
            if model == "plain_raises_third":
                assert status == "ERROR"
                assert error == (
                    "RuntimeError: third decision: this policy gives up (in policy.step)"
                )
                err = (log_dir / row["log"]).with_suffix(f".{side}.err").read_text()
                assert "RuntimeError: third decision" in err
            else:  # the well-behaved plain modules play every battle cleanly
                assert (status, error) == ("OK", ""), row
    clean = [r for r in rows if "plain_raises_third" not in (r["blue"], r["red"])]
    assert all(r["winner"] in ("blue", "red", "tie") and int(r["turns"]) > 0 for r in clean)
    assert any(r["winner"] in ("blue", "red") for r in clean), "no battle was decided"
    failed = [r for r in rows if r not in clean]
    # the raiser forfeits: its opponent wins
    assert all(
        r["winner"] == ("red" if r["blue"] == "plain_raises_third" else "blue") for r in failed
    )


def test_plain_modules_through_real_edges(showdown, shared_edges, tmp_path):
    edges = shared_edges
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [
            *SEP_MAIN,
            "--league",
            *PLAIN,
            "-n",
            "2",
            "--seed",
            "3",
            "-l",
            str(log_dir),
            "--config",
            str(edges["blue"].config),
            "--candidates",
            str(edges["blue"].candidates),
            "--server",
            showdown.url,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    _check_plain_league(_rows(log_dir), log_dir)
    # the end-of-run summary names the failing candidate with its first error line
    assert "plain_raises_third: 4 ERROR; first: RuntimeError: third decision" in run.stderr


def test_plain_modules_in_process(showdown, tmp_path):
    log_dir = tmp_path / "run"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "--league",
            *PLAIN,
            "-n",
            "2",
            "--seed",
            "3",
            "-l",
            str(log_dir),
            "--candidates",
            str(AGENTS / "candidates.json"),
            "--server",
            showdown.url,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    _check_plain_league(_rows(log_dir), log_dir)


@pytest.mark.parametrize("command", ["sep_main", "sep_eval"])
def test_an_unknown_format_exits_2_in_seconds_without_a_log_dir(command, tmp_path):
    log_dir = tmp_path / "never"
    cli = SEP_MAIN if command == "sep_main" else SEP_EVAL
    start = time.monotonic()
    run = subprocess.run(
        [
            *cli,
            "contract_example",
            "plain_no_hooks",
            "--format",
            "gen9randombatle",
            "-l",
            str(log_dir),
            "--candidates",
            str(AGENTS / "candidates.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert lines == [
        "error: unknown format 'gen9randombatle' in Showdown; did you mean gen9randombattle "
        "or gen8randombattle or gen7randombattle?"
    ]
    assert not log_dir.exists()
    assert time.monotonic() - start < 60  # a bound against a hang, not a benchmark


def test_a_model_that_cannot_load_is_named_before_the_first_battle(showdown, tmp_path):
    log_dir = tmp_path / "strict"
    run = subprocess.run(
        [
            *SEP_EVAL,
            "missing_functions",
            "contract_example",
            "--strict",
            "-l",
            str(log_dir),
            "--candidates",
            str(AGENTS / "candidates.json"),
            "--server",
            showdown.url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: model 'missing_functions' cannot be played: ContractError")
    assert "getUserPolicy" in run.stderr
    assert not log_dir.exists()


def _sep_main_preflight(
    config: Path, log_dir: Path, *models: str, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *SEP_MAIN,
            *models,
            "-n",
            "2",
            "-l",
            str(log_dir),
            "--config",
            str(config),
            "--candidates",
            str(AGENTS / "candidates.json"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_malformed_sep_config_is_refused_before_the_log_dir(tmp_path):
    config = tmp_path / "sep_config.json"
    config.write_text('{"blue": {"host": "127.0.0.1", "port": 51000}, "red": ')
    log_dir = tmp_path / "never"
    run = _sep_main_preflight(config, log_dir, "contract_example", "plain_no_hooks")
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and "sep_config" in run.stderr
    assert not log_dir.exists()


def test_sep_main_names_an_edge_that_is_wrong_before_the_log_dir(shared_edges, tmp_path):
    edges = shared_edges
    good = json.loads(edges["blue"].config.read_text())
    cases = {
        # nothing listens there
        "unreachable": (
            {**good, "blue": {"host": "127.0.0.1", "port": free_port()}},
            "error: cannot reach the blue edge at tcp://127.0.0.1:",
        ),
        # the red edge where the blue one should be
        "swapped": ({**good, "blue": good["red"]}, "error: the edge at tcp://127.0.0.1:"),
    }
    for name, (doc, expected) in cases.items():
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps(doc))
        log_dir = tmp_path / name
        run = _sep_main_preflight(config, log_dir, "contract_example", "plain_no_hooks")
        assert run.returncode == 2, (name, run.stderr)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(expected), (name, run.stderr)
        assert not log_dir.exists(), name
    assert "is the red edge, not blue" in lines[0]


def test_sep_main_names_a_model_its_edge_does_not_serve(start_edges, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    listed = json.loads((AGENTS / "candidates.json").read_text())
    (served / "candidates.json").write_text(json.dumps({"good_random": listed["good_random"]}))
    (served / "good_random").symlink_to(AGENTS / "good_random", target_is_directory=True)
    edges = start_edges(served / "candidates.json")
    log_dir = tmp_path / "run"
    run = _sep_main_preflight(edges["blue"].config, log_dir, "good_random", "contract_example")
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"error: the red edge at {edges['red'].endpoint} does not serve contract_example: "
        "add it to that edge's candidates.json (a running edge rereads the file when it changes, "
        "or on SIGHUP; an edge older than that needs a restart)"
    ]
    assert not log_dir.exists()


def test_sep_main_plays_and_records_a_model_that_cannot_load_unless_strict(shared_edges, tmp_path):
    edges = shared_edges
    config = edges["blue"].config
    strict = _sep_main_preflight(
        config, tmp_path / "strict", "missing_functions", "contract_example", extra=("--strict",)
    )
    assert strict.returncode == 2, strict.stderr
    assert strict.stderr.startswith(
        "error: model 'missing_functions' cannot be played: ContractError"
    )
    assert not (tmp_path / "strict").exists()
    log_dir = tmp_path / "lenient"
    run = _sep_main_preflight(config, log_dir, "missing_functions", "contract_example")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "warning: model 'missing_functions' cannot be played (ContractError" in run.stderr
    rows = _rows(log_dir)
    assert len(rows) == 2
    for row in rows:
        assert (row["blue_status"], row["red_status"], row["winner"]) == ("ERROR", "OK", "red")
        assert row["blue_error"].startswith("ContractError: "), row
        assert "getUserPolicy" in row["blue_error"]


@pytest.mark.parametrize("command", ["sep_eval", "sep_main"])
def test_make_obs_runs_once_per_decision_and_only_when_the_side_must_act(command, tmp_path):
    """A module that counts its calls: makeObs once per decision (each ends in a deploy) and once
    when the battle ends; never while the opponent makes a forced switch alone. The policy's last
    step (done=True) comes once, before onEpisodeEnd."""
    log_dir = tmp_path / "counts"
    args = ["plain_counts_calls", "plain_no_hooks", "-n", "3", "--seed", "2", "-l", str(log_dir)]
    if command == "sep_eval":
        run = subprocess.run(
            [*SEP_EVAL, *args, "--candidates", str(AGENTS / "candidates.json"), "-q"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
    else:
        config = write_config(tmp_path / "sep_config.json")
        edges = [
            EdgeProcess(side, config, AGENTS / "candidates.json", tmp_path / f"{side}.log")
            for side in ("blue", "red")
        ]
        try:
            for edge in edges:
                edge.start()
            run = subprocess.run(
                [
                    *SEP_MAIN,
                    *args,
                    "--config",
                    str(config),
                    "--candidates",
                    str(AGENTS / "candidates.json"),
                    "-q",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert run.returncode == 0, run.stderr[-3000:]
        finally:
            for edge in edges:
                edge.stop()
    counted = 0
    for row in _rows(log_dir):
        assert row["blue_status"] == "OK", row
        out = read_text(log_dir / "logs" / f"{row['battle_id']}.blue.out")  # .out.gz
        lines = out.splitlines()
        (line,) = [ln for ln in lines if ln.startswith("CALLS")]
        make_obs, deploy = (int(part.split("=")[1]) for part in line.split()[1:])
        assert make_obs == deploy + 1, line
        (done,) = [i for i, ln in enumerate(lines) if ln.startswith("DONE")]
        assert done < lines.index(line), out
        counted += 1
    assert counted == 3
