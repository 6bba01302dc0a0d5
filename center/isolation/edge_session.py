"""EdgeSession and RemoteSide: a candidate's side on an edge, seen from the center.

An :class:`EdgeSession` is one session on an edge (one battle, one side); a :class:`RemoteSide` is
the :class:`~center.evaluation.playing.side.Side` it serves, one ``decide`` request per decision
carrying the frames its player received since the last call. A failed call raises SideError with its
cause, which the outcome table (:data:`edge.contract.outcomes.OUTCOMES`) books.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import gymnasium

from center.env.session_api import SideSeat
from center.errors import (
    CenterError,
    EdgeCallError,
    EdgeRemoteError,
    EdgeTimeout,
    EdgeUnavailable,
    SideError,
)
from center.isolation.connection import REFUSED_GRACE_S
from center.isolation.edge_client import EdgeClient
from edge.contract.decision import Decision
from edge.contract.outcomes import Seen, SideStatus, outcome_of
from edge.contract.runner import UserFailure
from edge.errors import InvalidActionError, ReplicaError
from edge.maple.replica import ReplicaBattle
from edge.wire.messages import (
    DEFAULT_LOAD_LIMIT,
    MAX_LOAD_LIMIT,
    CallUsage,
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    EpisodeEndRequest,
    ErrorBody,
    InstanceConfig,
    OpenSessionRequest,
    PolicyInfo,
    ResetRequest,
)

logger = logging.getLogger(__name__)


def bounded_load_limit(announced: Any) -> float:
    """The open_session timeout for an edge that announced ``announced`` seconds (its hello):
    bounded by MAX_LOAD_LIMIT, and the default for anything that is not a positive number."""
    if isinstance(announced, bool) or not isinstance(announced, int | float):
        return DEFAULT_LOAD_LIMIT
    if not announced > 0:  # NaN included
        return DEFAULT_LOAD_LIMIT
    return float(min(announced, MAX_LOAD_LIMIT))


OUTPUT_KEEP = 64 * 1024

TIMEOUT_GRACE = 0.5
"""Seconds a decision's call waits past its deadline for the edge's TIMEOUT reply, which names
the user call that overran (the edge's deadline starts when the call reaches it)."""


class EdgeSession:
    """One session on an edge (one battle, one side)."""

    def __init__(
        self,
        client: EdgeClient,
        model_id: str,
        instance_config: InstanceConfig,
        username: str,
        *,
        timeout: float = DEFAULT_LOAD_LIMIT,
    ) -> None:
        self.client = client
        self.model_id = model_id
        self.instance_config = instance_config
        self.session_id = uuid.uuid4().hex
        #: the deadline of a call made without one (the open's)
        self.timeout = timeout
        #: what the last call cost on the edge (its reply's ``usage``), None when it did not say
        self.last_usage: CallUsage | None = None
        self.output: list[str] = []
        self._output_size = 0
        self._sent: dict[int, int] = {}  # id(the seat's frame list) -> frames already forwarded
        self.username = username
        reply = self.call(OpenSessionRequest(model_id, instance_config, username), timeout)
        self.observation_space: gymnasium.Space[Any] = reply.observation_space
        self.action_space: gymnasium.Space[Any] = reply.action_space
        self.agent_full_name: str = reply.agent_full_name
        #: the digest of the model's files on the edge ("" when the edge sent none)
        self.code_digest: str = reply.code_digest

    def call(
        self, body: Any, timeout: float | None = None, queue_limit: float | None = None
    ) -> Any:
        """One request of this session (its type is the body's); a failure raises SideError with
        its cause (:meth:`_side_error`). ``queue_limit`` (a call of the side's budget): the seconds
        it may wait on the edge for a free CPU, credited to the side; such a call also waits a
        grace for the edge's word when the edge stops it at its deadline (it names the user call
        that overran)."""
        grace = TIMEOUT_GRACE if queue_limit is not None else 0.0
        self.last_usage = None
        try:
            reply = self.client.call(
                body,
                session=self.session_id,
                timeout=self.timeout if timeout is None else timeout,
                queue_limit=queue_limit or None,
                grace=grace,
                refused_grace=REFUSED_GRACE_S,
            )
        except EdgeCallError as exc:
            if isinstance(exc, EdgeRemoteError):
                self.last_usage = exc.usage
                self._keep_output(exc.output)
            raise self._side_error(exc) from exc
        self.last_usage = reply.usage
        self._keep_output(reply.output)
        return reply.body

    def _side_error(self, exc: EdgeCallError) -> SideError:
        """What a failed call books: an error reply by its code, the client's failures by what it
        saw (the outcome table reads both)."""
        if isinstance(exc, EdgeRemoteError):
            failure = UserFailure(exc.ename, exc.evalue, exc.traceback)
            return SideError(exc.code, str(exc), failure=failure, call=exc.call)
        if isinstance(exc, EdgeUnavailable):
            return SideError(Seen.LOST, str(exc))
        if isinstance(exc, EdgeTimeout):
            if not self.client.connected:
                return SideError(Seen.LOST, f"the edge at {self.client.address} is gone: {exc}")
            return SideError(Seen.OVERRAN, str(exc))
        failure = UserFailure(type(exc).__name__, str(exc))
        return SideError(Seen.BAD_REPLY, str(exc), failure=failure)

    def _keep_output(self, text: str) -> None:
        if text and self._output_size < OUTPUT_KEEP:
            text = text[: OUTPUT_KEEP - self._output_size]
            self.output.append(text)
            self._output_size += len(text)

    def new_frames(self, seat: SideSeat) -> list[str]:
        """The frames of ``seat``'s battle this session has not forwarded yet."""
        # One snapshot: poke-env's loop thread may append while we read (the server's seats).
        recorded = seat.frames
        frames = list(recorded)
        start = self._sent.get(id(recorded), 0)
        view = seat.view
        if view is not None and view.player_username != self.username:
            raise CenterError(
                f"battle of {view.player_username} handed to the session of {self.username}"
            )
        self._sent = {id(recorded): len(frames)}
        return frames[start:]

    def close(self, timeout: float = 2.0) -> None:
        """Forget the session on the edge (best effort, short deadline)."""
        try:
            self.client.call(CloseSessionRequest(), session=self.session_id, timeout=timeout)
        except EdgeCallError as exc:
            logger.debug("closing session %s: %r", self.session_id, exc)


class RemoteSide:
    """The :class:`~center.evaluation.playing.side.Side` an edge serves in ``session``: one request
    per call (see the module docstring). ``queues``: whether the side's calls are credited what they
    wait for a CPU on the edge, as the edge reports it (a trusted edge's); an untrusted edge's
    ``usage`` is recorded, its waiting credited nothing."""

    needs_battle = False

    def __init__(self, session: EdgeSession, *, queues: bool = True) -> None:
        self.session = session
        self.queues = queues
        self.observation_space = session.observation_space
        self.action_space = session.action_space

    @property
    def last_usage(self) -> CallUsage | None:
        return self.session.last_usage

    def decide(
        self,
        seat: SideSeat,
        reward: float,
        info: dict[str, Any],
        done: bool,
        *,
        timeout: float,
        queue_limit: float = 0.0,
    ) -> Decision:
        session = self.session
        request = DecideRequest(session.new_frames(seat), reward, PolicyInfo.of(info), done)
        try:
            reply: DecideReply = session.call(request, timeout, queue_limit)
        except SideError as exc:
            self._check_frames(seat, exc)
            raise
        return Decision(
            reply.observation,
            reply.action_mask,
            stepped=reply.stepped,
            action=reply.action,
            order=reply.order,
            step_error=None if reply.step_error is None else _raised(reply.step_error),
            deploy_error=None if reply.deploy_error is None else _raised(reply.deploy_error),
        )

    def reset(self, seed: int | None, *, timeout: float, queue_limit: float = 0.0) -> None:
        """The Agent's seed and reset, then the Policy's reset: two requests under one deadline
        (as in-process), their costs reported as one call's."""
        session = self.session
        start = time.perf_counter()
        session.call(ResetRequest("agent", seed), timeout, queue_limit)
        first = session.last_usage
        waited = first.queued if first is not None else 0.0
        left = timeout - (time.perf_counter() - start - waited)
        try:
            session.call(ResetRequest("policy"), max(left, 0.001), max(queue_limit - waited, 0.0))
        finally:
            session.last_usage = _sum_usage(first, session.last_usage)

    def episode_end(self, seat: SideSeat, *, timeout: float, queue_limit: float = 0.0) -> None:
        session = self.session
        try:
            session.call(EpisodeEndRequest(session.new_frames(seat)), timeout, queue_limit)
        except SideError as exc:
            self._check_frames(seat, exc)
            raise

    def _check_frames(self, seat: SideSeat, error: SideError) -> None:
        """After the edge said its own code failed (an outcome the table has ``checked``): when
        poke-env cannot follow the seat's frames here either, the battle is the organizer's to
        void (:attr:`Seen.UNFOLLOWED`), not the side's fault; otherwise the side is booked for it
        as for any error its worker reports."""
        if not error.outcome.checked:
            return
        config = self.session.instance_config
        try:
            replica = ReplicaBattle(self.session.username, config.battle_format)
            for frame in seat.frames:  # one at a time: a whole battle is more than one feed takes
                replica.feed([frame])
        except ReplicaError as exc:
            why = f"poke-env cannot follow the battle: {exc}"
            raise SideError(Seen.UNFOLLOWED, why) from exc

    def output(self) -> str:
        return "".join(self.session.output)

    def close(self) -> None:
        """Nothing here: the session is its source's to close."""


def _raised(error: ErrorBody) -> Exception:
    """What user code on the edge raised in a decision, as an exception: an illegal action (a code
    whose outcome is INVALID: deploy's ``invalid_action``), else a SideError of its code."""
    if outcome_of(error.code).status is SideStatus.INVALID:
        return InvalidActionError(error.evalue)
    failure = UserFailure(error.ename, error.evalue, error.traceback)
    return SideError(error.code, f"{error.ename}: {error.evalue}", failure=failure, call=error.call)


def _sum_usage(first: CallUsage | None, second: CallUsage | None) -> CallUsage | None:
    """Two calls' costs as one call's (None when neither edge call reported any)."""
    if first is None or second is None:
        return second or first
    return CallUsage(
        first.cpu + second.cpu,
        first.queued + second.queued,
        first.endpoint_requests + second.endpoint_requests,
        first.endpoint_bytes + second.endpoint_bytes,
        first.endpoint_tokens + second.endpoint_tokens,
    )
