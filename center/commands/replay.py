"""``sep_replay LOG_DIR BATTLE_ID``: play a recorded battle again and check that it ends as recorded.

How a battle is played again is its backend's (``BackendSpec.replay``): on the simulator, its
input log on a fresh simulator host, without agents or edges. Every frame each player was sent
(timestamps aside), the turns and the winner must match, and the log's seeds must be those its
public ``seed`` stands for under the run's secret. Exit 0 when it does, 1 with the first
difference, 2 when the battle cannot be replayed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from center.commands.suggest import swapped_battle_id
from center.env.backend import BACKENDS, DEFAULT_RUN_BACKEND, backend_spec
from center.errors import CenterError, ConfigError
from center.evaluation.judging.series import MAX_BEST_OF
from center.evaluation.playing.match import replay_source_relpath
from center.evaluation.recording.battles_csv import load_records
from center.evaluation.recording.run_info import read_run_config
from center.evaluation.recording.run_secret import SECRET_FILE, read_run_secret
from center.evaluation.records import BattleRecord, Winner, log_relpath
from center.files import read_text
from center.showdown.sim_replay import InputLog, Resimulated
from center.showdown.sim_seeds import RunSecret, SimSeeds, public_seeds
from edge.contract.suggest import did_you_mean
from edge.visible_text import configure_cli_logging

__all__ = ["ReplayReport", "replay_battle", "sep_replay"]

logger = logging.getLogger(__name__)

SIDE_SLOTS = {"blue": "p1", "red": "p2"}


@dataclass
class ReplayReport:
    """What a replay found: the differences from the record (none means it ended as recorded)."""

    battle_id: str
    differences: list[str]
    turns: int = 0
    winner: str = ""
    """The simulator's name of the winner (empty: a tie)."""
    winner_label: str = ""
    """The winner as the candidate it stands for: ``ID (side)``, or ``none (tie)``."""
    frames: int = 0
    #: how the input log's seeds derive from the battle's seed: "run secret" or "public (a run
    #: older than run secrets)"; empty when they are not the battle's
    seeds: str = ""

    @property
    def same(self) -> bool:
        return not self.differences


def _without_timestamps(frame: str) -> str:
    return "\n".join(line for line in frame.split("\n") if not line.startswith("|t:|"))


def _read_protocol_log(path: Path) -> dict[str, list[str]]:
    frames: dict[str, list[str]] = {side: [] for side in SIDE_SLOTS}
    try:
        lines = read_text(path).splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the protocol log {path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        try:
            entry = json.loads(line)
            frames[entry["side"]].append(entry["frame"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{number}: not a protocol log line ({exc!r})") from exc
    return frames


def _turns(frames: list[str]) -> int:
    turns = 0
    for frame in frames:
        for line in frame.split("\n"):
            if line.startswith("|turn|"):
                turns = max(turns, int(line[len("|turn|") :] or 0))
    return turns


def _first_frame_difference(side: str, recorded: list[str], replayed: list[str]) -> str | None:
    for i, (want, got) in enumerate(zip(recorded, replayed, strict=False)):
        want, got = _without_timestamps(want), _without_timestamps(got)
        if want != got:
            want_lines, got_lines = want.split("\n"), got.split("\n")
            for j, (a, b) in enumerate(zip(want_lines, got_lines, strict=False)):
                if a != b:
                    return f"{side} frame {i}, line {j}: recorded {a[:200]!r}, replayed {b[:200]!r}"
            return f"{side} frame {i}: recorded {len(want_lines)} lines, replayed {len(got_lines)}"
    if len(recorded) != len(replayed):
        return f"{side}: recorded {len(recorded)} frames, replayed {len(replayed)}"
    return None


def _winner_of(record: BattleRecord, log: InputLog) -> str | None:
    """The simulator's winner name the record implies (None when it says nothing about it)."""
    if record.winner == Winner.BLUE:
        return log.start.players["p1"].name
    if record.winner == Winner.RED:
        return log.start.players["p2"].name
    if record.winner == Winner.TIE:
        return ""
    return None  # no result recorded (both sides failed): the simulator's own end is not booked


def winner_label(name: str, record: BattleRecord, log: InputLog) -> str:
    """The simulator's winner ``name`` as the candidate it stands for: ``ID (blue)``, or
    ``none (tie)``; a name that is neither player's is shown as it is."""
    if not name:
        return "none (tie)"
    for side, slot in SIDE_SLOTS.items():
        player = log.start.players.get(slot)
        if player is not None and player.name == name:
            return f"{getattr(record, side)} ({side})"
    return repr(name)


def compare(
    record: BattleRecord, log: InputLog, recorded: dict[str, list[str]], result: Resimulated
) -> list[str]:
    """Every way ``result`` differs from what was recorded, most telling first."""
    differences: list[str] = []
    for side, slot in SIDE_SLOTS.items():
        difference = _first_frame_difference(side, recorded[side], result.frames[slot])
        if difference:
            differences.append(difference)
    if not result.ended:
        differences.append("the replayed battle did not end")
    turns = max(_turns(result.frames["p1"]), _turns(result.frames["p2"]))
    if turns != record.turns:
        differences.append(f"turns: recorded {record.turns}, replayed {turns}")
    expected = _winner_of(record, log)
    if result.ended and expected is not None and result.winner != expected:
        differences.append(
            f"winner: recorded {winner_label(expected, record, log)}, "
            f"replayed {winner_label(result.winner, record, log)}"
        )
    differences.extend(f"the simulator refused: {message}" for message in result.errors)
    return differences


def seeds_of(log: InputLog) -> SimSeeds:
    """The seeds an input log starts its battle with (a player's is empty when it brought a team)."""
    return log.start.seed, log.start.players["p1"].seed or "", log.start.players["p2"].seed or ""


def check_seeds(log: InputLog, seed: int, secret: RunSecret | None) -> tuple[str, str]:
    """(how the log's seeds derive from ``seed``, "") or ("", the difference when they do not)."""
    played = seeds_of(log)

    def matches(expected: SimSeeds) -> bool:
        return all(got in ("", want) for got, want in zip(played, expected, strict=True)) and bool(
            played[0]
        )

    # A series' game has seeds of its own: the series' seed and its place in the series.
    games = range(MAX_BEST_OF)
    if secret is not None and any(matches(secret.sim_seeds(seed, game)) for game in games):
        return "run secret", ""
    if matches(public_seeds(seed)):
        return "public (a run older than run secrets)", ""
    against = (
        f"under the run secret ({SECRET_FILE})" if secret else f"(no {SECRET_FILE} in LOG_DIR)"
    )
    return "", f"the input log's seeds are not those of seed {seed} {against}"


def replay_battle(log_dir: Path, battle_id: str, host: Any = None) -> ReplayReport:
    """Play ``battle_id`` of ``log_dir`` again as its backend replays (on ``host``, or one started
    for the call: on the simulator, a SimHost).

    Raises ConfigError when the battle cannot be replayed (unknown, no file to replay it from, a
    backend that cannot replay).
    """
    log_dir = Path(log_dir)
    records = load_records(log_dir)
    record = next((r for r in records if r.battle_id == battle_id), None)
    if record is None:
        # A paired run's odd battles have the sides swapped in their ids: suggest that one first.
        swapped = swapped_battle_id(battle_id)
        hint = did_you_mean(
            battle_id, [r.battle_id for r in records], first=[swapped] if swapped else []
        )
        raise ConfigError(
            f"no battle {battle_id!r} in {log_dir / 'battles.csv'}{f'; {hint}' if hint else ''}"
        )
    run = read_run_config(log_dir)
    spec = backend_spec(run.backend if run is not None else DEFAULT_RUN_BACKEND)
    replay = spec.replay
    if replay is None:
        able = ", ".join(name for name, other in BACKENDS.items() if other.replay is not None)
        raise ConfigError(
            f"{log_dir} ran on --backend {spec.name}, which cannot replay a battle (--backend "
            f"{able} can)"
        )
    input_path = log_dir / replay_source_relpath(replay, battle_id)
    try:
        text = read_text(input_path)
    except OSError as exc:
        raise ConfigError(f"no {replay.source} for {battle_id}: {exc}") from exc
    # Lines end at "\n" only, as they were written: str.splitlines would also cut a team at a
    # U+0085 or U+2028 of a nickname, which JSON leaves as is.
    input_lines = [line.removesuffix("\r") for line in text.split("\n")]
    recorded = _read_protocol_log(log_dir / (record.log or log_relpath(battle_id)))
    if not recorded["blue"]:
        raise ConfigError(f"the protocol log of {battle_id} is empty")
    tag = recorded["blue"][0].split("\n", 1)[0].removeprefix(">")
    try:
        log = replay.parse(input_lines, tag)
    except ValueError as exc:
        return ReplayReport(battle_id, [f"{input_path.name}: {exc}"])
    seeds, seed_difference = check_seeds(log, record.seed, read_run_secret(log_dir))
    owned = host is None
    host = host or replay.start()
    try:
        result = replay.run(host, log)
    finally:
        if owned:
            host.stop()
    differences = compare(record, log, recorded, result)
    return ReplayReport(
        battle_id,
        differences + ([seed_difference] if seed_difference else []),
        turns=max(_turns(result.frames["p1"]), _turns(result.frames["p2"])),
        winner=result.winner,
        winner_label=winner_label(result.winner, record, log),
        frames=sum(len(f) for f in result.frames.values()),
        seeds=seeds,
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("log_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("battle_id")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def sep_replay(log_dir: Path, battle_id: str, verbose: int) -> None:
    """Play BATTLE_ID of LOG_DIR again as its backend replays it, without agents or edges (on the
    simulator: from its input log).

    Exits 0 when it ends exactly as recorded (winner, turns, every frame each player was sent,
    apart from timestamps), 1 with the first difference otherwise, 2 when it cannot be replayed.
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    configure_cli_logging(level)
    try:
        report = replay_battle(log_dir, battle_id)
    except CenterError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    if report.same:
        click.echo(
            f"same: {battle_id} ends as recorded ({report.turns} turns, winner "
            f"{report.winner_label}, {report.frames} frames; seeds: {report.seeds})"
        )
        return
    click.echo(f"different: {battle_id}: {report.differences[0]}")
    for more in report.differences[1:]:
        click.echo(f"  also: {more}")
    raise SystemExit(1)
