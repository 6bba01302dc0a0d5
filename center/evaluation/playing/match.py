"""Playing one scheduled battle between candidates and recording it.

:func:`play_battle` plays a battle on a :class:`PokemonEnv`'s session between two
:class:`SideGuard`-held sides (:mod:`center.evaluation.playing.battle_loop`) and returns its record
and files (in memory: the driver alone writes LOG_DIR); :func:`play_one` opens the sides first.
Sides come from a :class:`SideSource` (in-process modules for ``sep_eval``, edges for ``sep_main``);
a failure of the center's own infrastructure is not recorded (a rerun plays the battle), what a side
does wrong always is. Many battles: the driver, :mod:`center.scale.driver`.
"""

from __future__ import annotations

import gzip
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import click
import orjson

from center.env.backend import BattleReplay, backend_spec, server_url_backend
from center.env.pokemon_env import PLAYERS, SIDES, PokemonEnv
from center.env.tiebreak import TurnCap
from center.errors import CenterError, ConfigError, InfrastructureError
from center.evaluation.playing.battle_loop import (
    INFRASTRUCTURE_REASONS,
    drive_battle,
    forfeit_reason,
)
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.playing.side_opening import open_sides
from center.evaluation.recording.run_info import software_versions, utc_now
from center.evaluation.recording.voided import DEFAULT_MAX_VOIDS
from center.evaluation.records import BattleRecord, Winner, log_relpath, replay_relpath
from center.evaluation.schedule import ScheduledBattle
from center.files import COMPRESSED_SUFFIX
from center.showdown.sim_seeds import RunSecret
from edge.contract.agent import SEED_BOUND
from edge.contract.outcomes import EndReason, SideStatus
from edge.options import option
from edge.visible_text import visible_controls

logger = logging.getLogger(__name__)


class SideSource(Protocol):
    """Provides each battle's sides: a guarded side for a candidate on a side."""

    def open_side(
        self,
        model_id: str,
        side: str,
        battle: ScheduledBattle,
        battle_format: str,
        budget: Budget,
        username: str,
        agent_seed: int | None = None,
    ) -> SideGuard:
        """The candidate's side for this battle (a fresh Agent and policy, a fresh guard).

        ``username`` is the Showdown name of the center's player for that side (an edge's replica
        battle needs it to tell its own side from the opponent's). ``agent_seed`` is the Agent's
        ``instanceConfig["seed"]``: derived from the run secret, never the battle's public seed.
        """
        ...

    def close_side(self, guard: SideGuard) -> None:
        """Release what ``open_side`` acquired for the battle."""
        ...

    def apart(self) -> bool:
        """Whether a battle's two sides run on CPUs of their own (edges whose hellos share no
        CPU): then each of their calls is made while the other's is, their openings included."""
        ...

    def team(self, model_id: str) -> str | None:
        """The candidate's team text, for formats where teams are brought."""
        ...


@dataclass(frozen=True)
class MatchSettings:
    """How battles are played and where their files go."""

    battle_format: str
    log_dir: Path
    budget: Budget = field(default_factory=Budget)
    max_turns: int = field(
        default=300,
        metadata=option(
            "--max-turns",
            type=click.IntRange(1),
            help="A battle past this many turns ends by Showdown's tiebreak (more unfainted "
            "Pokémon, then mean HP %, then total HP; end reason tiebreak); a LOG_DIR started "
            "before keeps its rule (a tie).",
        ),
    )
    #: what ends a battle past ``max_turns`` (:data:`~center.env.tiebreak.TURN_CAP_RULES`)
    turn_cap: TurnCap = "tiebreak"
    showdown_version: str = ""
    #: where battles run: the seeded simulator ("sim") or the Showdown server ("server")
    backend: str = "server"
    #: a lost edge process: "void" the battle (not recorded, replayed on resume) or book it as the
    #: side's DISCONNECT forfeit ("forfeit", for participants who host their own edges)
    edge_loss: Literal["void", "forfeit"] = field(
        default="void",
        metadata=option(
            "--edge-loss",
            type=click.Choice(["void", "forfeit"]),
            help="A lost edge process: void the battle (replayed on resume; the run stops if the "
            "edge stays down) or book it as that side's DISCONNECT forfeit (when participants "
            "host their own edges, so that nobody can void a losing battle by disconnecting).",
        ),
    )
    #: whether the format's players bring teams; in a format that deals them (random formats),
    #: a team in candidates.json is never sent to Showdown
    brought_teams: bool = True
    #: the key of the simulator's seeds, battle tags and Agent seeds (None: ``run_local`` takes
    #: LOG_DIR's, see ``center.evaluation.recording.run_secret``)
    run_secret: RunSecret | None = None
    #: voidings of one battle (this run and its reruns) after which it is not played again
    max_voids: int | None = field(
        default=DEFAULT_MAX_VOIDS,
        metadata=option(
            "--max-voids",
            type=click.IntRange(1),
            help="A battle voided this many times (the center's infrastructure failed: Showdown, "
            "an edge, the host's memory), in this run and its reruns, is not played again; the "
            "run reports it, and the voids of each candidate's battles.",
        ),
    )
    #: both sides' team sheets shown at team preview (``--open-team-sheets``; the simulator)
    open_team_sheets: bool = field(
        default=False,
        metadata=option(
            "--open-team-sheets",
            is_flag=True,
            help="Show both sides' team sheets (all but stats) at team preview, as Showdown's "
            "Open Team Sheets rule does (--backend sim, a format with team preview).",
        ),
    )


class PlayedBattle(NamedTuple):
    """A battle's record and its files
    (:func:`~center.evaluation.recording.battle_files.battle_file_relpaths` names them), by path
    relative to LOG_DIR."""

    record: BattleRecord
    files: dict[str, bytes]


def play_battle(
    env: PokemonEnv,
    scheduled: ScheduledBattle,
    sides: dict[str, SideGuard],
    settings: MatchSettings,
    *,
    at_once: bool = False,
) -> PlayedBattle:
    """Play ``scheduled`` with ``sides`` (keyed player_0/player_1) and return its record and files
    (:func:`~center.evaluation.playing.battle_loop.drive_battle` plays it, ``at_once`` as it
    says)."""
    started_at, start = utc_now(), time.perf_counter()
    forfeited, invalid = drive_battle(env, scheduled.seed, sides, settings.budget, at_once=at_once)
    if forfeited is None and env.end_reason in INFRASTRUCTURE_REASONS:
        raise InfrastructureError(f"{scheduled.battle_id}: Showdown failed ({env.end_reason})")
    return _record(env, scheduled, sides, settings, forfeited, invalid, started_at, start)


def _record(
    env: PokemonEnv,
    scheduled: ScheduledBattle,
    sides: dict[str, SideGuard],
    settings: MatchSettings,
    forfeited: str | None,
    invalid: dict[str, int],
    started_at: str,
    start: float,
) -> PlayedBattle:
    blue_battle, red_battle = env.view("player_0"), env.view("player_1")
    assert blue_battle is not None and red_battle is not None
    winner: Winner
    end_reason: EndReason
    if forfeited is not None:
        both_failed = all(sides[p].fatal is not None for p in PLAYERS)
        both_out = all(sides[p].fatal == SideStatus.TIMEOUT for p in PLAYERS)
        winner = (
            (Winner.TIE if both_out and settings.budget.tie_when_both_out else Winner.NONE)
            if both_failed
            else Winner.RED
            if forfeited == "player_0"
            else Winner.BLUE
        )
        end_reason = forfeit_reason(sides[forfeited])
    elif env.end_reason == EndReason.WIN:
        winner = Winner.BLUE if blue_battle.won else Winner.RED
        end_reason = EndReason.WIN
    elif env.end_reason == EndReason.TIEBREAK:  # the rule's result (the server's tie: a forfeit)
        winner = {"player_0": Winner.BLUE, "player_1": Winner.RED}.get(
            env.tiebreak_winner or "", Winner.TIE
        )
        end_reason = EndReason.TIEBREAK
    else:
        winner, end_reason = Winner.TIE, env.end_reason or EndReason.TIE
    replay = replay_relpath(scheduled.battle_id)
    log = log_relpath(scheduled.battle_id)
    files: dict[str, bytes] = {}
    source, replay_spec = env.replay_source(), backend_spec(env.backend).replay
    if source is not None and replay_spec is not None:  # what replays it, or the battle is void
        if not source:
            raise InfrastructureError(
                f"{scheduled.battle_id}: the {env.backend} backend did not report the end of the "
                "battle"
            )
        path = replay_source_relpath(replay_spec, scheduled.battle_id) + COMPRESSED_SUFFIX
        files[path] = _gzip(("\n".join(source) + "\n").encode("utf-8"))
    files[str(Path(replay).with_suffix(PLAYERS_SUFFIX))] = _players(scheduled, sides, blue_battle)
    files[log + COMPRESSED_SUFFIX] = _protocol_log(
        {SIDES[p]: env.session.frames(p) for p in PLAYERS}
    )
    for p in PLAYERS:
        files.update(_side_files(log, SIDES[p], sides[p]))
    stats = {SIDES[p]: sides[p].stats for p in PLAYERS}
    versions = software_versions(settings.showdown_version)
    record = BattleRecord(
        battle_id=scheduled.battle_id,
        blue=scheduled.blue,
        red=scheduled.red,
        winner=winner,
        end_reason=end_reason,
        turns=max(blue_battle.turn, red_battle.turn),
        duration_s=time.perf_counter() - start,
        seed=scheduled.seed,
        format=settings.battle_format,
        replay=replay,
        blue_side=stats["blue"].record(invalid=invalid["player_0"]),
        red_side=stats["red"].record(invalid=invalid["player_1"]),
        started_at=started_at,
        finished_at=utc_now(),
        log=log,
        **versions,
        series=scheduled.series,
    )
    return PlayedBattle(record, files)


def _side_files(log: str, side: str, guard: SideGuard) -> dict[str, bytes]:
    """Next to the battle's log: what the side's code printed (``.out.gz``, up to 64 KiB a battle,
    gzipped) and why it failed (``.err``, a line and a traceback, kept plain for ``cat``)."""
    # User text: its control characters are written visibly, so that ``cat`` shows them instead
    # of obeying them.
    files = {}
    printed = guard.output()
    if printed:  # as captured (and capped) in-process or on its edge
        out = str(Path(log).with_suffix(f".{side}.out{COMPRESSED_SUFFIX}"))
        files[out] = _gzip(visible_controls(printed).encode("utf-8"))
    failure = guard.stats.failure
    if failure is not None and guard.stats.status != SideStatus.OK:
        text = f"{guard.stats.status.value}: {failure.line()}\n"
        if guard.stats.detail and not guard.stats.detail.endswith(failure.line()):
            text += f"{guard.stats.detail}\n"
        if failure.traceback:
            text += f"\n{failure.traceback.rstrip()}\n"
        files[str(Path(log).with_suffix(f".{side}.err"))] = visible_controls(text).encode("utf-8")
    return files


#: Beside a replay ``replays/ID.html``: who played each side (``replays/ID.players.json``).
PLAYERS_SUFFIX = ".players.json"


def _players(scheduled: ScheduledBattle, sides: dict[str, SideGuard], battle: Any) -> bytes:
    """Who played each side, beside where the battle's replay page goes (:data:`PLAYERS_SUFFIX`).

    For each side: the candidate id, its logName, its Showdown username (``sep0 c8178229``) and
    its decision times in ms, so that the pages built later from the raw log name the players.
    """
    usernames = {"blue": battle.player_username or "", "red": battle.opponent_username or ""}
    ids = {"blue": scheduled.blue, "red": scheduled.red}
    players: dict[str, dict[str, Any]] = {}
    for p in PLAYERS:
        side = SIDES[p]
        players[side] = {
            "id": ids[side],
            "logName": sides[p].agent_full_name.split(":")[0] or ids[side],
            "username": usernames[side],
            "decision_ms": [round(ms, 3) for ms in sides[p].stats.decision_ms],
        }
    return (json.dumps({"battle_id": scheduled.battle_id, **players}) + "\n").encode("utf-8")


def _gzip(data: bytes) -> bytes:
    # mtime=0: the same battle gives the same bytes, whichever process wrote it.
    return gzip.compress(data, compresslevel=6, mtime=0)


def replay_source_relpath(replay: BattleReplay, battle_id: str) -> str:
    """Where a battle's replay source goes, relative to LOG_DIR: the protocol log's path with the
    backend's suffix (the simulator's ``logs/ID.input.log``; stored with ``.gz`` added, read by
    :func:`center.files.read_text`)."""
    return str(Path(log_relpath(battle_id)).with_suffix(replay.suffix))


def _protocol_log(frames: dict[str, list[str]]) -> bytes:
    """Every raw frame each side received, in order, as JSON lines {side, i, frame}, gzipped."""
    lines = [
        _json_line({"side": side, "i": i, "frame": frame})
        for side, recorded in frames.items()
        for i, frame in enumerate(recorded)
    ]
    return _gzip(b"".join(lines))


def _json_line(entry: dict[str, Any]) -> bytes:
    """``entry`` as a line of JSON in ASCII: a frame's other characters escaped, so that no
    control character a player chose (a nickname's C1 or bidi ones) reaches a terminal raw.
    orjson writes the common all-ASCII line about four times faster than ``json.dumps``."""
    line = orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)
    return line if line.isascii() else (json.dumps(entry) + "\n").encode("ascii")


# -- many battles ---------------------------------------------------------------------------------


def start_backend(backend: str, server_url: str | None = None) -> Any:
    """Start what a run plays on, for the caller to ``stop()``: a simulator host (``sim``), or the
    Showdown server at ``server_url`` (default: found or started, ``server``)."""
    spec = backend_spec(backend)
    if server_url and not spec.takes_server_url:
        raise ConfigError(
            f"--server names a Showdown server: it needs --backend {server_url_backend()}"
        )
    return spec.start(server_url)


def play_one(
    env: PokemonEnv, scheduled: ScheduledBattle, source: SideSource, settings: MatchSettings
) -> PlayedBattle:
    """Open the sides of ``scheduled``, play it in ``env`` and return its record and files.

    What a battle runner (:mod:`center.scale.runner`) does with each battle handed to it. Raises
    :class:`EdgeDown` when an edge stayed down through its wait, :class:`InfrastructureError` when
    the battle is void.
    """
    names = {"player_0": scheduled.blue, "player_1": scheduled.red}
    sides: dict[str, SideGuard] = {}
    try:
        usernames = env.usernames()
        at_once = source.apart()
        open_sides(  # waits while an edge has no worker for a side: not booked
            sides,
            PLAYERS,
            lambda p: source.open_side(
                names[p],
                SIDES[p],
                scheduled,
                settings.battle_format,
                settings.budget,
                usernames[p],
                agent_seed=env.run_secret.agent_seed(
                    scheduled.seed, p, SEED_BOUND, game=scheduled.game
                ),
            ),
            source.close_side,
            scheduled.battle_id,
            at_once=at_once,
        )
        env.set_teams(
            {p: source.team(names[p]) if settings.brought_teams else None for p in PLAYERS}
        )
        env.set_series_game(scheduled.game)  # a series' dealt teams, new rolls
        try:
            played = play_battle(env, scheduled, sides, settings, at_once=at_once)
        except InfrastructureError:
            raise
        except CenterError as exc:  # e.g. ResetTimeout: Showdown could not start the battle
            raise InfrastructureError(f"{scheduled.battle_id}: {exc}") from exc
        # A side's edge went away mid-battle, and its outcome voids under the run's policy (a
        # trusted edge's loss under --edge-loss void): void the battle, replay it later.
        lost = [SIDES[p] for p in PLAYERS if sides[p].voids(settings.edge_loss)]
        if lost:
            raise InfrastructureError(
                f"{scheduled.battle_id}: the {lost[0]} edge was lost mid-battle; voided"
            )
        return played
    finally:
        for guard in sides.values():
            try:
                source.close_side(guard)
            except Exception as exc:
                logger.warning("closing a side of %s: %r", scheduled.battle_id, exc)
