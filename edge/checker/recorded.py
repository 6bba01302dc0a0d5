"""The recorded battles through the edge's own session handlers, as a battle drives them.

For each recorded sample (:mod:`edge.checker.samples`) :class:`RecordedBattles` drives the handlers
of :class:`~edge.service.sessions.SessionHandlers`: ``open_session`` → ``reset`` (the Agent, with a
seed from the top of a battle's range; the policy) → at every recorded decision point one
``decide`` with the frames since the last call and the info a battle gives (makeObs, action_mask,
policy.step and deploy, as an isolated battle asks for them; a ``decide`` with the checker's own
action when the action had to change) → at the end one ``decide`` with ``done`` on the finished
battle (makeObs and the policy's last step) and ``episode_end`` → ``close_session``. Requests and replies cross the wire codec,
so a reply that could not reach the center fails here, not in a battle. A failure is attributed to
the user call that raised (``makeObs``, ``action_mask``, ``policy.step``, ``deploy``, the hooks)
and to the check of what it returned; orders are judged on the session's own replica battle.
"""

from __future__ import annotations

import itertools
import linecache
import logging
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from poke_env.battle import AbstractBattle

from edge.checker.calls import Stuck, Worker, describe, describe_body, printed_chars
from edge.checker.checks import (
    check_action,
    check_action_mask,
    check_observation,
    check_order,
    check_wire,
    short_repr,
)
from edge.checker.report import Tally
from edge.checker.samples import DecisionPoint, SampleBattle, decision_points
from edge.contract.agent import SEED_BOUND
from edge.contract.binding import OPTIONAL_AGENT_HOOKS, BoundAgent
from edge.contract.decision import decide
from edge.contract.user_module import UserModel
from edge.errors import ContractError, ReplicaError, UserCallTimeout
from edge.service.dispatch import CallContext, Handler
from edge.service.sessions import SessionHandlers
from edge.wire.codec import decode_request, encode_request
from edge.wire.messages import (
    DEPLOY_CALL,
    MESSAGES,
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    EpisodeEndRequest,
    ErrorBody,
    ErrorCode,
    InstanceConfig,
    OpenSessionRequest,
    Request,
    RequestType,
    ResetRequest,
    error_body,
)

logger = logging.getLogger(__name__)

__all__ = ["RecordedBattles", "sample_seed"]

#: The user call a handler made when it raised (the frame under the handler's) -> its label.
USER_CALLS = {
    "makeObs": "makeObs",
    "action_mask": "action_mask",
    "step": "policy.step",
    "deploy": "deploy",
    "seed": "agent.seed",
    "onEpisodeEnd": "agent.onEpisodeEnd",
    "make_agent": "AgentClass(modelConfig, instanceConfig)",
    "new_policy": "getUserPolicy(args)",
}


def sample_seed(index: int) -> int:
    """The seed of the ``index``-th recorded sample: the top of the range a battle may give (an
    Agent that cannot take large seeds fails here, not in its battles)."""
    return SEED_BOUND - 1 - index


class _SampleProblem(Exception):
    """The recorded battle itself cannot be replayed (a frame the replica cannot apply)."""


@dataclass
class _HandlerFailure(Exception):
    """A session handler raised: ``exc``, from the user call ``called`` (a function name)."""

    exc: BaseException
    called: str


def _user_call(exc: BaseException, handler: Any) -> str:
    """The name of the function ``handler`` called when ``exc`` arose ('' if raised by itself).

    A call of something that is no Python function (``None``, a builtin) leaves no frame of its
    own: the handler's own source line then says which user call it was.
    """
    code = getattr(handler, "__func__", handler).__code__
    entries = list(traceback.walk_tb(exc.__traceback__))
    for i, (frame, line) in enumerate(entries):
        if frame.f_code is not code:
            continue
        # The decision function the handler runs is the edge's, not the user's: look below it.
        while i + 1 < len(entries) and entries[i + 1][0].f_code is decide.__code__:
            i += 1
            frame, line = entries[i]
        if i + 1 < len(entries):
            return entries[i + 1][0].f_code.co_name
        text = linecache.getline(frame.f_code.co_filename, line)
        return next((name for name in USER_CALLS if f".{name}(" in text), "")
    return ""


def _through_codec(request_type: RequestType, body: Any, session: str) -> Any:
    """``body`` as the edge's handler receives it: encoded and decoded as a request."""
    request = Request(str(request_type), "checker", body, session=session)
    return decode_request(encode_request(request)).body


def _plain(value: Any) -> Any:
    """numpy scalars as Python scalars, as the center sends them."""
    return value.item() if isinstance(value, np.generic) else value


def _reply_type(request_type: RequestType) -> str:
    return MESSAGES[request_type].reply_type


@dataclass
class _Session:
    """One recorded battle played in one session of the service."""

    service: SessionHandlers
    session_id: str
    sample: SampleBattle
    #: the spaces as the center receives them (decoded from open_session's reply)
    observation_space: Any = None
    action_space: Any = None
    #: whether the user's Agent defines action_mask (a missing one is no failure)
    defines_mask: bool = True

    def battle(self) -> AbstractBattle:
        """The session's own replica battle: orders are judged on the battle deploy saw."""
        context = CallContext(RequestType.DECIDE, "checker", self.session_id)
        battle = self.service._session(context).replica.battle
        if battle is None:
            raise _SampleProblem("no battle frames were applied")
        return battle


class RecordedBattles:
    """Plays recorded battles through the service's handlers; records each check's trials.

    ``tallies`` are the run's, keyed by check name; ``worker`` runs every handler call under
    ``call_limit`` seconds (``load_limit`` for ``open_session``). What was played is counted in
    :attr:`decisions` (per kind of request) and :attr:`sessions`; what was seen in :attr:`notes`.
    """

    def __init__(
        self,
        worker: Worker,
        tallies: dict[str, Tally],
        *,
        call_limit: float,
        load_limit: float,
        user_folder: Path | None,
    ) -> None:
        self.worker = worker
        self.tallies = tallies
        self.call_limit = call_limit
        self.load_limit = load_limit
        self.user_folder = user_folder
        self.notes: list[str] = []
        self.decisions: dict[str, int] = {}
        self.sessions = 0
        #: the optional Agent hooks the user's Agent lacks (no failure: a battle skips them)
        self.missing_hooks: set[str] = set()
        #: what the last policy.step (done=True) raised, per battle end (a battle only logs it)
        self.final_step_failures: list[str] = []
        #: characters user code printed inside the handlers, and the first of it
        self.printed = 0
        self.first_printed = ""
        self._ids = itertools.count(1)

    def handle(
        self,
        session: _Session,
        request_type: RequestType,
        body: Any,
        *,
        label: str,
        where: str,
        load: bool = False,
    ) -> Any:
        """One request served by the session's handler, as the edge serves it; the reply body.

        Raises _HandlerFailure when the handler raised, UserCallTimeout (the run is then stuck)
        or Stuck.
        """
        handler: Handler = session.service.handlers()[request_type]
        body = _through_codec(request_type, body, session.session_id)
        context = CallContext(str(request_type), f"c{next(self._ids)}", session.session_id)
        limit, kind = (self.load_limit, "load") if load else (self.call_limit, "decision")
        try:
            return self.worker.call(
                f"{label} at {where}", handler, context, body, limit=limit, kind=kind
            )
        except UserCallTimeout as exc:
            self.tallies["time"].fail(str(exc))
            raise
        except (Stuck, KeyboardInterrupt):
            raise
        except BaseException as exc:
            called = _user_call(exc, handler)
            if isinstance(exc, ReplicaError) or called == "battle":
                raise _SampleProblem(str(exc)) from exc
            raise _HandlerFailure(exc, called) from exc
        finally:
            if context.output:
                self.printed += printed_chars(context.output)
                self.first_printed = self.first_printed or context.output.strip()

    def failure_message(self, failure: _HandlerFailure, where: str, label: str = "") -> str:
        """What user call raised what, where in the user's code, at which decision point.

        ``label`` names the call when the frame under the handler's does not say it.
        """
        described = describe(failure.exc, self.user_folder)
        if isinstance(failure.exc, ContractError):
            return f"{described} at {where}"
        label = label or USER_CALLS.get(failure.called, failure.called or "the handler")
        return f"{label} raised {described} at {where}"

    def hook(self, session: _Session, body: ResetRequest | EpisodeEndRequest, where: str) -> None:
        """A reset or an episode end: its failure fails the ``hooks`` check."""
        if isinstance(body, ResetRequest):
            request_type, label = RequestType.RESET, f"{body.target} reset"
        else:
            request_type, label = RequestType.EPISODE_END, "episode end"
        try:
            self.handle(session, request_type, body, label=label, where=where)
            self.tallies["hooks"].ok()
        except _HandlerFailure as failure:
            name = ""
            if failure.called == "reset":  # the Agent's reset or the policy's: the body says
                name = (
                    "policy.reset"
                    if isinstance(body, ResetRequest) and body.target == "policy"
                    else "agent.reset"
                )
            self.tallies["hooks"].fail(self.failure_message(failure, where, name))

    # -- the recorded battles ---------------------------------------------------------------------

    def play_all(self, model: UserModel, agents: list[tuple[SampleBattle, Any]]) -> None:
        """Every recorded sample, each in a session of its own, as a battle plays it."""
        service = SessionHandlers("blue", model.candidate.source)
        for i, (sample, agent) in enumerate(agents):
            session = _Session(service, f"checker-{i}", sample)
            if isinstance(agent, BoundAgent):
                session.defines_mask = "action_mask" in agent.hooks
                self.missing_hooks |= set(OPTIONAL_AGENT_HOOKS) - set(agent.hooks)
            try:
                if not self.open(model, session, seed=sample_seed(i)):
                    continue
                self.sessions += 1
                try:
                    self.play(session, seed=sample_seed(i))
                finally:
                    self.close(session)
            except _SampleProblem as exc:
                self.notes.append(f"sample {sample.name} could not be replayed: {exc}")
            except (UserCallTimeout, Stuck):
                return

    def open(self, model: UserModel, session: _Session, seed: int) -> bool:
        """open_session; whether it succeeded (its failure fails agent_init, policy or spaces)."""
        sample, where = session.sample, f"{session.sample.name}, open"
        config = InstanceConfig("blue", "player_0", sample.battle_format, seed)
        request = OpenSessionRequest(model.model_id, config, sample.username)
        try:
            reply = self.handle(
                session,
                RequestType.OPEN_SESSION,
                request,
                label="open_session",
                where=where,
                load=True,
            )
        except _HandlerFailure as failure:
            name = "policy" if failure.called == "new_policy" else "agent_init"
            self.tallies[name].fail(self.failure_message(failure, where))
            return False
        try:
            reply = check_wire(_reply_type(RequestType.OPEN_SESSION), reply)
        except ContractError as exc:
            self.tallies["spaces"].fail(f"the Agent's spaces {exc} at {where}")
            return False
        session.observation_space = reply.observation_space
        session.action_space = reply.action_space
        return True

    def close(self, session: _Session) -> None:
        if self.worker.stuck:
            return
        try:
            self.handle(
                session,
                RequestType.CLOSE_SESSION,
                CloseSessionRequest(),
                label="close_session",
                where=session.sample.name,
            )
        except (_HandlerFailure, _SampleProblem) as exc:
            logger.debug("closing session %s: %r", session.session_id, exc)

    def play(self, session: _Session, seed: int) -> None:
        """The session's resets, every decision point, then the battle's end."""
        sample = session.sample
        start = f"{sample.name}, start"
        self.hook(session, ResetRequest("agent", seed), start)
        self.hook(session, ResetRequest("policy"), start)
        last = -1
        point: DecisionPoint | None = None
        try:
            for point in decision_points(sample):
                frames = list(sample.frames[last + 1 : point.index + 1])
                last = point.index
                kind = point.kind
                self.decide(session, point, frames)
                self.decisions[kind] = self.decisions.get(kind, 0) + 1
        except ReplicaError as exc:
            raise _SampleProblem(str(exc)) from exc
        if point is None:
            raise _SampleProblem("the battle asked for no decision")
        # Once the replay is exhausted, the last point's battle is the finished battle.
        self.end(session, list(sample.frames[last + 1 :]), point.battle)

    def observation_failed(self, failure: _HandlerFailure, where: str) -> None:
        name = "action_mask" if failure.called == "action_mask" else "observation"
        self.tallies[name].fail(self.failure_message(failure, where))

    def check_observation(
        self, session: _Session, observation: Any, action_mask: Any, where: str
    ) -> DecideReply | None:
        """The observation and mask as the center decodes and checks them; None if they fail."""
        t = self.tallies
        reply_type = _reply_type(RequestType.DECIDE)
        try:
            check_wire(reply_type, DecideReply(observation))
        except ContractError as exc:
            t["observation"].fail(
                f"makeObs returned {short_repr(observation)}, which {exc} at {where}"
            )
            return None
        try:
            decoded: DecideReply = check_wire(reply_type, DecideReply(observation, action_mask))
        except ContractError as exc:
            t["action_mask"].fail(
                f"action_mask returned {short_repr(action_mask)}, which {exc} at {where}"
            )
            return None
        try:
            check_observation(decoded.observation, session.observation_space)
            t["observation"].ok()
        except ContractError as exc:
            t["observation"].fail(f"{exc} at {where}")
        return decoded

    def decide(self, session: _Session, point: DecisionPoint, frames: list[str]) -> None:
        """One decision, as a battle makes it: one ``decide`` request (makeObs, action_mask,
        policy.step and deploy on the edge), with the info the center gives the step; a
        ``decide`` request with the center's own action when the action had to change."""
        t = self.tallies
        where = point.where
        # What the center knows of the request from its own battle (here the sample's replay).
        team_preview = bool(point.battle.teampreview)
        info = {
            "needs_action": True,
            "team_preview": team_preview,
            "action_mask": None,  # the edge puts the Agent's mask there
            "invalid_action": False,
            "turn": point.battle.turn,
            "battle_tag": point.battle.battle_tag,
            "end_reason": None,
        }
        try:
            reply = self.handle(
                session,
                RequestType.DECIDE,
                DecideRequest(frames, 0.0, info),
                label="makeObs + action_mask + policy.step + deploy",
                where=where,
            )
        except _HandlerFailure as failure:
            self.observation_failed(failure, where)
            return
        decoded = self.check_observation(session, reply.observation, reply.action_mask, where)
        if decoded is None or not reply.stepped:
            return  # no step: a battle penalizes the observation and asks again
        space = session.action_space
        mask: np.ndarray | None = None
        try:
            mask = check_action_mask(decoded.action_mask, space)
            if session.defines_mask:
                t["action_mask"].ok(
                    "a legal action at every decision point"
                    if mask is not None
                    else "None (no mask)"
                )
        except ContractError as exc:
            t["action_mask"].fail(f"{exc} at {where}")
        battle = session.battle()
        if reply.step_error is not None:
            described = describe_body(reply.step_error, self.user_folder)
            t["policy_step"].fail(f"policy.step raised {described} at {where}")
            return
        try:
            step = check_wire(_reply_type(RequestType.DECIDE), reply)
        except ContractError as exc:
            t["policy_step"].fail(
                f"policy.step returned {short_repr(reply.action)}, which {exc} at {where}"
            )
            return
        action, order, deploy_error = step.action, step.order, step.deploy_error
        try:
            check_action(action, space, team_preview=team_preview)
            t["policy_step"].ok()
        except ContractError as exc:
            t["policy_step"].fail(f"{exc} at {where}")
            return

        if mask is not None and not team_preview and isinstance(space, spaces.Discrete):
            if mask[int(action)]:
                t["legal_actions"].ok("every action the policy chose was legal by the mask")
            else:
                legal = [int(i) for i in np.flatnonzero(mask)]
                t["legal_actions"].fail(
                    f"policy.step chose action {int(action)}, which action_mask marks illegal "
                    f"(legal: {legal}) at {where}; deploy was checked with action {legal[0]}"
                )
                action, order, deploy_error = legal[0], None, None
        if order is None and deploy_error is None:
            order, deploy_error = self.deploy(session, action, where)
        if deploy_error is not None:
            if mask is None and deploy_error.code == ErrorCode.INVALID_ACTION:
                # Without a mask the policy cannot know; a battle penalizes this, it is no crash.
                t["legal_actions"].fail(
                    f"deploy refused action {short_repr(action)} as illegal at {where}; give the "
                    f"Agent an action_mask(battle) so that policies can avoid illegal actions"
                )
            elif deploy_error.ename == "ContractError":
                t["deploy"].fail(f"{deploy_error.evalue} at {where}")
            else:
                t["deploy"].fail(
                    f"deploy raised {describe_body(deploy_error, self.user_folder)} at {where}"
                )
            return
        try:
            check_order(battle, order)
            t["deploy"].ok("every order was legal for its request")
        except ContractError as exc:
            t["deploy"].fail(f"{exc} at {where}")

    def deploy(
        self, session: _Session, action: Any, where: str
    ) -> tuple[str | None, ErrorBody | None]:
        """A decide request with the checker's own action (no new frames): ``(order, None)`` or
        ``(None, what deploy raised)``."""
        request = DecideRequest([], given_action=True, action=_plain(action))
        try:
            reply = self.handle(session, RequestType.DECIDE, request, label="deploy", where=where)
        except _HandlerFailure as failure:
            return None, error_body(failure.exc, DEPLOY_CALL)
        decoded: DecideReply = check_wire(_reply_type(RequestType.DECIDE), reply)
        if decoded.deploy_error is not None:
            return None, decoded.deploy_error
        return decoded.order, None

    def end(self, session: _Session, frames: list[str], battle: AbstractBattle) -> None:
        """The battle's end, as a battle ends: one ``decide`` with ``done`` (the last
        observation and the policy's last step), then ``episode_end``."""
        where = f"{session.sample.name}, end"
        reward = 1.0 if battle.won else -1.0 if battle.lost else 0.0
        space = session.action_space
        info = {
            "needs_action": False,
            "team_preview": False,
            "action_mask": np.zeros(int(space.n), dtype=np.int8)
            if isinstance(space, spaces.Discrete)
            else None,
            "invalid_action": False,
            "turn": battle.turn,
            "battle_tag": battle.battle_tag,
            "end_reason": "win" if battle.won or battle.lost else "tie",
        }
        try:
            reply = self.handle(
                session,
                RequestType.DECIDE,
                DecideRequest(frames, reward, info, done=True),
                label="makeObs + action_mask + policy.step (done)",
                where=where,
            )
        except _HandlerFailure as failure:
            self.observation_failed(failure, where)
            reply = None
        if reply is not None:
            decoded = self.check_observation(session, reply.observation, reply.action_mask, where)
            # A battle ignores what this last step returns, and only logs what it raises.
            if decoded is not None and reply.step_error is not None:
                described = describe_body(reply.step_error, self.user_folder)
                self.final_step_failures.append(f"policy.step raised {described} at {where}")
            elif decoded is not None and reply.stepped:
                try:
                    check_wire(_reply_type(RequestType.DECIDE), reply)
                except ContractError as exc:
                    self.final_step_failures.append(
                        f"policy.step returned a value which {exc} at {where}"
                    )
        self.hook(session, EpisodeEndRequest([]), where)
