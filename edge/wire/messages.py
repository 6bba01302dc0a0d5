"""The messages between the center and an edge: the version, the message table, the typed bodies
(msgspec Structs tagged with their type: the codec decodes and checks them in one pass), the
policy's ``info``, a call's usage, and the error codes of error replies. ``docs/protocol.md``
describes the same for humans; a test keeps them in agreement.
"""

from __future__ import annotations

import functools
import re
import traceback as traceback_module
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

import gymnasium
import msgspec
import numpy as np

from edge.errors import EdgeError, ProtocolError, ProtocolVersionError, ReplicaError
from edge.wire.msgpack_values import (
    EVALUE_LIMIT,
    MAX_NAME_LENGTH,
    TRACEBACK_LIMIT,
    CpuList,
    Digest,
    EValue,
    FrameList,
    FullName,
    Name,
    NameList,
    Order,
    Traceback,
)

__all__ = [
    "DEFAULT_LOAD_LIMIT",
    "DEPLOY_CALL",
    "ERROR_CODES",
    "MAX_LOAD_LIMIT",
    "MESSAGES",
    "PROTOCOL_VERSION",
    "USER_CALLS",
    "Body",
    "CallUsage",
    "CloseSessionReply",
    "CloseSessionRequest",
    "DecideReply",
    "DecideRequest",
    "EpisodeEndReply",
    "EpisodeEndRequest",
    "ErrorBody",
    "ErrorCode",
    "ErrorCodeSpec",
    "HandledBy",
    "HelloReply",
    "HelloRequest",
    "InstanceConfig",
    "MessageSpec",
    "OpenSessionReply",
    "OpenSessionRequest",
    "PolicyInfo",
    "RequestType",
    "ResetReply",
    "ResetRequest",
    "error_body",
    "error_code_for",
    "error_code_spec",
    "reply_spec_for",
    "reply_type_for",
    "spec_for",
    "truncate_text",
    "versions_compatible",
]

PROTOCOL_VERSION: Final = "5.0"
"""``major.minor``. Peers with the same major version interoperate; a minor only adds optional
fields, message types or error codes (an unknown field is ignored, an unknown request type is
answered ``unsupported``). The history of the versions is in docs/protocol.md."""

DEFAULT_LOAD_LIMIT: Final = 30.0
"""Seconds a battle's ``open_session`` gives, in all, to loading a model, unless the edge says
otherwise (``sep_edge --load-limit``; docs/contract.md, "Time")."""

MAX_LOAD_LIMIT: Final = 600.0
"""The most loading time an edge may announce: a center waits no longer to open a session."""

MAX_CALL_TIMEOUT: Final = 86400.0
"""Largest ``timeout`` a request may carry, in seconds (a day)."""

_VERSION_RE: Final = re.compile(r"(\d{1,4})\.(\d{1,4})")


# --------------------------------------------------------------------------------------------
# Message bodies. Field types are part of the protocol: the receiver's decoder checks them.
# --------------------------------------------------------------------------------------------


def _type_name(class_name: str) -> str:
    """A body's tag: its class name in snake case (``DecideRequest`` -> ``decide_request``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


class Body(msgspec.Struct, frozen=True, tag_field="type", tag=_type_name):
    """A message body: its ``type`` (the class name in snake case, ``decide_request``) travels in
    its frame, so that one union of every body decodes a frame in one pass."""


class HelloRequest(Body, frozen=True):
    """Liveness and version check; ``client`` names the caller in the edge's log."""

    client: Name = ""


class HelloReply(Body, frozen=True):
    """Who answers: the edge's side, its protocol version, the model ids it serves.

    ``instance`` is random per edge process: a change means the edge restarted and lost its
    sessions. ``load_limit`` is the seconds this edge gives a battle's ``open_session`` to load a
    model (``sep_edge --load-limit``). ``host`` names the machine (its kernel's boot id) and
    ``cpus`` the CPUs the edge's calls run on there: the center asks a battle's two sides at once
    only when their edges' CPUs are not shared ("" and []: not said). With memory admission on,
    ``memory_limit`` is what each of its workers claims, ``memory_budget`` what this edge checks
    the claims of the edges naming the same ``host`` and ``memory_claims`` (their claims folder)
    against: the center refuses a run whose sides' workers could never fit (0, 0, "": not said).
    """

    side: Name
    protocol_version: Name
    models: NameList
    instance: Name
    load_limit: float = DEFAULT_LOAD_LIMIT
    host: Name = ""
    cpus: CpuList = []
    memory_limit: int = 0
    memory_budget: int = 0
    memory_claims: Name = ""


class InstanceConfig(msgspec.Struct, frozen=True):
    """The Agent's ``instanceConfig`` (user-module contract)."""

    side: Name
    player: Name
    battle_format: Name
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plain dict passed to ``AgentClass(modelConfig, instanceConfig)``."""
        return msgspec.structs.asdict(self)


class OpenSessionRequest(Body, frozen=True):
    """Create the Agent, the Policy and the replica battle of one battle and side."""

    model_id: Name
    instance_config: InstanceConfig
    username: Name


class OpenSessionReply(Body, frozen=True):
    """The Agent's spaces and the ``agentName:modelName:policyName`` of the session.

    ``code_digest``: the digest of the model's files on the edge
    (:func:`edge.contract.provenance.code_digest`).
    """

    observation_space: gymnasium.Space[Any]
    action_space: gymnasium.Space[Any]
    agent_full_name: FullName
    code_digest: Digest = ""


class PolicyInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """The ``info`` a policy's step gets (docs/contract.md), as the center gives it: the one list
    of its keys (:meth:`to_dict`). In a decide request ``action_mask`` is None: the edge puts the
    Agent's mask there (``edge.contract.legality.policy_mask``), but for a ``done`` step, which gets it as given."""

    needs_action: bool = True
    team_preview: bool = False
    action_mask: np.ndarray | None = None
    invalid_action: bool = False
    turn: Annotated[int, msgspec.Meta(ge=0)] = 0
    battle_tag: Name = ""
    end_reason: Name | None = None

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> PolicyInfo:
        """The fields of ``info`` this Struct declares (numpy scalars as Python's), the rest
        left out: what the policy may see, nothing else of the center's."""
        known = {
            name: value.item() if isinstance(value, np.generic) else value
            for name in cls.__struct_fields__
            if (value := info.get(name, _ABSENT)) is not _ABSENT
        }
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        """The plain dict a policy's ``step`` gets."""
        return {name: getattr(self, name) for name in self.__struct_fields__}


_ABSENT: Final = object()


class DecideRequest(Body, frozen=True):
    """The decision message: apply ``frames``, then run the side's decision.

    - By default: ``makeObs`` and ``action_mask``, then, when ``info.needs_action`` is true and
      the observation lies in ``observation_space``, ``policy.step`` and ``deploy`` on the battle
      as it stands. ``reward`` and ``info`` are the step's arguments as the center passes them
      (``done`` false); the edge puts the mask the Agent just gave in ``info``, as the center
      presents it to a policy (see ``edge.contract.legality.policy_mask``). With ``needs_action`` false only the
      observation is made.
    - ``done``: the battle is over: ``makeObs`` and ``action_mask``, then the policy's last step
      (``done=True``) with ``reward`` and ``info`` as given (its mask included), when the
      observation lies in ``observation_space``. Nothing is deployed.
    """

    frames: FrameList
    reward: float = 0.0
    info: PolicyInfo = msgspec.field(default_factory=PolicyInfo)
    done: bool = False


class DecideReply(Body, frozen=True):
    """What the decision gave: the observation and the Agent's mask, whether the policy stepped
    (``stepped``), the action and the order, or what ``policy.step`` (``step_error``) or
    ``deploy`` (``deploy_error``) raised, as data."""

    observation: Any
    action_mask: np.ndarray | None = None
    stepped: bool = False
    action: Any = None
    order: Order | None = None
    deploy_error: ErrorBody | None = None
    step_error: ErrorBody | None = None


class ResetRequest(Body, frozen=True):
    """Reset the Agent or the Policy of the session, re-seeding the Agent first when ``seed``."""

    target: Literal["agent", "policy"] = "agent"
    seed: int | None = None


class ResetReply(Body, frozen=True):
    """Empty."""


class EpisodeEndRequest(Body, frozen=True):
    """Apply the last frames of the battle, then ``onEpisodeEnd``."""

    frames: FrameList


class EpisodeEndReply(Body, frozen=True):
    """Empty."""


class CloseSessionRequest(Body, frozen=True):
    """Forget the session (Agent, Policy, replica)."""


class CloseSessionReply(Body, frozen=True):
    """Empty."""


class ErrorCode(StrEnum):
    """What went wrong, in the ``code`` of an error body: what a receiver matches on.

    A receiver treats a code it does not know, or none, like ``user_error``.
    """

    PROTOCOL = "protocol"
    """The request or its reply breaks the protocol (undecodable, malformed, too large)."""
    VERSION = "version"
    """The request speaks another major protocol version."""
    UNSUPPORTED = "unsupported"
    """This edge has no handler for the request's type."""
    BUSY = "busy"
    """The session already has too many requests waiting; to open_session: the edge cannot start
    a worker now (full, or the host's memory budget taken): the center waits, books nothing."""
    UNKNOWN_SESSION = "unknown_session"
    """The edge has no such session (never opened, closed, expired, or the edge restarted)."""
    UNKNOWN_MODEL = "unknown_model"
    """The edge's candidates.json does not list the model asked for."""
    INVALID_ACTION = "invalid_action"
    """``deploy`` refused the action: it is not legal now (a ValueError of the user's code)."""
    USER_ERROR = "user_error"
    """The user's code raised, or broke the user-module contract."""
    INTERNAL = "internal"
    """The edge's own session logic failed (no battle frames yet, a frame the replica cannot
    apply, too many open sessions)."""
    TIMEOUT = "timeout"
    """The call did not return by its ``timeout``: the edge killed the worker running it.
    The center books a timeout."""
    WORKER_DIED = "worker_died"
    """The worker process serving the session died (an exit, a signal, a limit); the
    ``evalue`` says how. The center books an error of the user's code."""


@dataclass(frozen=True, slots=True)
class ErrorCodeSpec:
    """What an error code means to an edge's supervisor (a row of :data:`ERROR_CODES`)."""

    supervisor_only: bool
    """Only the supervisor gives it: a worker's reply that claims it is refused (the worker is
    killed), so that user code cannot pass its own failure off as the edge's."""
    ends_worker: bool
    """User code failed in the worker that answered it: the worker serves no other battle."""


ERROR_CODES: Final[Mapping[str, ErrorCodeSpec]] = {
    ErrorCode.PROTOCOL: ErrorCodeSpec(supervisor_only=False, ends_worker=True),
    ErrorCode.VERSION: ErrorCodeSpec(supervisor_only=True, ends_worker=False),
    ErrorCode.UNSUPPORTED: ErrorCodeSpec(supervisor_only=False, ends_worker=False),
    ErrorCode.BUSY: ErrorCodeSpec(supervisor_only=True, ends_worker=False),
    ErrorCode.UNKNOWN_SESSION: ErrorCodeSpec(supervisor_only=True, ends_worker=False),
    ErrorCode.UNKNOWN_MODEL: ErrorCodeSpec(supervisor_only=True, ends_worker=False),
    ErrorCode.INVALID_ACTION: ErrorCodeSpec(supervisor_only=False, ends_worker=False),
    ErrorCode.USER_ERROR: ErrorCodeSpec(supervisor_only=False, ends_worker=True),
    ErrorCode.INTERNAL: ErrorCodeSpec(supervisor_only=False, ends_worker=True),
    ErrorCode.TIMEOUT: ErrorCodeSpec(supervisor_only=True, ends_worker=False),
    ErrorCode.WORKER_DIED: ErrorCodeSpec(supervisor_only=False, ends_worker=True),
}
"""The error-code table: every :class:`ErrorCode` and what it means to a supervisor."""

_UNKNOWN_CODE: Final = ErrorCodeSpec(supervisor_only=False, ends_worker=True)


def error_code_spec(code: str) -> ErrorCodeSpec:
    """The row of ``code``; a code this side does not know, or none, is taken as a
    failure of user code, as ``user_error`` is."""
    return ERROR_CODES.get(code, _UNKNOWN_CODE)


class ErrorBody(Body, frozen=True):
    """Body of every reply with status ``error``: the exception's type name, message, traceback
    (for humans) and the :class:`ErrorCode` (for programs; ``""`` when the peer gave none)."""

    ename: Name
    evalue: EValue
    traceback: Traceback = ""
    code: Name = ""
    #: the user call that raised or ran past its deadline, one of :data:`USER_CALLS`; ""
    #: when unknown (or not a user call)
    call: Name = ""


USER_CALLS: Final = ("makeObs", "action_mask", "policy.step", "deploy")
"""The user calls of a decision, as an error body's ``call`` names them."""


# --------------------------------------------------------------------------------------------
# The message table.
# --------------------------------------------------------------------------------------------


class RequestType(StrEnum):
    """Every request type, as it appears in the envelope's ``type``."""

    HELLO = "hello_request"
    OPEN_SESSION = "open_session_request"
    DECIDE = "decide_request"
    RESET = "reset_request"
    EPISODE_END = "episode_end_request"
    CLOSE_SESSION = "close_session_request"


class HandledBy(StrEnum):
    """Who serves a request on an edge (the message table's ``handled_by``)."""

    SERVER = "server"
    """The socket server answers it itself, even when every worker is busy."""
    ROUTER = "router"
    """The sandbox's router reads its body (to pick or bind a worker), then its worker runs it."""
    WORKER = "worker"
    """The router forwards its bytes to the worker of its session, which runs it."""


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """One row of the message table: a request type, its bodies, whether it needs a session,
    who serves it (``handled_by``), whether its body carries battle frames (``frames``), whether
    an edge replays it to restore a session on a fresh worker after a timeout (its frames only,
    no user call but the Agent's and Policy's construction and reset), and whether it ends its
    session (answered ok when the session is gone already)."""

    request_type: RequestType
    request_body: type
    reply_body: type
    needs_session: bool
    handled_by: HandledBy = HandledBy.WORKER
    carries_frames: bool = False
    replayed_on_restore: bool = False
    ends_session: bool = False

    @property
    def reply_type(self) -> str:
        """``<action>_reply`` for ``<action>_request``."""
        return self.request_type.removesuffix("_request") + "_reply"


MESSAGES: Final[Mapping[str, MessageSpec]] = {
    spec.request_type: spec
    for spec in (
        MessageSpec(
            RequestType.HELLO,
            HelloRequest,
            HelloReply,
            needs_session=False,
            handled_by=HandledBy.SERVER,
        ),
        MessageSpec(
            RequestType.OPEN_SESSION,
            OpenSessionRequest,
            OpenSessionReply,
            needs_session=True,
            handled_by=HandledBy.ROUTER,
            replayed_on_restore=True,
        ),
        MessageSpec(
            RequestType.DECIDE,
            DecideRequest,
            DecideReply,
            needs_session=True,
            carries_frames=True,
            replayed_on_restore=True,
        ),
        MessageSpec(
            RequestType.RESET,
            ResetRequest,
            ResetReply,
            needs_session=True,
            replayed_on_restore=True,
        ),
        MessageSpec(
            RequestType.EPISODE_END,
            EpisodeEndRequest,
            EpisodeEndReply,
            needs_session=True,
            carries_frames=True,
            replayed_on_restore=True,
        ),
        MessageSpec(
            RequestType.CLOSE_SESSION,
            CloseSessionRequest,
            CloseSessionReply,
            needs_session=True,
            ends_session=True,
        ),
    )
}
"""The message table, keyed by request type (in code and in ``docs/protocol.md``)."""

_BY_REPLY_TYPE: Final[Mapping[str, MessageSpec]] = {s.reply_type: s for s in MESSAGES.values()}


def spec_for(request_type: str) -> MessageSpec:
    """The table row of ``request_type``; ProtocolError when the type is unknown."""
    try:
        return MESSAGES[request_type]
    except KeyError:
        raise ProtocolError(f"unknown message type {request_type!r}") from None


def reply_spec_for(reply_type: str) -> MessageSpec | None:
    """The table row answered by ``reply_type``; None when no request is answered by it."""
    return _BY_REPLY_TYPE.get(reply_type)


def reply_type_for(request_type: object) -> str:
    """The reply type answering ``request_type``; ``error_reply`` for an unknown request type."""
    if isinstance(request_type, str) and request_type in MESSAGES:
        return MESSAGES[request_type].reply_type
    return "error_reply"


@functools.lru_cache(maxsize=64)
def versions_compatible(version: str) -> bool:
    """Whether a peer speaking ``version`` understands this side (same major version)."""
    match = _VERSION_RE.fullmatch(version)
    ours = _VERSION_RE.fullmatch(PROTOCOL_VERSION)
    assert ours is not None
    return match is not None and int(match.group(1)) == int(ours.group(1))


# --------------------------------------------------------------------------------------------
# A call's usage: the supervisor's frame after a reply's body.
# --------------------------------------------------------------------------------------------

UsedSeconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_CALL_TIMEOUT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=1 << 62)]


class CallUsage(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a call cost on the edge, measured by the edge's supervisor, never by the worker:
    ``cpu`` seconds used by all the worker's processes during the call, ``queued`` seconds the
    request waited for a free CPU before it started. What the call's worker asked of the
    organizer's model endpoints (``sep_edge --endpoint``) while it ran: requests, bytes (both
    ways) and the tokens their replies reported (OpenAI-style ``usage``)."""

    cpu: UsedSeconds
    queued: UsedSeconds
    endpoint_requests: Count = 0
    endpoint_bytes: Count = 0
    endpoint_tokens: Count = 0


def truncate_text(text: str, limit: int, *, keep: Literal["head", "tail"] = "tail") -> str:
    """``text`` cut to ``limit`` characters (plus a marker saying how much was cut)."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    if keep == "tail":
        return f"[... {cut} characters truncated ...]\n" + text[-limit:]
    return text[:limit] + f"\n[... {cut} characters truncated ...]"


# --------------------------------------------------------------------------------------------
# Error bodies.
# --------------------------------------------------------------------------------------------


DEPLOY_CALL: Final = "deploy"
"""The ``call`` of :func:`error_code_for` and :func:`error_body` for what ``deploy`` raised."""


def error_code_for(exc: BaseException, call: str | None = None) -> ErrorCode:
    """The code of an error ``exc`` raised by ``call`` (a request type, or the user call
    :data:`DEPLOY_CALL`).

    An exception class may name its code in an ``error_code`` class attribute (the session
    logic's refusals do: unknown session, unknown model).
    """
    if isinstance(exc, ProtocolVersionError):
        return ErrorCode.VERSION
    if isinstance(exc, ProtocolError):
        return ErrorCode.PROTOCOL
    named = getattr(type(exc), "error_code", None)
    if isinstance(named, ErrorCode):
        return named
    # deploy judges the action: its ValueErrors (InvalidActionError is one) refuse the action.
    if call == DEPLOY_CALL and isinstance(exc, ValueError):
        return ErrorCode.INVALID_ACTION
    # The edge's own code raises the root class itself; its subclasses (contract, actions, state
    # specs) are raised on behalf of user code.
    if type(exc) is EdgeError or isinstance(exc, ReplicaError):
        return ErrorCode.INTERNAL
    return ErrorCode.USER_ERROR


def error_body(exc: BaseException, call: str | None = None) -> ErrorBody:
    """The ErrorBody describing ``exc``: type name, message and traceback (each truncated) and the
    code of :func:`error_code_for`."""
    formatted = "".join(traceback_module.format_exception(exc))
    return ErrorBody(
        ename=type(exc).__name__[:MAX_NAME_LENGTH],
        evalue=truncate_text(str(exc), EVALUE_LIMIT, keep="head"),
        traceback=truncate_text(formatted, TRACEBACK_LIMIT),
        code=error_code_for(exc, call),
    )
