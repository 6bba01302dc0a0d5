"""EdgeSource: each battle's sides served by the blue and red edges (``sep_main``).

The center reads ``candidates.json`` only as data (ids, teams, logNames) and imports no user
module: the edge that plays a side resolves the model id from its own candidates.json. An
untrusted edge (a participant's, ``sep_config.json``'s ``"trusted"``) is not taken at its word:
its ``busy`` is waited for ``--edge-wait`` at most, its waits are not credited, its digest is
recorded as self-reported; no edge names a candidate.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from center.errors import (
    ConfigError,
    EdgeCallError,
    EdgeDown,
    EdgeFull,
    InfrastructureError,
    SideError,
)
from center.evaluation.playing.budget import Budget, clock_failure
from center.evaluation.playing.in_process import failed_side
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.playing.space_limits import check_space_size, check_value_bytes
from center.evaluation.recording.provenance import describe_change
from center.evaluation.recording.run_info import utc_now
from center.evaluation.schedule import ScheduledBattle
from center.isolation.connection import REFUSED_GRACE_S
from center.isolation.edge_client import EdgeClient
from center.isolation.edge_session import EdgeSession, RemoteSide, bounded_load_limit
from center.waits import waits_for
from edge.contract.candidates import Candidate, load_candidates
from edge.contract.outcomes import Seen, SideStatus, Void, voided
from edge.wire.messages import DEFAULT_LOAD_LIMIT, HelloReply, InstanceConfig
from edge.wire.sep_config import loopback_host

logger = logging.getLogger(__name__)


class CodeChangedDuringRun(EdgeDown):
    """A model's code on an edge changed during a run not allowed to go on with new code: the run
    stops as for an edge down (nothing booked); a rerun needs ``--allow-code-change``."""


#: Seconds :meth:`EdgeSource.close` spends at most closing the sessions of an interrupted run
CLOSE_TIMEOUT = 3.0

#: What the center keeps of the policy name an edge reports (``agentName:model:policyName``): a
#: Python class name, else nothing
_POLICY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

#: Where an untrusted edge's code digest was recorded from: its own word
SELF_REPORTED = " (self-reported)"


class EdgeSource:
    """Sides served by edges: ``clients`` maps "blue"/"red" to a connected EdgeClient.

    ``trusted`` says, per side, whether its edge is taken at its word (default: an edge on
    loopback is, one on another host is not: :meth:`edge.wire.sep_config.SepConfig.trusted`).
    ``edge_loss`` is the run's policy for an edge lost, or an untrusted edge busy past
    ``edge_wait``: book the side DISCONNECT (``forfeit``) or void the battle (``void``).
    """

    def __init__(
        self,
        clients: dict[str, EdgeClient],
        candidates_path: str | Path,
        *,
        edge_wait: float = 60.0,
        allow_code_change: bool = True,
        trusted: Mapping[str, bool] | None = None,
        edge_loss: Literal["void", "forfeit"] = "void",
    ) -> None:
        self.clients = clients
        #: a model's code that changes on an edge during the run: recorded (True) or the run stops
        self.allow_code_change = allow_code_change
        self.edge_wait = edge_wait
        self.edge_loss = edge_loss
        self._trusted = dict(trusted or {})
        self._busy_since: dict[str, float] = {}  # side: when its untrusted edge began to refuse
        self.candidates: dict[str, Candidate] = load_candidates(candidates_path)
        self._sessions: dict[int, EdgeSession] = {}
        self._digests: dict[str, dict[str, str]] = {}
        self._changed: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # battle threads open and close sides while close() runs
        self._closing = False
        self._down_lock = threading.Lock()
        self._down_until: dict[str, float] = {}  # side: when the wait for it ends (monotonic)
        #: seconds each side's edge gives open_session (its hello's load_limit, bounded)
        self.load_limits: dict[str, float] = {}

    def check_edges(
        self,
        models: dict[str, list[str]],
        timeout: float = 10.0,
        *,
        config_name: str = "sep_config.json",
    ) -> dict[str, HelloReply]:
        """Each edge answers and serves the models it will play; ConfigError saying what is wrong.
        Returns each side's hello.

        ``models`` maps a side to its model ids: in a match, blue needs only BLUE and red only RED
        (a participant's edge may serve just its own model); in a league, both need all. An
        address where nothing listens is reported within REFUSED_GRACE_S, not after ``timeout``.
        """
        hellos: dict[str, HelloReply] = {}
        for side, client in self.clients.items():
            model_ids = models.get(side, [])
            try:
                hello = hellos[side] = client.hello(timeout, REFUSED_GRACE_S)
            except EdgeCallError as exc:
                cause = (
                    f"connection refused: is `sep_edge {side}` running there? (the address is "
                    f"{side}'s in {config_name})"
                    if client.refused
                    else f"{exc} (the address is {side}'s in {config_name})"
                )
                raise ConfigError(
                    f"cannot reach the {side} edge at {client.address}: {cause}"
                ) from exc
            if hello.side != side:
                raise ConfigError(
                    f"the edge at {client.address} is the {hello.side} edge, not {side}"
                )
            self.load_limits[side] = bounded_load_limit(hello.load_limit)
            missing = sorted(set(model_ids) - set(hello.models))
            if missing:
                raise ConfigError(
                    f"the {side} edge at {client.address} does not serve {', '.join(missing)}: "
                    "add it to that edge's candidates.json (a running edge rereads the file when "
                    "it changes, or on SIGHUP; an edge older than that needs a restart)"
                )
        return hellos

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
        player = "player_0" if side == "blue" else "player_1"
        config = InstanceConfig(side, player, battle_format, agent_seed)
        client = self.clients[side]
        # The open counts on the side's battle clock: it never waits past the clock either.
        load_limit = min(self.load_limits.get(side, DEFAULT_LOAD_LIMIT), budget.battle_time)
        opened: list[float] = []

        @waits_for(lambda: f"{side} edge starting a worker for {model_id}")
        def open_session() -> EdgeSession:
            start = time.perf_counter()
            try:
                return EdgeSession(client, model_id, config, username, timeout=load_limit)
            finally:
                opened.append(time.perf_counter() - start)

        try:
            try:
                if getattr(client, "lost_at", None) is not None and not self.wait_for_edge(side):
                    # Known lost and not back in time: no open that would wait out its timeout.
                    raise SideError(Seen.LOST, f"the {side} edge at {client.address} is down")
                session = open_session()
            except SideError as exc:
                if not _unanswered(exc) or _clock_ran_out(exc, load_limit, budget, client):
                    raise
                # An edge that is down before the battle: wait (bounded) for it to come back
                # rather than forfeit every battle of the league in a second.
                if not self.wait_for_edge(side):
                    raise
                session = open_session()
        except SideError as exc:
            return self._not_opened(model_id, side, battle, budget, exc, load_limit, opened)
        with self._down_lock:
            self._busy_since.pop(side, None)
        try:
            check_space_size(session.observation_space, "observation_space")
            check_space_size(session.action_space, "action_space")
            check_value_bytes(session.observation_space, session.action_space)
        except ValueError as exc:
            session.close()
            return self._not_opened(
                model_id, side, battle, budget, SideError(Seen.RAISED, str(exc)), load_limit, []
            )
        guard = SideGuard(
            RemoteSide(session, queues=self.trusted(side)),
            self._full_name(model_id, session.agent_full_name),
            budget,
            # the open that succeeded; waiting for a lost edge is not the side's
            opened_s=opened[-1],
            trusted=self.trusted(side),
        )
        with self._lock:
            closing = self._closing
            if not closing:
                self._sessions[id(guard)] = session
        if closing:  # the run is ending: this session must not outlive it
            session.close()
            guard.close()
            ending = SideError(Seen.LOST, "the run is ending")
            return self._not_opened(model_id, side, battle, budget, ending, load_limit, [])
        refused: dict[str, Any] | None = None
        if session.code_digest:
            with self._lock:
                seen = self._digests.setdefault(model_id, {})
                where = f"{side} edge" + ("" if self.trusted(side) else SELF_REPORTED)
                before = seen.get(where, session.code_digest)
                change = {
                    "model": model_id,
                    "where": where,
                    "before": [before],
                    "after": session.code_digest,
                    "at": utc_now(),
                    "during_run": True,
                    "battle": battle.battle_id,
                }
                if before != session.code_digest and not self.allow_code_change:
                    refused = change
                else:
                    if before != session.code_digest:
                        logger.warning(
                            "the code of %s on the %s changed during the run", model_id, where
                        )
                        self._changed.append(change)
                    seen[where] = session.code_digest
        if refused is not None:
            self.close_side(guard)
            raise CodeChangedDuringRun(
                f"the code of {describe_change(refused)} changed during the run; "
                "rerun with --allow-code-change to go on with it (recorded in run.json)"
            )
        return guard

    def trusted(self, side: str) -> bool:
        """Whether the ``side`` edge is taken at its word (as given, else: on loopback)."""
        if side not in self._trusted:
            self._trusted[side] = _on_loopback(self.clients[side])
        return self._trusted[side]

    def _not_opened(
        self,
        model_id: str,
        side: str,
        battle: ScheduledBattle,
        budget: Budget,
        error: SideError,
        load_limit: float,
        opened: list[float],
    ) -> SideGuard:
        """The reaction to a side that could not open (``error``), from its row of the outcome
        table: the battle waits (EdgeFull), is void (InfrastructureError; EdgeDown for an edge
        lost, which stops the run), or is the side's forfeit (a failed guard)."""
        if error.outcome.waits:  # no room on the edge now
            if self.trusted(side):
                why = error.failure.message if error.failure else error  # the edge's reason
                # room to come: the battle waits, unbooked
                raise EdgeFull(f"{side} edge busy for {model_id} ({why})") from error
            error = self._stalled(side)
        elif _unanswered(error):
            if opened and _clock_ran_out(error, load_limit, budget, self.clients[side]):
                return _out_of_time(model_id, budget, opened[-1])
            if error.outcome.status is SideStatus.TIMEOUT:  # no answer, even after the wait
                error = SideError(Seen.LOST, str(error))
        elif _stopped_at(error, load_limit, self.load_limits.get(side, DEFAULT_LOAD_LIMIT)):
            return _out_of_time(model_id, budget, opened[-1])
        if error.failure is not None and not error.failure.where:
            failure = dataclasses.replace(error.failure, where="opening the session")
            error = SideError(error.cause, str(error), failure=failure, call=error.call)
        trusted = self.trusted(side)
        if voided(error.outcome, trusted=trusted, edge_loss=self.edge_loss):
            if error.outcome.void is Void.LOSS:  # no battle against anyone on this edge now
                raise EdgeDown(f"{side} edge down (setting up {model_id}: {error})") from error
            raise InfrastructureError(f"{battle.battle_id}: {error}; voided") from error
        guard = failed_side(model_id, budget, error, trusted=trusted)
        guard.stats.time_s = opened[-1] if opened else 0.0  # what the side cost, still
        return guard

    def _stalled(self, side: str) -> SideError:
        """The untrusted ``side`` edge has no room for a session: the battle waits (EdgeFull)
        until the edge has answered so for ``edge_wait`` seconds (battles that find it busy later
        share that deadline), then it is :attr:`Seen.STALLED`: an edge cannot stall a run by
        saying it is full."""
        now = time.monotonic()
        with self._down_lock:
            since = self._busy_since.setdefault(side, now)
        waited = now - since
        if waited < self.edge_wait:
            raise EdgeFull(f"the untrusted {side} edge is busy ({waited:.0f}s so far)")
        return SideError(
            Seen.STALLED,
            f"the untrusted {side} edge at {self.clients[side].address} answered busy to every "
            f"session it was asked to open for {waited:.0f}s (--edge-wait {self.edge_wait:g})",
        )

    def _full_name(self, model_id: str, reported: str) -> str:
        """``logName:model:policyName`` of a side: its logName the organizer's candidates.json's,
        never the edge's (an edge could take another entrant's name); of what the edge reports,
        only a policy name that is a class name."""
        candidate = self.candidates.get(model_id)
        log_name = candidate.log_name if candidate is not None else model_id
        policy = reported.rsplit(":", 1)[-1]
        return f"{log_name}:{model_id}:{policy if _POLICY_NAME.fullmatch(policy) else 'policy'}"

    def apart(self) -> bool:
        """Whether the blue and red edges' calls run on CPUs of their own, as their hellos say
        (asked for every battle: an edge restarted meanwhile may run elsewhere); not when an edge
        names no host or CPU (its calls not pinned) or does not answer."""
        try:
            blue, red = (cpus_of(self.clients[side].hello(2.0)) for side in ("blue", "red"))
        except EdgeCallError:
            return False
        return bool(blue and red) and blue.isdisjoint(red)

    def code_changes_during_run(self) -> list[dict[str, Any]]:
        """Each time a model's code on an edge was not the code it had there when the run (this
        source) first opened it: run.json records them under ``code_changes``."""
        with self._lock:
            return list(self._changed)

    def code_digests(self) -> dict[str, dict[str, str]]:
        """Per model, the digest of its files on each edge it opened on, as the edge reported it."""
        return {model: dict(places) for model, places in self._digests.items()}

    @waits_for(lambda side, **_: f"{side} edge not answering (reconnecting)")
    def wait_for_edge(self, side: str) -> bool:
        """Wait for the ``side`` edge to answer again, up to ``edge_wait`` seconds after it went
        away (when its connection was lost, else when it was first found down): battles that
        find it down later share that deadline, so that a run with K battles at once stops
        ``edge_wait`` after the edge went away, not after the calls in flight timed out and K
        waits later."""
        client = self.clients[side]
        with self._down_lock:
            deadline = self._down_until.get(side)
            if deadline is None:
                lost_at = getattr(client, "lost_at", None)
                since = time.monotonic() if lost_at is None else lost_at
                deadline = self._down_until[side] = since + self.edge_wait
                logger.warning(
                    "the %s edge at %s does not answer; waiting up to %.0fs for it",
                    side,
                    client.address,
                    self.edge_wait,
                )
        if time.monotonic() >= deadline:
            return False
        while time.monotonic() < deadline:
            if client.ping(timeout=min(2.0, max(deadline - time.monotonic(), 0.1))):
                with self._down_lock:
                    if self._down_until.pop(side, None) is not None:
                        logger.warning("the %s edge is back", side)
                return True
            time.sleep(0.5)  # a ping can fail at once (e.g. a refused handshake): don't spin
        return False

    def close_side(self, guard: SideGuard) -> None:
        guard.close()
        with self._lock:
            session = self._sessions.pop(id(guard), None)
        if session is not None:
            session.close()

    def team(self, model_id: str) -> str | None:
        return self.candidates[model_id].team

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close every session still open on the edges (an interrupted run's battles), then the
        connections.

        Best effort, within ``timeout`` seconds in all: the closes go out at once, each waiting
        for its reply in a thread of its own (an edge stops a worker still in the session's call
        and answers at once). Sides opened from now on are closed at once.
        """
        with self._lock:
            self._closing = True
            sessions = list(self._sessions.values())
            self._sessions.clear()
        if sessions:
            closers = [
                threading.Thread(
                    target=session.close,
                    args=(timeout,),
                    name=f"close-{session.session_id[:8]}",
                    daemon=True,
                )
                for session in sessions
            ]
            for closer in closers:
                closer.start()
            deadline = time.monotonic() + timeout
            for closer in closers:
                closer.join(max(0.0, deadline - time.monotonic()))
            unanswered = sum(closer.is_alive() for closer in closers)
            logger.info(
                "closed %d session(s) left open on the edges (%d not answered in %.0f s)",
                len(sessions),
                unanswered,
                timeout,
            )
        for client in self.clients.values():
            client.close()


def _on_loopback(client: EdgeClient) -> bool:
    """Whether the client's edge (``tcp://host:port``) is on this machine's loopback."""
    host = client.address.removeprefix("tcp://").rsplit(":", 1)[0].strip("[]")
    return loopback_host(host)


def _unanswered(error: SideError) -> bool:
    """Whether an open found no edge or no answer (its outcome a DISCONNECT or a TIMEOUT): the
    edge may be down, and is waited for before the side is booked."""
    return error.outcome.status in (SideStatus.DISCONNECT, SideStatus.TIMEOUT)


def _clock_ran_out(error: SideError, waited: float, budget: Budget, client: EdgeClient) -> bool:
    """Whether an open that timed out did so on the side's battle clock (shorter than the edge's
    load limit) while the edge itself still answers: the side's slowness, not a lost edge."""
    return (
        error.outcome.status is SideStatus.TIMEOUT
        and waited >= budget.battle_time
        and client.ping(timeout=min(2.0, budget.battle_time))
    )


def _stopped_at(error: SideError, load_limit: float, edge_limit: float) -> bool:
    """Whether the edge stopped the open at the deadline it was given (the model's load raised
    TimeoutError there), when that deadline was the battle clock's, shorter than its own."""
    return (
        error.failure is not None
        and error.failure.type == "TimeoutError"
        and load_limit < edge_limit
    )


def _out_of_time(model_id: str, budget: Budget, seconds: float) -> SideGuard:
    """A side whose session did not open within its battle clock: it forfeits (TIMEOUT)."""
    spent = f"the session took {seconds:.1f}s to open"
    failure = clock_failure(spent, budget, "opening the session")
    guard = failed_side(model_id, budget, SideError(Seen.CLOCK, failure.line(), failure=failure))
    guard.stats.time_s = seconds
    return guard


def cpus_of(hello: HelloReply) -> frozenset[str]:
    """The CPUs of a hello, as ``host/cpu`` (empty when the edge does not name its host)."""
    return frozenset(f"{hello.host}/{cpu}" for cpu in hello.cpus) if hello.host else frozenset()


def check_memory_fit(
    blues: list[tuple[str, HelloReply]], reds: list[tuple[str, HelloReply]]
) -> None:
    """ConfigError when a blue and a red edge (address, hello) that a battle runner is given
    together could never start a battle (:func:`never_fit`): runner ``i`` plays on blue edge
    ``i % len(blues)`` and red edge ``i % len(reds)`` (``SourceSpec.edge_for``)."""
    for i in range(math.lcm(len(blues), len(reds))):
        (blue_at, blue), (red_at, red) = blues[i % len(blues)], reds[i % len(reds)]
        if (why := never_fit(blue, red)) is not None:
            raise ConfigError(f"{why} (the blue edge at {blue_at}, the red edge at {red_at})")


def never_fit(blue: HelloReply, red: HelloReply) -> str | None:
    """Why no battle could ever start on these edges, or None: they share one host's memory
    claims (one host, one claims folder) and a worker of each, which a battle needs at once,
    exceeds the budget of the edge that claims second. Each edge checks the live claims against
    its own budget, and the sides open in either order, so the smaller budget is the bound.
    Otherwise every battle would wait for room forever."""
    if not (blue.memory_claims and blue.host) or (blue.host, blue.memory_claims) != (
        red.host,
        red.memory_claims,
    ):
        return None
    need = blue.memory_limit + red.memory_limit
    budget = min(blue.memory_budget, red.memory_budget)
    if need <= budget:
        return None
    return (
        f"the blue and red edges claim their workers' memory from one host's budget "
        f"({_gib(budget)} for workers), but a battle needs a worker of each at once "
        f"({_gib(blue.memory_limit)} + {_gib(red.memory_limit)} by their --memory-limit): no "
        "battle could start; lower --memory-limit or --memory-reserve, or run the edges on hosts "
        "of their own"
    )


def _gib(size: int) -> str:
    return f"{size / 2**30:.3g} GiB"
