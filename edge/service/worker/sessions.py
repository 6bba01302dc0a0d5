"""SessionHandlers: the handlers of every session an edge serves (its Agent, its
Policy and its replica battle).

One session per battle and side: its own Agent, its own Policy and a :class:`ReplicaBattle` fed
with the frames the center forwards, the global generators seeded with the Agent's seed. Only
models of the edge's own candidates.json load. What user code raises becomes an error reply; what
it prints is captured per call.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from poke_env.battle import AbstractBattle

from edge.contract.agent import Agent
from edge.contract.candidates import Candidate, load_candidates
from edge.contract.decision import decide
from edge.contract.policy import StandalonePolicy
from edge.contract.provenance import code_digest
from edge.contract.randomness import seed_global_generators
from edge.contract.runner import CappedText, capturing, install_capture
from edge.contract.user_module import UserModel
from edge.errors import EdgeError
from edge.maple.replica import ReplicaBattle
from edge.service.server.dispatch import CallContext, Handler
from edge.wire.messages import (
    DEPLOY_CALL,
    CloseSessionReply,
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    EpisodeEndReply,
    EpisodeEndRequest,
    ErrorCode,
    OpenSessionReply,
    OpenSessionRequest,
    RequestType,
    ResetReply,
    ResetRequest,
    error_body,
)
from edge.wire.msgpack_values import OUTPUT_LIMIT

logger = logging.getLogger(__name__)

SESSION_IDLE_TIMEOUT = 600.0
MAX_SESSIONS = 256


class UnknownSession(EdgeError):
    """A request names a session this edge does not have (never opened, closed or expired)."""

    error_code = ErrorCode.UNKNOWN_SESSION


class UnknownModel(EdgeError):
    """The center asked for a model this edge's candidates.json does not list."""

    error_code = ErrorCode.UNKNOWN_MODEL


@contextmanager
def captured(context: CallContext) -> Iterator[None]:
    """Capture what the calling thread prints into ``context.output`` (kept on exceptions too)."""
    buffer = CappedText(OUTPUT_LIMIT)
    try:
        with capturing(buffer):
            yield
    finally:
        context.output = buffer.text()


# -- sessions -----------------------------------------------------------------------------------


@dataclass
class Session:
    """One battle and side: the user's Agent and Policy and the replica battle they read."""

    model_id: str
    agent: Agent
    policy: StandalonePolicy
    replica: ReplicaBattle
    agent_full_name: str
    last_used: float = field(default_factory=time.monotonic)

    def battle(self, frames: list[str]) -> AbstractBattle:
        battle = self.replica.feed(frames)
        if battle is None:
            raise EdgeError("no battle frames received yet for this session")
        return battle


class SessionHandlers:
    """The handlers of one edge: sessions of the models in its candidates.json.

    ``candidates`` is the path of a candidates.json, or its entries already read. With
    ``capture`` (the default) what user code prints is captured per calling thread; without it
    the caller captures the output itself (a sandboxed worker, at the file-descriptor level).
    """

    def __init__(
        self,
        side: str,
        candidates: str | Path | Mapping[str, Candidate],
        *,
        capture: bool = True,
        on_call: Callable[[str], None] | None = None,
        loaded: UserModel | None = None,
        loaded_digest: str = "",
    ) -> None:
        self.side = side
        #: told each user call of a decision before it starts (a worker names its thread by it)
        self.on_call = on_call
        self.candidates: dict[str, Candidate] = (
            dict(candidates) if isinstance(candidates, Mapping) else load_candidates(candidates)
        )
        self._models: dict[str, UserModel] = {}
        #: a model loaded before this process began (a worker forked from its model's template):
        #: its first session takes the template's policy and reports the digest of the code that
        #: was imported
        self._loaded = self._loaded_model = loaded
        self._loaded_digest = loaded_digest
        if loaded is not None:
            self._models[loaded.model_id] = loaded
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._capture = capture
        if capture:
            install_capture()

    def captured(self, context: CallContext) -> contextlib.AbstractContextManager[None]:
        """Capture what the call prints into ``context.output`` (unless the caller does)."""
        return captured(context) if self._capture else contextlib.nullcontext()

    @property
    def model_ids(self) -> list[str]:
        return list(self.candidates)

    def handlers(self) -> dict[str, Handler]:
        """The transport's dispatch table."""
        return {
            RequestType.OPEN_SESSION: self.open_session,
            RequestType.DECIDE: self.decide,
            RequestType.RESET: self.reset,
            RequestType.EPISODE_END: self.episode_end,
            RequestType.CLOSE_SESSION: self.close_session,
        }

    def model(self, model_id: str) -> UserModel:
        with self._lock:
            if model_id not in self.candidates:
                raise UnknownModel(f"this {self.side} edge does not serve model {model_id!r}")
            if model_id not in self._models:
                self._models[model_id] = UserModel(self.candidates[model_id])
            return self._models[model_id]

    def _session(self, context: CallContext) -> Session:
        with self._lock:
            session = self._sessions.get(context.session)
            if session is None:
                raise UnknownSession(f"no session {context.session!r} on this edge")
            session.last_used = time.monotonic()
            return session

    def _expire_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            for sid in [
                s for s, v in self._sessions.items() if now - v.last_used > SESSION_IDLE_TIMEOUT
            ]:
                logger.info("session %s expired after %.0fs idle", sid, SESSION_IDLE_TIMEOUT)
                del self._sessions[sid]

    # -- handlers -------------------------------------------------------------------------------

    def open_session(self, context: CallContext, body: OpenSessionRequest) -> OpenSessionReply:
        if not context.session:
            raise EdgeError("open_session needs a session id")
        self._expire_idle()
        # Before this worker imports the model: the files as they are, not as its code says.
        preloaded = self._loaded
        if self._loaded_digest and self._models.get(body.model_id) is self._loaded_model:
            digest = self._loaded_digest  # the code this process runs, imported by its template
        else:
            digest = (
                code_digest(self.candidates[body.model_id])
                if body.model_id in self.candidates
                else ""
            )
        model = self.model(body.model_id)
        seed = body.instance_config.seed
        with self.captured(context):
            # Seeded before the import (a fresh worker's module may draw at import) and again
            # after it (torch may be imported now): every battle then starts from the same state.
            seed_global_generators(seed)
            _ = model.module
            seed_global_generators(seed)
            agent = model.make_agent(body.instance_config.to_dict())
            if preloaded is model:
                # The policy the model's template built (getUserPolicy once per edge): this
                # worker's own copy; a later session of a reused worker builds its own, as before.
                policy = model.policy
                self._loaded = None
            else:
                policy = model.new_policy()
        candidate = self.candidates[body.model_id]
        replica = ReplicaBattle(
            body.username, body.instance_config.battle_format, team=candidate.team
        )
        name = model.agent_full_name(policy)
        session = Session(body.model_id, agent, policy, replica, name)
        with self._lock:
            if context.session not in self._sessions and len(self._sessions) >= MAX_SESSIONS:
                raise EdgeError(f"too many open sessions ({MAX_SESSIONS})")
            self._sessions[context.session] = session
        return OpenSessionReply(agent.observation_space, agent.action_space, name, digest)

    def decide(self, context: CallContext, body: DecideRequest) -> DecideReply:
        """The side's decision in one call (:func:`edge.contract.decision.decide`, as an
        in-process side and the checker run it). What the step or deploy raises travels back as
        data."""
        session = self._session(context)
        battle = session.battle(body.frames)
        with self.captured(context):
            decision = decide(
                session.agent,
                session.policy,
                battle,
                body.reward,
                body.info.to_dict(),
                session.agent_full_name,
                done=body.done,
                on_call=self.on_call,
            )
        step_error = deploy_error = None
        if decision.step_error is not None:
            step_error = msgspec.structs.replace(
                error_body(decision.step_error), call="policy.step"
            )
        if decision.deploy_error is not None:
            deploy_error = msgspec.structs.replace(
                error_body(decision.deploy_error, DEPLOY_CALL), call="deploy"
            )
        return DecideReply(
            decision.observation,
            decision.mask,
            decision.stepped,
            decision.action,
            order=decision.order,
            deploy_error=deploy_error,
            step_error=step_error,
        )

    def feed(self, session_id: str, frames: list[str]) -> None:
        """Apply frames to a session's replica without calling user code (restoring a session
        on a fresh worker replays the frames of the calls it already served)."""
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise UnknownSession(f"no session {session_id!r} on this edge")
        session.replica.feed(frames)

    def reset(self, context: CallContext, body: ResetRequest) -> ResetReply:
        session = self._session(context)
        with self.captured(context):
            if body.target == "policy":
                session.policy.reset()
            else:
                if body.seed is not None:
                    session.agent.seed(body.seed)
                session.agent.reset()
        return ResetReply()

    def episode_end(self, context: CallContext, body: EpisodeEndRequest) -> EpisodeEndReply:
        session = self._session(context)
        battle = session.battle(body.frames)
        with self.captured(context):
            session.agent.onEpisodeEnd(battle)
        return EpisodeEndReply()

    def close_session(self, context: CallContext, body: CloseSessionRequest) -> CloseSessionReply:
        with self._lock:
            self._sessions.pop(context.session, None)
        return CloseSessionReply()

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)
