"""The run secret: what it derives, where LOG_DIR keeps it, who may read it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from center.commands.replay import check_seeds
from center.errors import ResultsError
from center.evaluation.recording.run_secret import (
    PRIVATE_FOLDERS,
    SECRET_FILE,
    open_run_secret,
    read_run_secret,
    secure_log_dir,
)
from center.showdown.sim_replay import InputLog, parse_input_log
from center.showdown.sim_seeds import RunSecret, public_seeds


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_same_seed_gives_the_same_secret_and_other_seeds_other_ones() -> None:
    assert RunSecret.from_seed(12345) == RunSecret.from_seed(12345)
    assert RunSecret.from_seed(12345) != RunSecret.from_seed(12346)
    assert RunSecret.random() != RunSecret.random()


def test_the_simulators_seeds_are_not_the_public_schemes_and_depend_on_the_secret() -> None:
    one, two = RunSecret.from_seed(1), RunSecret.from_seed(2)
    assert one.sim_seeds(77) == one.sim_seeds(77)  # a pair's two battles share their teams
    assert one.sim_seeds(77) != two.sim_seeds(77)
    assert set(one.sim_seeds(77)).isdisjoint(public_seeds(77))


def test_what_the_players_see_carries_no_seed() -> None:
    secret = RunSecret.random()
    seed = 1_234_567
    tag = secret.battle_tag("gen9bssfactory", seed)
    assert tag.startswith("battle-gen9bssfactory-") and str(seed) not in tag
    assert tag == secret.battle_tag("gen9bssfactory", seed)
    assert tag != RunSecret.random().battle_tag("gen9bssfactory", seed)
    seeds = {secret.agent_seed(seed, p) for p in ("player_0", "player_1")}
    assert len(seeds) == 2 and seed not in seeds
    assert all(0 <= s < 2**32 for s in seeds)
    assert "<hidden>" in repr(secret) and secret.hex() not in repr(secret)


def test_a_new_log_dir_gets_a_secret_only_its_user_can_read(tmp_path: Path) -> None:
    secret = secure_log_dir(tmp_path, None)
    path = tmp_path / SECRET_FILE
    assert _mode(path) == 0o600
    assert read_run_secret(tmp_path) == secret
    for name in PRIVATE_FOLDERS:
        assert _mode(tmp_path / name) == 0o700
    assert secure_log_dir(tmp_path, None) == secret  # a rerun keeps it
    assert secure_log_dir(tmp_path, 5) == secret  # whatever --seed says: the run's is kept


def test_a_seeded_secret_is_the_same_on_a_fresh_log_dir(tmp_path: Path) -> None:
    for name in "abcd":
        (tmp_path / name).mkdir()
    assert open_run_secret(tmp_path / "a", 9) == open_run_secret(tmp_path / "b", 9)
    assert open_run_secret(tmp_path / "c", None) != open_run_secret(tmp_path / "d", None)


def test_folders_others_could_read_are_closed(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir(mode=0o755)
    (tmp_path / "logs").chmod(0o755)
    secure_log_dir(tmp_path, 3)
    (tmp_path / SECRET_FILE).chmod(0o644)
    assert read_run_secret(tmp_path) is not None
    assert _mode(tmp_path / "logs") == 0o700 and _mode(tmp_path / SECRET_FILE) == 0o600


def test_a_log_dir_without_a_secret_has_none_and_a_broken_one_is_one_clear_error(
    tmp_path: Path,
) -> None:
    assert read_run_secret(tmp_path) is None
    (tmp_path / SECRET_FILE).write_text("not hex\n")
    with pytest.raises(ResultsError, match="not a run secret"):
        read_run_secret(tmp_path)


def _input_log(seeds: tuple[str, str, str]) -> InputLog:
    battle, p1, p2 = seeds
    lines = [
        f'>start {{"formatid":"gen9bssfactory","seed":"{battle}"}}',
        f'>player p1 {{"name":"sep p1","seed":"{p1}"}}',
        f'>player p2 {{"name":"sep p2","seed":"{p2}"}}',
    ]
    return parse_input_log(lines, "battle-gen9bssfactory-1")


def test_sep_replay_accepts_the_seeds_of_the_run_secret_or_of_the_older_public_scheme() -> None:
    secret = RunSecret.random()
    assert check_seeds(_input_log(secret.sim_seeds(42)), 42, secret) == ("run secret", "")
    # A battle of a LOG_DIR older than run secrets (no run.secret, or one made on a later rerun).
    for stored in (None, secret):
        seeds, difference = check_seeds(_input_log(public_seeds(42)), 42, stored)
        assert seeds.startswith("public") and not difference
    # Seeds that are not the battle's own: another seed's, or another run's secret.
    for played in (secret.sim_seeds(43), RunSecret.random().sim_seeds(42)):
        seeds, difference = check_seeds(_input_log(played), 42, secret)
        assert not seeds and "not those of seed 42 under the run secret" in difference
    _, difference = check_seeds(_input_log(secret.sim_seeds(42)), 42, None)
    assert "no run.secret" in difference
