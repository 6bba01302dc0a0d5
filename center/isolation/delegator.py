"""AgentDelegator and PolicyDelegator: the remote user Agent and Policy, seen from the center.

They have exactly the Agent and StandalonePolicy interfaces, so PokemonEnv and the match loop cannot
tell a delegated side from an in-process one. The AgentDelegator forwards to the edge only what its
player received from Showdown: the raw frames of that battle since its last call, in order (the
edge's replica battle applies them). The center never trusts what comes back: a
:class:`SideGuard` checks observations against ``observation_space`` and actions against
``action_space``, and PokemonEnv rebuilds every order from the request before Showdown sees it.

Errors map to the side's status: a lost or silent edge raises :class:`SideDisconnected`, a call past
its deadline raises :class:`CallTimeout` (also when the edge stopped it: error code ``timeout``), an
illegal action reported by the edge raises ``InvalidActionError``, anything else the user code
raised, or the death of the worker running it, is a :class:`RemoteUserError`.

A decision is one ``decide`` request (protocol 2.0, the only decision message) when the environment
cooperates, as PokemonEnv does: before ``makeObs`` it tells the AgentDelegator, through
:meth:`AgentDelegator.expect_step`, the reward and info the policy's step will get (and, at the end
of a battle, those of its last step, ``done``). ``makeObs`` then sends one ``decide_request``: the
edge runs makeObs, the policy's step and deploy at once, and the step and deploy that follow here
are answered from its reply. Without that cooperation ``makeObs`` asks for the observation only;
a step with other arguments than the expected ones asks for the decision again (makeObs runs a
second time), and deploying another action than the policy's sends that action
(``given_action``): these are the paths of a caller that is not PokemonEnv.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, NoReturn

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle

from center.env import frames as frame_registry
from center.errors import (
    CallTimeout,
    CenterError,
    EdgeCallError,
    EdgeFull,
    EdgeRemoteError,
    EdgeTimeout,
    EdgeUnavailable,
    RemoteUserError,
    SideDisconnected,
)
from center.isolation.edge_client import EdgeClient
from edge.contract.agent import Agent, Order
from edge.contract.policy import StandalonePolicy
from edge.contract.user_module import LOAD_TIME_LIMIT
from edge.errors import InvalidActionError
from edge.wire.messages import (
    MAX_LOAD_LIMIT,
    CallUsage,
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    EpisodeEndRequest,
    ErrorBody,
    ErrorCode,
    InstanceConfig,
    OpenSessionRequest,
    ResetRequest,
    policy_mask,
)

logger = logging.getLogger(__name__)

OPEN_TIMEOUT = LOAD_TIME_LIMIT  # opening a session may load a model's weights


def bounded_load_limit(announced: Any) -> float:
    """The open_session timeout for an edge that announced ``announced`` seconds (its hello):
    bounded by MAX_LOAD_LIMIT, and the default for anything that is not a positive number."""
    if isinstance(announced, bool) or not isinstance(announced, int | float):
        return OPEN_TIMEOUT
    if not announced > 0:  # NaN included
        return OPEN_TIMEOUT
    return float(min(announced, MAX_LOAD_LIMIT))


OUTPUT_KEEP = 64 * 1024

TIMEOUT_GRACE = 0.5
"""Seconds a decision's call waits past its deadline for the edge's TIMEOUT reply, which names
the user call that overran (the edge's deadline starts when the call reaches it)."""


@dataclass
class _Decided:
    """What the edge answered to a decide request: the step's arguments and what it gave."""

    observation: Any
    reward: float
    info: dict[str, Any]
    done: bool
    action: Any
    order: str | None
    deploy_error: ErrorBody | None
    step_error: ErrorBody | None


class EdgeSession:
    """One session on an edge (one battle, one side), shared by the two delegators."""

    def __init__(
        self,
        client: EdgeClient,
        model_id: str,
        instance_config: InstanceConfig,
        username: str,
        *,
        timeout: float = OPEN_TIMEOUT,
    ) -> None:
        self.client = client
        self.model_id = model_id
        self.instance_config = instance_config
        self.session_id = uuid.uuid4().hex
        self.call_timeout = timeout
        #: seconds a call of the side's budget may wait on the edge for a free CPU (protocol 1.4;
        #: set with call_timeout by the side's guard), credited to the side
        self.queue_limit = 0.0
        #: what the last call cost on the edge (its reply's ``usage``), None when it did not say
        self.last_usage: CallUsage | None = None
        self.output: list[str] = []
        self._output_size = 0
        self._sent: dict[int, int] = {}  # id(battle) -> frames already forwarded
        #: the action of the last policy step and what the edge's deploy made of it
        self.speculative: tuple[Any, str | None, ErrorBody | None] | None = None
        #: the reward, info and done the next policy step is expected to get (see expect_step)
        self.expected_step: tuple[float, dict[str, Any], bool] | None = None
        #: the policy step the edge took with the last makeObs
        self.decided: _Decided | None = None
        #: a decide with ``done`` was sent: the policy's last step was asked for (or skipped)
        self.final_sent = False
        self.username = username
        reply = self.call(OpenSessionRequest(model_id, instance_config, username), timeout=timeout)
        self.observation_space: gymnasium.Space[Any] = reply.observation_space
        self.action_space: gymnasium.Space[Any] = reply.action_space
        self.agent_full_name: str = reply.agent_full_name
        #: the digest of the model's files on the edge (protocol 1.4; "" from an older edge)
        self.code_digest: str = reply.code_digest

    def call(self, body: Any, timeout: float | None = None) -> Any:
        """One request of this session (its type is the body's), its errors mapped to the side's
        vocabulary."""
        # The guard's calls (no explicit timeout) are its decisions: only they get queue credit,
        # and a grace for the edge's word when it stops one at its deadline (it names the user
        # call that overran).
        wait, queue_limit, grace = (
            (self.call_timeout, self.queue_limit, TIMEOUT_GRACE)
            if timeout is None
            else (timeout, 0, 0.0)
        )
        self.last_usage = None
        try:
            reply = self.client.call(
                body,
                session=self.session_id,
                timeout=wait,
                queue_limit=queue_limit or None,
                grace=grace,
            )
        except EdgeRemoteError as exc:
            self.last_usage = exc.usage
            self._keep_output(exc.output)
            if exc.code == ErrorCode.UNKNOWN_SESSION:  # the edge restarted: it lost this battle
                raise SideDisconnected(
                    f"the edge at {self.client.address} lost the session"
                ) from exc
            if exc.code == ErrorCode.BUSY and isinstance(body, OpenSessionRequest):
                raise EdgeFull(exc.evalue) from exc  # no worker for it now: the battle waits
            if exc.code == ErrorCode.TIMEOUT:  # the edge stopped the call at its deadline
                raise CallTimeout(exc.evalue, exc.call) from exc
            error = ErrorBody(exc.ename, exc.evalue, exc.traceback, exc.code)
            self.raise_remote(error, deploying=False, cause=exc)
        except EdgeTimeout as exc:
            if not self.client.connected:
                raise SideDisconnected(f"the edge at {self.client.address} is gone: {exc}") from exc
            raise CallTimeout(str(exc)) from exc
        except EdgeUnavailable as exc:
            raise SideDisconnected(str(exc)) from exc
        except EdgeCallError as exc:
            raise RemoteUserError(type(exc).__name__, str(exc), "") from exc
        self.last_usage = reply.usage
        self._keep_output(reply.output)
        return reply.body

    def raise_remote(
        self, error: ErrorBody, *, deploying: bool, cause: BaseException | None = None
    ) -> NoReturn:
        """Raise what user code on the edge raised: an illegal action (only deploy judges
        actions: its ``deploy_error``), or a RemoteUserError."""
        if deploying and error.code == ErrorCode.INVALID_ACTION:
            raise InvalidActionError(error.evalue) from cause
        raise RemoteUserError(error.ename, error.evalue, error.traceback) from cause

    def _keep_output(self, text: str) -> None:
        if text and self._output_size < OUTPUT_KEEP:
            text = text[: OUTPUT_KEEP - self._output_size]
            self.output.append(text)
            self._output_size += len(text)

    def new_frames(self, battle: AbstractBattle) -> list[str]:
        """The frames of ``battle`` this session has not forwarded yet."""
        # One snapshot: poke-env's loop thread may append while we read.
        frames = list(frame_registry.frames_of(battle) or [])
        start = self._sent.get(id(battle), 0)
        if battle.player_username and battle.player_username != self.username:
            raise CenterError(
                f"battle of {battle.player_username} handed to the session of {self.username}"
            )
        self._sent = {id(battle): len(frames)}
        return list(frames[start:])

    def close(self, timeout: float = 2.0) -> None:
        """Forget the session on the edge (best effort, short deadline)."""
        try:
            self.client.call(CloseSessionRequest(), session=self.session_id, timeout=timeout)
        except EdgeCallError as exc:
            logger.debug("closing session %s: %r", self.session_id, exc)


class _OnSession:
    """The deadline, the credit for waiting and the last call's usage of a delegator: those of
    its session, which its guard sets and reads before and after each call."""

    session: EdgeSession

    @property
    def call_timeout(self) -> float:
        return self.session.call_timeout

    @call_timeout.setter
    def call_timeout(self, value: float) -> None:
        self.session.call_timeout = value

    @property
    def queue_limit(self) -> float:
        return self.session.queue_limit

    @queue_limit.setter
    def queue_limit(self, value: float) -> None:
        self.session.queue_limit = value

    @property
    def last_usage(self) -> CallUsage | None:
        return self.session.last_usage

    @last_usage.setter
    def last_usage(self, value: CallUsage | None) -> None:
        self.session.last_usage = value


class AgentDelegator(_OnSession, Agent):
    """The user's Agent on an edge (see the module docstring)."""

    def __init__(self, session: EdgeSession) -> None:
        super().__init__({}, session.instance_config.to_dict())
        self.session = session
        self.observation_space = session.observation_space
        self.action_space = session.action_space
        self._mask: np.ndarray | None = None
        self._mask_battle: int | None = None
        self._seed: int | None = None

    def expect_step(self, reward: float, info: dict[str, Any], done: bool = False) -> None:
        """The environment's cooperation: the policy's next step, if the next ``makeObs`` leads
        to one, gets ``reward``, ``info`` and ``done`` (``info["action_mask"]`` aside while the
        battle goes on: it comes from makeObs). That ``makeObs`` then asks the edge for the whole
        decision at once; with ``done``, for the last step."""
        self.session.expected_step = (float(reward), _plain_info(info), bool(done))

    def makeObs(self, battle: AbstractBattle) -> Any:
        # makeObs and action_mask are one round trip: the edge returns both. A new observation
        # starts a new decision: an order deployed for an earlier one must never be reused.
        session = self.session
        session.speculative = session.decided = None
        expected, session.expected_step = session.expected_step, None
        info: dict[str, Any]
        if expected is None:
            reward, info, done = 0.0, {"needs_action": False}, False
        else:
            reward, info, done = expected
            if not done:
                info = {**info, "action_mask": None}  # the edge puts the Agent's mask there
        session.final_sent = session.final_sent or done
        reply = self._decide(battle, reward, info, done)
        self._mask, self._mask_battle = reply.action_mask, id(battle)
        if reply.stepped:
            if not done:
                info["action_mask"] = policy_mask(reply.action_mask, self.action_space)
            session.decided = _Decided(
                reply.observation,
                reward,
                info,
                done,
                reply.action,
                reply.order,
                reply.deploy_error,
                reply.step_error,
            )
        return reply.observation

    def _decide(
        self, battle: AbstractBattle, reward: float, info: dict[str, Any], done: bool
    ) -> DecideReply:
        session = self.session
        reply: DecideReply = session.call(
            DecideRequest(session.new_frames(battle), reward, info, done=done)
        )
        return reply

    def action_mask(self, battle: AbstractBattle) -> np.ndarray | None:
        return self._mask if self._mask_battle == id(battle) else None

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        session = self.session
        speculative, session.speculative = session.speculative, None
        if speculative is not None and same_action(speculative[0], action):
            # Deployed by the edge on the battle of this request (frames that arrived since
            # cannot change it: a new request comes only after this order). They go with the
            # next call.
            _, order, error = speculative
            if error is not None:  # raise what the edge's deploy raised, as the call would have
                session.raise_remote(error, deploying=True)
            if order is not None:
                return order
        logger.info("%s: deploying an action its policy did not choose", session.model_id)
        frames = session.new_frames(battle)
        reply: DecideReply = session.call(
            DecideRequest(frames, given_action=True, action=_plain(action))
        )
        if reply.deploy_error is not None:
            session.raise_remote(reply.deploy_error, deploying=True)
        if reply.order is None:
            raise RemoteUserError("ContractError", "the edge deployed no order", "")
        return reply.order

    def seed(self, seed: int | None) -> None:
        self._seed = seed

    def reset(self) -> None:
        self.session.call(ResetRequest("agent", self._seed))

    def onEpisodeEnd(self, battle: AbstractBattle) -> None:
        self.session.call(EpisodeEndRequest(self.session.new_frames(battle)))


class PolicyDelegator(_OnSession, StandalonePolicy):
    """The user's StandalonePolicy on an edge, in the same session as its AgentDelegator."""

    def __init__(self, session: EdgeSession) -> None:
        self.session = session

    def reset(self) -> None:
        self.session.call(ResetRequest("policy"))

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> Any:
        session = self.session
        decided, session.decided = session.decided, None
        info = _plain_info(info)
        if not (
            decided is not None
            and decided.done == bool(done)
            and observation is decided.observation
            and float(reward) == decided.reward
            and same_info(info, decided.info)
        ):
            if done and session.final_sent:
                # The last step went with the last makeObs, or was skipped there (its call
                # failed, or the observation was refused): never again, after onEpisodeEnd.
                return None
            # Not the step the edge took with makeObs (a caller that is not PokemonEnv): the
            # decision again, with these arguments (makeObs runs once more on the edge).
            logger.info("%s: a policy step the edge did not expect", session.model_id)
            decided = _redecide(session, float(reward), info, bool(done))
        if decided.step_error is not None:
            session.raise_remote(decided.step_error, deploying=False)
        session.speculative = (
            None if done else (decided.action, decided.order, decided.deploy_error)
        )
        return decided.action


def _redecide(session: EdgeSession, reward: float, info: dict[str, Any], done: bool) -> _Decided:
    """The decision again on the edge's battle as it stands (no new frames), for a step with
    ``reward``, ``info`` and ``done``; RemoteUserError when the policy did not step."""
    sent = info if done else {**info, "needs_action": True, "action_mask": None}
    reply: DecideReply = session.call(DecideRequest([], reward, sent, done=done))
    if not reply.stepped:
        raise RemoteUserError(
            "InvalidObservation", "makeObs returned a value outside observation_space", ""
        )
    if not done:
        sent = {**sent, "action_mask": policy_mask(reply.action_mask, session.action_space)}
    return _Decided(
        reply.observation,
        reward,
        sent,
        done,
        reply.action,
        reply.order,
        reply.deploy_error,
        reply.step_error,
    )


def same_action(speculated: Any, action: Any) -> bool:
    """Whether the action handed to deploy is the one the policy step returned."""
    try:
        if isinstance(speculated, np.ndarray) or isinstance(action, np.ndarray):
            return bool(np.array_equal(np.asarray(speculated), np.asarray(action)))
        return type(_plain(speculated)) is type(_plain(action)) and bool(
            _plain(speculated) == _plain(action)
        )
    except Exception:
        return False


def same_info(actual: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Whether two plain infos are equal (arrays by dtype, shape and values)."""
    if actual.keys() != expected.keys():
        return False
    for key, value in expected.items():
        other = actual[key]
        if isinstance(value, np.ndarray) or isinstance(other, np.ndarray):
            if not (
                isinstance(value, np.ndarray)
                and isinstance(other, np.ndarray)
                and value.dtype == other.dtype
                and value.shape == other.shape
                and value.tobytes() == other.tobytes()  # a mask: a few bytes, compared in C
            ):
                return False
        elif type(value) is not type(other) or value != other:
            return False
    return True


def _plain(value: Any) -> Any:
    """numpy scalars as Python scalars (arrays travel as arrays)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _plain_info(info: dict[str, Any]) -> dict[str, Any]:
    """What the policy may see of ``info``: the mask and the flags, nothing of the center's."""
    keep = (
        "team_preview",
        "action_mask",
        "turn",
        "battle_tag",
        "invalid_action",
        "needs_action",
        "end_reason",
    )
    return {k: _plain(info[k]) for k in keep if k in info}
