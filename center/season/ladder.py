"""``sep_ladder run``: the season's loop, from start (or a kill) to its close.

Each round reads candidates.json (new entries join, qualifying against the baselines), then
hands each format's next battles to the driver (:func:`~center.scale.driver.drive_battles`) on
a runner pool kept per format; the scheduler (:mod:`center.season.scheduler`) chooses them
lazily, the store keeps them queued until recorded. Voids wait and are retried with backoff; an
edge that stays down pauses play until it answers; commands set flags in the store, which the
loop reads between battles.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from center.errors import ConfigError
from center.evaluation.playing.match import MatchSettings, start_backend
from center.evaluation.recording.provenance import source_digests
from center.evaluation.recording.run_info import RUN_JSON, RunConfig, read_run_json
from center.evaluation.recording.run_secret import secure_log_dir
from center.evaluation.recording.voided import replay_allowed
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.files import write_atomically
from center.scale.driver import RunSummary, drive_battles
from center.scale.launch import ScaleOptions
from center.scale.local_pool import LocalRunnerPool
from center.season.board import refit_boards
from center.season.edges import (
    SeasonEdges,
    connect_edges,
    edge_clients,
    edge_trust,
    runner_source,
)
from center.season.entrants import read_entries, sync_entrants
from center.season.health import alarms_by_kind, check_qualification, check_quarantine
from center.season.heartbeat import Heartbeat
from center.season.scheduler import Scheduler
from center.season.settings import SeasonSettings
from center.season.store import EntrantState, SeasonStore
from center.season.writer import SeasonWriter
from edge.contract.candidates import load_candidates

if TYPE_CHECKING:
    from center.scale.ray_pool import RayRunnerPool

__all__ = ["Ladder"]

logger = logging.getLogger(__name__)

_PLAYING = (EntrantState.ACTIVE, EntrantState.QUALIFYING)


class Ladder:
    """A season being run: ``say`` gets the lines the organizer reads (settings, events);
    ``scale`` plays the battles on battle runners (``--workers``/``--ray``) instead of this
    process's threads."""

    def __init__(
        self,
        season_dir: Path,
        settings: SeasonSettings,
        *,
        say: Callable[[str], None],
        poll_s: float = 1.0,
        scale: ScaleOptions | None = None,
    ) -> None:
        self.season_dir = Path(season_dir)
        self.settings = settings
        self.scale = scale
        self.say = say
        self.poll_s = poll_s
        self.candidates = self.season_dir / settings.candidates
        self.config = self.season_dir / settings.config
        self.store = SeasonStore(self.season_dir, create=True)
        stored = self.store.meta("seed")
        if stored is None:
            chosen = settings.seed if settings.seed is not None else secrets.randbits(31)
            with self.store.transaction():
                self.store.set_meta("seed", str(chosen))
            stored = str(chosen)
        elif settings.seed is not None and int(stored) != settings.seed:
            raise ConfigError(f"season.json's seed {settings.seed} is not the season's ({stored})")
        self.seed = int(stored)
        self.scheduler = Scheduler(self.store, settings, self.seed)
        self.started_at = time.time()
        self.boards: dict[str, dict[str, Any]] = {}
        self._since_refit = 0
        self._refit_at = time.monotonic()
        self._candidates_mtime = -1.0
        self._alarms: dict[str, str] = {}
        self.edges: SeasonEdges | None = None
        self._server: Any = None
        self._pools: dict[str, LocalRunnerPool | RayRunnerPool] = {}
        self.settings_by_format: dict[str, MatchSettings] = {}

    # -- start and stop -------------------------------------------------------------------------

    def edge_loss(self) -> Literal["void", "forfeit"]:
        """The season's policy for a lost edge (season.json, else by the edges' trust)."""
        if self.settings.edge_loss:
            return "forfeit" if self.settings.edge_loss == "forfeit" else "void"
        return "void" if all(edge_trust(self.config).values()) else "forfeit"

    def run(self) -> None:
        """Run the season until it is closed (``sep_ladder close`` or ``closes_at``)."""
        from center.showdown import SHOWDOWN_VERSION
        from center.showdown.formats import check_format

        formats = {f: check_format(f, doubles=True) for f in self.settings.formats}
        if self.scale is not None and len(formats) > 1:
            raise ConfigError(
                "--workers/--ray play one format: a season of several formats plays on this "
                "process's threads (a runner pool per format)"
            )
        secret = secure_log_dir(self.season_dir, self.seed)
        with SeasonWriter(self.season_dir, self.store) as writer:
            appended = writer.flush()
            again = self.store.unstart_all()
            self.say(f"season {self.season_dir}: seed {self.seed}, settings (season.json):")
            for line in self.settings.lines():
                self.say(f"  {line}")
            if appended or again:
                self.say(
                    f"resumed: {appended} recorded battles appended to battles.csv, {again} "
                    "battles cut by the last stop played again from their seeds"
                )
            self.store.event("started", f"ladder started (seed {self.seed})")
            self.settings_by_format = {
                f: MatchSettings(
                    spec.id,
                    self.season_dir,
                    self.settings.budget,
                    self.settings.max_turns,
                    showdown_version=SHOWDOWN_VERSION,
                    backend=self.settings.backend,
                    edge_loss=self.edge_loss(),
                    brought_teams=spec.teams_brought,
                    run_secret=secret,
                    max_voids=self.settings.max_voids,
                )
                for f, spec in formats.items()
            }
            for f in self.settings.formats:
                board = self.store.latest_board(f)
                if board is not None:
                    self.boards[f] = board
            self._sync()
            self.write_run_json()
            if self.store.battles():  # the boards as the store has them (a kill mid-refit)
                self._refit_all()
            # Runners of --workers/--ray start their own simulator hosts (or find the server).
            if self.scale is None:
                self._server = start_backend(self.settings.backend)
            heartbeat = Heartbeat(self.season_dir, lambda: edge_clients(self.config))
            heartbeat.start()
            try:
                self._loop(writer)
            finally:
                heartbeat.stop()
                self._disconnect()
                if self._server is not None:
                    self._server.stop()
        from center.season.snapshot import write_snapshot

        if self.store.flag("closing"):
            write_snapshot(self.store, self.settings, self.season_dir, self.seed, say=self.say)

    def _connect(self) -> None:
        """Both edges, checked (ConfigError when one does not answer or serve)."""
        playable = [e for e, x in self.store.entrants().items() if x.state in _PLAYING]
        self.edges = connect_edges(
            self.config,
            self.candidates,
            playable,
            edge_wait=self.settings.edge_wait,
            edge_loss=self.edge_loss(),
        )

    def _start_pools(self) -> None:
        """The runner pools: this process's threads (one pool per format), or the Ray runners of
        ``--workers``/``--ray`` (one format)."""
        assert self.edges is not None
        if self.scale is None:
            self._pools = {
                f: LocalRunnerPool(s, self.edges.source, self._server, self.settings.concurrency)
                for f, s in self.settings_by_format.items()
            }
            return
        from center.scale.loopback import describe, keep_local_ray_on_loopback, ray_listeners
        from center.scale.spec import RunnerSpec

        if self.scale.address is None:  # a local Ray: before Ray is imported, which reads it
            keep_local_ray_on_loopback()
        from center.scale.ray_pool import RayRunnerPool  # Ray, only now

        ((battle_format, settings),) = self.settings_by_format.items()
        source = runner_source(
            self.config,
            self.candidates,
            edge_wait=self.settings.edge_wait,
            edge_loss=self.edge_loss(),
        )
        self._pools[battle_format] = RayRunnerPool(
            RunnerSpec(settings, source, None),
            workers=self.scale.workers,
            address=self.scale.address,
            concurrency=self.settings.concurrency,
            max_restarts=self.scale.max_restarts,
        )
        if self.scale.address is None:
            self.say(describe(ray_listeners()))

    def _disconnect(self) -> None:
        if self.edges is not None:
            self._save_provenance()  # before the pools go: their runners' digests with them
        for pool in self._pools.values():
            pool.close()
        self._pools = {}
        if self.edges is not None:
            self.edges.close()
            self.edges = None

    def _wait_for_edges(self, why: str = "") -> bool:
        """Connect, retrying while the edges do not answer; False when the season closes first.
        While they do not, play is paused: ``edges_down`` in the store says since when and why
        (``why``: what stopped play, else the first failed connection)."""
        waited = False
        while not self._closing():
            try:
                self._connect()
            except ConfigError as exc:
                if not waited:
                    cause = why or str(exc)
                    self.say(f"edges: {cause}; play paused until they answer")
                    logger.warning("edges down: %s; play paused until they answer", cause)
                    with self.store.transaction():
                        down = {"since": time.time(), "why": " ".join(cause.split())}
                        self.store.set_meta("edges_down", json.dumps(down))
                    self.store.event("edge_down", cause)
                    waited = True
                self._check_alarms()
                time.sleep(max(self.poll_s, 2.0))
                continue
            self._start_pools()  # a mistake here (no Ray at --ray's address) is one line
            if waited or self.store.meta("edges_down"):  # (down when the last run stopped)
                self.say("edges: answering again; play resumes")
                with self.store.transaction():
                    self.store.set_meta("edges_down", None)
                self.store.event("edge_back", "the edges answer again; play resumes")
            return True
        return False

    # -- the loop -------------------------------------------------------------------------------

    def _closing(self) -> bool:
        closes_at = self.settings.closes_at_unix()
        if closes_at is not None and time.time() >= closes_at and not self.store.flag("closing"):
            self.store.set_flag("closing", True, f"closes_at {self.settings.closes_at} reached")
        return self.store.flag("closing")

    def _halt(self) -> bool:
        return self._closing() or self.store.flag("paused")

    def _loop(self, writer: SeasonWriter) -> None:
        if not self._wait_for_edges():
            return
        while not self._closing():
            self._sync()
            if self.store.flag("paused"):
                self._check_alarms()
                time.sleep(self.poll_s)
                continue
            busy = False
            for battle_format in self.settings.formats:
                summary = drive_battles(
                    self._battles(battle_format),
                    self._pools[battle_format],
                    writer,
                    self.season_dir,
                    concurrency=self.settings.concurrency,
                    on_done=self._landed,
                    stop=self._halt,
                    retries=0,
                    max_voids=self.settings.max_voids,
                )
                busy = busy or bool(summary.played or summary.failed)
                self._after(summary)
                if summary.stopped:
                    self._disconnect()
                    if not self._wait_for_edges(summary.stopped):
                        return
                    break
            self._refit_due(idle=not busy)
            self._check_alarms()
            if not busy:
                time.sleep(self.poll_s)

    def _battles(self, battle_format: str) -> Iterator[ScheduledBattle]:
        """This format's next battles, at most ``batch``: the queue's waiting ones first, then
        new pairs; chosen when the driver asks, so that results and commands count at once."""
        handed: set[str] = set()
        for _ in range(self.settings.batch):
            if self._halt():
                return
            entrants = self.store.entrants()
            now = time.time()
            waiting = None
            for queued in self.store.queue():
                b = queued.battle
                playable = all(
                    x in entrants and entrants[x].state in _PLAYING for x in (b.blue, b.red)
                )
                if (
                    queued.format == battle_format
                    and playable
                    and not queued.given_up
                    and queued.not_before <= now
                    and b.battle_id not in handed
                ):
                    waiting = queued
                    break
            if waiting is None:
                choice = self.scheduler.choose(
                    battle_format, entrants, self.boards.get(battle_format)
                )
                if choice is None:
                    return
                twins = self.scheduler.queue_pair(choice, battle_format)
                logger.info("queued %s (%s)", [t.battle_id for t in twins], choice.why)
                battle = twins[0]  # its twin waits in the queue for the next hand-out
            else:
                battle = waiting.battle
            handed.add(battle.battle_id)
            self.store.mark_started(battle.battle_id)
            yield battle

    def _landed(self, record: BattleRecord | None) -> None:
        """After each battle recorded (or given up): quarantine, qualification, a refit when due."""
        if record is None:
            return
        self._since_refit += 1
        for entry in check_quarantine(self.store, self.settings, (record.blue, record.red)):
            self.say(f"quarantined: {entry} ({self.store.entrants()[entry].cause})")
        for entry, entered in check_qualification(self.store, self.settings):
            cause = self.store.entrants()[entry].cause
            self.say(f"{'qualified' if entered else 'rejected'}: {entry} ({cause})")
        if self._since_refit >= self.settings.refit_battles:
            self._refit_all()

    def _after(self, summary: RunSummary) -> None:
        """Voided battles wait (doubling backoff) or are given up; nothing stays handed out."""
        for battle, why in summary.failed:
            queued = {q.battle.battle_id: q for q in self.store.queue()}.get(battle.battle_id)
            voids = queued.voids if queued else 0
            give_up = not replay_allowed(self.season_dir, battle.battle_id, self.settings.max_voids)
            backoff = min(
                self.settings.retry_backoff_s * 2**voids, self.settings.retry_backoff_max_s
            )
            self.store.note_void(
                battle.battle_id, f"{battle.battle_id}: {why}", backoff, give_up=give_up
            )
            logger.warning(
                "%s voided (%s); %s",
                battle.battle_id,
                why,
                "given up" if give_up else f"retried in {backoff:.0f} s",
            )
        self.store.unstart_all()
        self._save_provenance()

    def _refit_due(self, *, idle: bool) -> None:
        late = time.monotonic() - self._refit_at >= self.settings.refit_seconds
        if self._since_refit and (late or idle):
            self._refit_all()

    def _refit_all(self) -> None:
        """Every board refit, their snapshots kept in one transaction."""
        started = time.monotonic()
        logger.info("refitting the boards (%d battles recorded)", len(self.store.battles()))
        boards = refit_boards(self.store, self.settings, self.season_dir, self.seed)
        self.boards.update(boards)
        logger.info("refit: %s in %.2f s", ", ".join(boards), time.monotonic() - started)
        self._since_refit = 0
        self._refit_at = time.monotonic()

    def _check_alarms(self) -> None:
        """Raise (log, output, event) each alarm when it starts and say when it clears; the
        store's ``alarms`` holds the lines raised now (their text follows, e.g. the minutes)."""
        raised = alarms_by_kind(self.store, self.settings, self.started_at)
        for kind, line in raised.items():
            if kind not in self._alarms:
                logger.warning("alarm: %s", line)
                self.say(f"alarm: {line}")
                self.store.event("alarm", line)
        for kind, line in self._alarms.items():
            if kind not in raised:
                logger.warning("alarm cleared: %s", line)
                self.say(f"alarm cleared: {line}")
                self.store.event("alarm_cleared", line)
        if list(raised.values()) != list(self._alarms.values()):
            with self.store.transaction():
                self.store.set_meta("alarms", json.dumps(list(raised.values())))
        self._alarms = raised

    # -- entrants and run.json ------------------------------------------------------------------

    def _sync(self) -> None:
        """Read candidates.json when it changed: new entries join once both edges serve them."""
        try:
            mtime = self.candidates.stat().st_mtime
        except OSError as exc:
            raise ConfigError(f"{self.candidates}: cannot read the entries ({exc})") from None
        if mtime == self._candidates_mtime:
            return
        try:
            specs = read_entries(self.candidates, self.settings.formats)
        except ConfigError as exc:
            if self.edges is None:  # at start: the organizer's mistake, said at once
                raise
            logger.warning("entries not reread: %s", exc)
            self.store.event("note", f"candidates.json not reread: {exc}")
            self._candidates_mtime = mtime
            return
        known = self.store.entrants()
        fresh = [e for e in specs if e not in known]
        if self.edges is not None:
            self.edges.source.candidates = load_candidates(self.candidates)  # teams of new ones
            unserved = [e for e in fresh if not self.edges.serve(e)]
            if unserved:  # not yet on both edges: they join on a later round
                specs = {e: s for e, s in specs.items() if e not in unserved}
                logger.info("waiting for the edges to serve %s", ", ".join(unserved))
            else:
                self._candidates_mtime = mtime
        elif not fresh:
            self._candidates_mtime = mtime
        for entry in sync_entrants(self.store, self.settings, specs):
            state = self.store.entrants()[entry].state.value
            self.say(f"entry: {entry} joins ({state})")
        self.write_run_json()

    def write_run_json(self) -> None:
        """run.json: what sep_report and sep_replay read (a league of every entry, paired, on
        the season's backend; battles are the season's own), with the season's section."""
        entrants = sorted(self.store.entrants())
        config = RunConfig(
            "league",
            tuple(entrants) or ("none",),
            2,
            self.settings.formats[0],
            None,  # no seed: the season's battles are what it recorded, not a round robin's
            extra={
                "decision_time": self.settings.decision_time,
                "bank": self.settings.bank,
                "battle_time": self.settings.battle_time,
                "max_turns": self.settings.max_turns,
                "concurrency": self.settings.concurrency,
                "edge_loss": self.edge_loss(),
            },
            paired=True,
            backend=self.settings.backend,
        )
        doc = read_run_json(self.season_dir)
        kept = {k: v for k, v in doc.items() if k in ("provenance", "code_changes", "season")}
        season = {**kept.get("season", {}), "seed": self.seed, "settings": self.settings.to_json()}
        body = {**config.to_json(), **kept, "season": season}
        write_atomically(
            self.season_dir / RUN_JSON, json.dumps(body, indent=2) + "\n", durable=True
        )

    def _save_provenance(self) -> None:
        if self.edges is None:
            return
        digests = self.edges.source.code_digests()
        for pool in self._pools.values():  # the runners of --workers/--ray saw their own
            for model, places in source_digests(pool).items():
                digests.setdefault(model, {}).update(places)
        if not digests:
            return
        stored = json.loads(self.store.meta("provenance") or "{}")
        for model, places in digests.items():
            stored.setdefault(model, {}).update(places)
        with self.store.transaction():
            self.store.set_meta("provenance", json.dumps(stored, sort_keys=True))
