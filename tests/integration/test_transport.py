"""EdgeSocketServer and EdgeClient over real sockets on loopback, with real CurveZMQ.

Every receive has a timeout and every socket is closed with linger=0: a broken peer fails a test,
it never hangs the suite. Nothing here asserts how long anything took.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import msgpack
import numpy as np
import pytest
import zmq
import zmq.auth

from center.errors import (
    AuthenticationError,
    EdgeCallError,
    EdgeProtocolError,
    EdgeRemoteError,
    EdgeTimeout,
    EdgeUnavailable,
    SideError,
)
from center.isolation.edge_client import EdgeClient
from center.isolation.edge_session import EdgeSession, RemoteSide
from edge.contract.outcomes import SideStatus
from edge.errors import CurveKeyError, InsecureBindError, InvalidActionError, TransportError
from edge.service.server.dispatch import CallContext
from edge.service.server.socket_server import EdgeSocketServer
from edge.service.worker.sessions import UnknownSession
from edge.wire.envelopes import CODEC, Message
from edge.wire.keys import (
    CurveConfig,
    KeyPair,
    center_curve_from_config,
    edge_curve_from_config,
    generate_curve_config,
    generate_keypair,
    load_keypair,
    load_public_key,
    write_keypair,
)
from edge.wire.messages import (
    DEPLOY_CALL,
    PROTOCOL_VERSION,
    CallUsage,
    DecideReply,
    DecideRequest,
    ErrorCode,
    InstanceConfig,
    OpenSessionReply,
    OpenSessionRequest,
    RequestType,
    ResetReply,
    ResetRequest,
    error_body,
)
from edge.wire.transport import tcp_endpoint
from tests.integration.handler_threads import handler_server
from tests.integration.test_sandbox import wait_until

REPO = Path(__file__).resolve().parents[2]
WAIT = 10.0  # generous deadline for requests that must succeed
SHORT = 0.3  # deadline for requests that must time out
AUTH_WAIT = 3.0  # deadline for a hello whose handshake must fail


class FakeSession:
    """Handlers standing in for the edge's session logic; behaviour chosen by the observation."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.sleeping = threading.Event()
        self.lock = threading.Lock()
        self.active: set[str] = set()
        self.overlaps: list[str] = []
        self.seen: dict[str, list[int]] = {}

    def handlers(self) -> dict[str, Callable[[CallContext, Any], Any]]:
        return {
            RequestType.OPEN_SESSION: self.open_session,
            RequestType.DECIDE: self.decide,
        }

    def open_session(self, ctx: CallContext, body: OpenSessionRequest) -> OpenSessionReply:
        space = gymnasium.spaces.Discrete(3)
        return OpenSessionReply(space, space, f"Fake:{body.model_id}:Fake")

    def decide(self, ctx: CallContext, body: DecideRequest) -> Any:
        """A deploy of the action after ``deploy`` in the frames, a policy's step on what
        follows ``step`` (JSON), or else an observation of the frames."""
        if body.frames[:1] == ["deploy"]:
            return self.deploy(body.frames[1])
        if body.frames[:1] == ["step"]:
            return self.policy_step(ctx, json.loads(body.frames[1]))
        return self.make_obs(ctx, body.frames)

    def make_obs(self, ctx: CallContext, frames: list[str]) -> DecideReply:
        with self.lock:
            if ctx.session in self.active:
                self.overlaps.append(ctx.session)
            self.active.add(ctx.session)
        try:
            if frames[:1] == ["block"]:
                self.entered.set()
                self.gate.wait(60)
            if frames[:1] == ["sleep"]:  # ["sleep", seconds]
                self.sleeping.set()
                time.sleep(float(frames[1]))
            if frames[:1] == ["gone"]:
                raise UnknownSession(f"no session {ctx.session!r} on this edge")
            with self.lock:
                self.seen.setdefault(ctx.session, []).extend(len(f) for f in frames[:1])
            return DecideReply(
                observation={"frames": frames, "session": ctx.session},
                action_mask=np.ones(3, dtype=np.int8),
            )
        finally:
            with self.lock:
                self.active.discard(ctx.session)

    def policy_step(self, ctx: CallContext, what: Any) -> Any:
        if what == "raise":
            ctx.output = "about to fail\n"
            raise ValueError("the user's policy is broken")
        if what == "exit":
            sys.exit(3)
        if what == "wrong body":
            return ResetReply()
        if what == "object array":
            return DecideReply(None, stepped=True, action=np.array([object()], dtype=object))
        if what == "huge":
            return DecideReply(None, stepped=True, action=np.zeros(200_000, dtype=np.float64))
        ctx.output = f"step {what}\n"
        return DecideReply(None, stepped=True, action=what)

    def deploy(self, action: Any) -> DecideReply:
        """As the edge's sessions do: what deploy raised travels back as data."""
        try:
            if action == "illegal":
                raise InvalidActionError("move 9 is not legal now")
            if action == "not a number":
                raise ValueError("invalid literal for int()")
            if action == "crash":
                raise KeyError("the user's deploy is broken")
        except Exception as exc:
            error = error_body(exc, DEPLOY_CALL)
            return DecideReply(None, stepped=True, action=action, deploy_error=error)
        return DecideReply(None, stepped=True, action=action, order=f"/choose {action}")


def step(what: Any) -> DecideRequest:
    """A decide request on which the fake steps its policy with ``what``."""
    return DecideRequest(["step", json.dumps(what)])


def deploy(action: Any) -> DecideRequest:
    """A decide request on which the fake's policy chooses ``action`` and deploys it."""
    return DecideRequest(["deploy", action])


@pytest.fixture
def fake() -> Iterator[FakeSession]:
    session = FakeSession()
    yield session
    session.gate.set()  # frees workers still waiting, whatever the test did


@pytest.fixture
def make_server(fake: FakeSession) -> Iterator[Callable[..., EdgeSocketServer]]:
    servers: list[EdgeSocketServer] = []

    def make(**kwargs: Any) -> EdgeSocketServer:
        kwargs.setdefault("side", "blue")
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("port", 0)
        kwargs.setdefault("handlers", fake.handlers())
        server = handler_server(**kwargs)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.close()


@pytest.fixture
def make_client() -> Iterator[Callable[..., EdgeClient]]:
    clients: list[EdgeClient] = []

    def make(address: str, **kwargs: Any) -> EdgeClient:
        client = EdgeClient(address, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def server(make_server: Callable[..., EdgeSocketServer]) -> EdgeSocketServer:
    return make_server(models=["Random", "MaxPower"])


@pytest.fixture
def client(server: EdgeSocketServer, make_client: Callable[..., EdgeClient]) -> EdgeClient:
    return make_client(server.endpoint)


@pytest.fixture
def raw_dealer(server: EdgeSocketServer) -> Iterator[zmq.Socket[bytes]]:
    """A bare DEALER connected to the server, for sending what EdgeClient never would."""
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(server.endpoint)
    yield sock
    sock.close(linger=0)
    context.destroy(linger=0)


def receive(sock: zmq.Socket[bytes], timeout: float = WAIT) -> Message:
    """The next reply on ``sock``, decoded."""
    if not sock.poll(int(timeout * 1000)):
        pytest.fail(f"no message within {timeout} s")
    return CODEC.decode_reply(sock.recv_multipart(), 1 << 23)


def raw_request(msg_type: str, msg_id: str, body: dict[str, Any], **changes: Any) -> list[bytes]:
    """A request's frames written by hand (its body tagged with its type)."""
    envelope = {"v": PROTOCOL_VERSION, "id": msg_id, "session": "s", "type": msg_type}
    envelope.update(changes)
    return [msgpack.packb(envelope), msgpack.packb({"type": msg_type, **body})]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def in_thread(fn: Callable[[], Any]) -> queue.Queue[tuple[str, Any]]:
    """Run ``fn`` in a daemon thread; its result or exception arrives in the returned queue."""
    results: queue.Queue[tuple[str, Any]] = queue.Queue()

    def run() -> None:
        try:
            results.put(("ok", fn()))
        except BaseException as exc:
            results.put(("error", exc))

    threading.Thread(target=run, daemon=True).start()
    return results


def outcome(results: queue.Queue[tuple[str, Any]], timeout: float = 30.0) -> tuple[str, Any]:
    try:
        return results.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"no outcome within {timeout} s")


# -- requests and replies ------------------------------------------------------------------


def test_hello_tells_side_version_and_models(client: EdgeClient, server: EdgeSocketServer):
    hello = client.hello(WAIT)
    assert hello.side == "blue"
    assert hello.protocol_version == PROTOCOL_VERSION
    assert hello.models == ["Random", "MaxPower"]
    assert hello.instance == server.instance
    assert client.ping(WAIT)
    assert client.connected


def test_a_request_gets_its_reply_body_and_the_user_output(client: EdgeClient):
    reply = client.call(step([1, 2]), "s1", WAIT)
    assert reply.body == DecideReply(None, stepped=True, action=[1, 2])
    assert reply.output == "step [1, 2]\n"
    body = client.request(DecideRequest(["|turn|1"]), "s1", WAIT)
    assert body.observation == {"frames": ["|turn|1"], "session": "s1"}
    np.testing.assert_array_equal(body.action_mask, np.ones(3, dtype=np.int8))


def test_a_handler_that_raises_gives_an_error_reply_and_the_server_goes_on(client: EdgeClient):
    with pytest.raises(EdgeRemoteError) as caught:
        client.request(step("raise"), "s", WAIT)
    error = caught.value
    assert error.ename == "ValueError"
    assert error.code == ErrorCode.USER_ERROR
    assert error.evalue == "the user's policy is broken"
    assert "in policy_step" in error.traceback  # the fake's
    assert "_run_job" not in error.traceback  # the trace starts at the handler
    assert error.output == "about to fail\n"
    with pytest.raises(EdgeRemoteError, match="SystemExit"):
        client.request(step("exit"), "s", WAIT)
    assert client.request(step(1), "s", WAIT)


@pytest.mark.parametrize(
    ("observation", "ename"),
    [
        ("wrong body", "ProtocolError"),
        ("object array", "ProtocolError"),
        ("huge", "MessageTooLarge"),
    ],
)
def test_a_reply_that_breaks_the_protocol_becomes_an_error_reply(
    make_server: Callable[..., EdgeSocketServer],
    make_client: Callable[..., EdgeClient],
    observation: str,
    ename: str,
):
    server = make_server(max_message_size=64 * 1024)
    client = make_client(server.endpoint, max_message_size=64 * 1024)
    with pytest.raises(EdgeRemoteError) as caught:
        client.request(step(observation), "s", WAIT)
    assert caught.value.ename == ename
    assert caught.value.code == ErrorCode.PROTOCOL
    assert client.request(step(2), "s", WAIT)


def test_a_request_type_without_handler_is_an_error_reply(client: EdgeClient):
    with pytest.raises(EdgeRemoteError) as caught:
        client.request(ResetRequest(), "s", WAIT)
    assert caught.value.ename == "NotImplementedError"
    assert caught.value.code == ErrorCode.UNSUPPORTED


@pytest.mark.parametrize(
    ("body", "code", "ename"),
    [
        (step("raise"), ErrorCode.USER_ERROR, "ValueError"),
        (step("exit"), ErrorCode.USER_ERROR, "SystemExit"),
        (DecideRequest(["gone"]), ErrorCode.UNKNOWN_SESSION, "UnknownSession"),
        (ResetRequest(), ErrorCode.UNSUPPORTED, "NotImplementedError"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_error_replies_carry_the_code_of_what_went_wrong(
    client: EdgeClient, body: Any, code: ErrorCode, ename: str
):
    with pytest.raises(EdgeRemoteError) as caught:
        client.request(body, "s", WAIT)
    assert (caught.value.code, caught.value.ename) == (code, ename)


def test_a_session_with_too_many_waiting_requests_is_busy(
    make_server: Callable[..., EdgeSocketServer], fake: FakeSession
):
    server = make_server(max_pending_per_session=1)
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.linger = 0
    try:
        sock.connect(server.endpoint)
        sock.send_multipart(raw_request("decide_request", "running", {"frames": ["block"]}))
        assert fake.entered.wait(WAIT)
        # One connection: the edge reads these two in order, the first fills the session's lane.
        sock.send_multipart(raw_request("decide_request", "waiting", {"frames": ["next"]}))
        sock.send_multipart(raw_request("decide_request", "refused", {"frames": ["next"]}))
        refused = receive(sock)
        assert refused.envelope.parent == "refused" and not refused.ok
        assert (refused.body.code, refused.body.ename) == (ErrorCode.BUSY, "EdgeBusy")
        fake.gate.set()
        replies = [receive(sock) for _ in range(2)]
        parents = [(r.envelope.parent, r.ok) for r in replies]
        assert parents == [("running", True), ("waiting", True)]
    finally:
        sock.close(linger=0)
        context.destroy(linger=0)


@pytest.mark.parametrize(
    ("action", "code", "ename"),
    [
        ("illegal", ErrorCode.INVALID_ACTION, "InvalidActionError"),
        ("not a number", ErrorCode.INVALID_ACTION, "ValueError"),
        ("crash", ErrorCode.USER_ERROR, "KeyError"),
    ],
)
def test_what_deploy_raised_comes_back_as_data_with_its_code(
    client: EdgeClient, action: str, code: ErrorCode, ename: str
):
    reply = client.request(deploy(action), "s", WAIT)
    assert reply.order is None and reply.deploy_error is not None
    assert (reply.deploy_error.code, reply.deploy_error.ename) == (code, ename)


class _Seat:
    """A session seat whose frames are given (no view: the username is not checked)."""

    view = None

    def __init__(self, frames: list[str]) -> None:
        self.frames = frames


def test_the_remote_side_matches_error_codes_not_names(client: EdgeClient):
    config = InstanceConfig("blue", "player_0", "gen9randombattle")
    session = EdgeSession(client, "Random", config, "blue-1", timeout=WAIT)
    side = RemoteSide(session)
    assert session.agent_full_name == "Fake:Random:Fake"

    battles: list[_Seat] = []  # alive: the session tells battles apart by their id()

    def decided(action: str) -> Any:
        battles.append(_Seat(["deploy", action]))
        return side.decide(battles[-1], 0.0, {}, False, timeout=WAIT)  # type: ignore[arg-type]

    errors = {a: decided(a).deploy_error for a in ("illegal", "not a number", "crash")}
    assert isinstance(errors["illegal"], InvalidActionError)
    assert "not legal" in str(errors["illegal"])
    assert isinstance(errors["not a number"], InvalidActionError)
    crash = errors["crash"]
    assert isinstance(crash, SideError) and crash.failure and crash.failure.type == "KeyError"
    with pytest.raises(SideError, match="ValueError") as raised:  # only deploy judges actions
        session.call(step("raise"))
    assert raised.value.outcome.status is SideStatus.ERROR
    with pytest.raises(SideError) as raised:  # the edge lost the session: the side's edge is gone
        session.call(DecideRequest(["gone"]))
    assert raised.value.cause == ErrorCode.UNKNOWN_SESSION
    assert raised.value.outcome.status is SideStatus.DISCONNECT
    assert decided("move 1").order == "/choose move 1"


def test_the_client_refuses_to_send_what_breaks_the_protocol(client: EdgeClient):
    with pytest.raises(EdgeProtocolError):
        client.request(DecideRequest(["x" * 9_000_000]), "s", WAIT)
    with pytest.raises(EdgeProtocolError, match="not a request body"):
        client.request(DecideReply(None, order="/choose move 1"), "s", WAIT)
    with pytest.raises(EdgeProtocolError, match="not a request body"):
        client.request({"type": "decide_request", "frames": []}, "s", WAIT)
    with pytest.raises(EdgeProtocolError, match="session"):
        client.request(DecideRequest([]), "", WAIT)


def test_unknown_handler_types_are_refused_at_construction(fake: FakeSession):
    with pytest.raises(ValueError, match="teleport_request"):
        handler_server("blue", "127.0.0.1", 0, {"teleport_request": fake.make_obs})
    with pytest.raises(ValueError, match="hello_request"):
        handler_server("blue", "127.0.0.1", 0, {"hello_request": fake.make_obs})


# -- a server that survives anything -------------------------------------------------------


def test_server_survives_malformed_and_hostile_messages(
    raw_dealer: zmq.Socket[bytes], client: EdgeClient
):
    raw_dealer.send(b"\xc1 not msgpack")  # no id to answer: dropped
    raw_dealer.send_multipart([b"two", b"frames"])  # dropped
    raw_dealer.send(b"\xdd\xff\xff\xff\xff")  # an array claiming 4 billion elements: dropped
    raw_dealer.send_multipart(raw_request("decide_request", "v2", {"frames": []}, v="4.2"))
    raw_dealer.send_multipart(raw_request("teleport_request", "tp", {}))
    raw_dealer.send_multipart(raw_request("decide_request", "bad", {"frames": "not a list"}))
    raw_dealer.send_multipart(raw_request("decide_request", "one", {"frames": []})[:1])
    raw_dealer.send_multipart(raw_request("hello_request", "h", {}, session=""))

    replies = [receive(raw_dealer) for _ in range(5)]
    parents = [r.envelope.parent for r in replies]
    assert parents == ["v2", "tp", "bad", "one", "h"]  # nothing for the first three
    assert replies[0].body.ename == "ProtocolVersionError"
    assert replies[0].body.code == ErrorCode.VERSION
    assert replies[1].body.ename == "NotImplementedError"  # a newer minor's type, say
    assert replies[1].body.code == ErrorCode.UNSUPPORTED
    assert "teleport_request" in replies[1].body.evalue
    assert replies[1].envelope.type == "error_reply"
    assert replies[2].body.ename == "ProtocolError"
    assert replies[2].body.code == ErrorCode.PROTOCOL
    assert (replies[3].body.code, replies[3].body.evalue) == (
        "protocol",
        "a request of 1 frames (expected 2)",
    )
    assert replies[4].ok and replies[4].body.side == "blue"
    assert client.hello(WAIT).side == "blue"


def test_an_oversized_message_is_refused_by_the_socket(
    make_server: Callable[..., EdgeSocketServer], make_client: Callable[..., EdgeClient]
):
    server = make_server(max_message_size=64 * 1024)
    # A client allowing more than the edge: its codec lets the message go, the edge's socket
    # refuses it by dropping the connection, and the in-flight request fails at once.
    client = make_client(server.endpoint, max_message_size=1024 * 1024)
    with pytest.raises(EdgeUnavailable, match="lost"):
        client.request(DecideRequest(["x" * 100_000]), "s", WAIT)
    assert client.hello(WAIT).side == "blue"  # reconnected
    assert client.request(DecideRequest(["ok"]), "s", WAIT)


# -- a client that survives a hostile edge ---------------------------------------------------


@pytest.fixture
def hostile_edge() -> Iterator[zmq.Socket[bytes]]:
    """A bare ROUTER playing the edge, to answer with what EdgeSocketServer never would."""
    context = zmq.Context()
    sock = context.socket(zmq.ROUTER)
    sock.linger = 0
    sock.bind("tcp://127.0.0.1:*")
    yield sock
    sock.close(linger=0)
    context.destroy(linger=0)


def receive_frames(sock: zmq.Socket[bytes], timeout: float = WAIT) -> list[bytes]:
    if not sock.poll(int(timeout * 1000)):
        pytest.fail(f"no message within {timeout} s")
    return sock.recv_multipart()


def reply_to(parent: str, **changes: Any) -> list[bytes]:
    """A reply's frames written by hand (``body`` the body, tagged with the reply's type, or
    ``error_body``; ``usage`` a third frame)."""
    envelope = {
        "v": PROTOCOL_VERSION, "id": "e-1", "parent": parent, "session": "s",
        "type": "reset_reply", "status": "ok",
    }  # fmt: skip
    body = changes.pop("body", {})
    usage = changes.pop("usage", None)
    envelope.update(changes)
    tag = "error_body" if envelope["status"] == "error" else envelope["type"]
    frames = [msgpack.packb(envelope), msgpack.packb({"type": tag, **body})]
    return frames if usage is None else [*frames, msgpack.packb(usage)]


def error(ename: str, code: str = "") -> dict[str, Any]:
    body = {"ename": ename, "evalue": "bad", "traceback": "", "code": code}
    return {"status": "error", "body": body}


@pytest.mark.parametrize(
    ("changes", "raised", "text"),
    [
        ({"v": "6.0"}, EdgeProtocolError, "incompatible protocol"),
        ({"v": "4.2"}, EdgeProtocolError, "incompatible protocol"),
        ({"v": "3.1", "body": {"x": 1}}, EdgeProtocolError, "incompatible protocol"),
        ({"v": "2.1"}, EdgeProtocolError, "incompatible protocol"),
        ({"usage": {"cpu": -1.0, "queued": 0.0}}, EdgeProtocolError, "bad reply"),
        ({"usage": [1, 2, 3]}, EdgeProtocolError, "bad reply"),
        ({"type": "decide_reply", "body": {"observation": "x"}}, EdgeProtocolError, "expected"),
        ({"type": "make_obs_reply", "body": {}}, EdgeProtocolError, "bad reply"),
        ({"body": {"x": {"y": [1] * 3}}, "output": 7}, EdgeProtocolError, "bad reply"),
        (error("KeyError"), EdgeRemoteError, "KeyError"),
        (error("KeyError", "a code from the future"), EdgeRemoteError, "KeyError"),
        (error("ProtocolVersionError", "version"), EdgeProtocolError, "refused"),
        (
            error("ProtocolVersionError"),
            EdgeRemoteError,
            "ProtocolVersionError",
        ),  # codes, not names
        ({}, None, ""),
    ],
)
def test_the_client_survives_bad_replies_from_a_hostile_edge(
    hostile_edge: zmq.Socket[bytes],
    make_client: Callable[..., EdgeClient],
    changes: dict[str, Any],
    raised: type[Exception] | None,
    text: str,
):
    client = make_client(hostile_edge.getsockopt(zmq.LAST_ENDPOINT).decode())
    results = in_thread(lambda: client.request(ResetRequest(), "s", WAIT))
    routing_id, raw, _ = receive_frames(hostile_edge)
    parent = msgpack.unpackb(raw)["id"]
    hostile_edge.send_multipart([routing_id, b"\xc1 garbage"])  # dropped
    # A reply to no request: dropped, its envelope read alone.
    hostile_edge.send_multipart([routing_id, reply_to("nobody")[0], b"\xc1 not read"])
    hostile_edge.send_multipart([routing_id, b"two", b"frames"])  # dropped
    hostile_edge.send_multipart([routing_id, *reply_to(parent, **changes)])
    status, value = outcome(results)
    if raised is None:
        assert status == "ok" and value == ResetReply()
    else:
        assert status == "error" and isinstance(value, raised), value
        assert text in str(value)


def test_a_call_that_credits_waiting_for_a_cpu_sends_it_and_waits_that_much_longer(
    hostile_edge: zmq.Socket[bytes], make_client: Callable[..., EdgeClient]
):
    client = make_client(hostile_edge.getsockopt(zmq.LAST_ENDPOINT).decode())
    results = in_thread(lambda: client.call(ResetRequest(), "s", timeout=1.0, queue_limit=10.0))
    routing_id, raw, _ = receive_frames(hostile_edge)
    request = msgpack.unpackb(raw)
    assert (request["timeout"], request["queue_limit"]) == (1.0, 10.0)
    # Past the call's own timeout, within timeout + queue_limit: the client still waits.
    with pytest.raises(queue.Empty):
        results.get(timeout=3.0)
    usage = {"cpu": 0.25, "queued": 2.5}
    hostile_edge.send_multipart([routing_id, *reply_to(request["id"], usage=usage)])
    status, reply = outcome(results)
    assert status == "ok" and reply.usage == CallUsage(cpu=0.25, queued=2.5)


# -- deadlines, ordering, concurrency ------------------------------------------------------


def test_a_deadline_raises_edge_timeout_and_the_late_reply_is_dropped(
    client: EdgeClient, fake: FakeSession
):
    with pytest.raises(EdgeTimeout):
        client.request(DecideRequest(["block"]), "s1", SHORT)
    fake.gate.set()
    # Same session: runs after the late one, whose reply reaches the client first and is dropped.
    body = client.request(DecideRequest(["next"]), "s1", WAIT)
    assert body.observation["frames"] == ["next"]


def test_a_slow_session_does_not_block_other_sessions_or_hello(
    make_server: Callable[..., EdgeSocketServer],
    make_client: Callable[..., EdgeClient],
    fake: FakeSession,
):
    server = make_server(max_workers=2)
    client = make_client(server.endpoint)
    blocked = in_thread(lambda: client.request(DecideRequest(["block"]), "slow", WAIT * 3))
    assert fake.entered.wait(WAIT)
    body = client.request(DecideRequest(["fast"]), "other", WAIT)
    assert body.observation["session"] == "other"
    assert client.hello(WAIT).side == "blue"
    fake.gate.set()
    status, body = outcome(blocked)
    assert status == "ok" and body.observation["frames"] == ["block"]


def test_hello_is_answered_when_every_worker_is_busy(
    make_server: Callable[..., EdgeSocketServer],
    make_client: Callable[..., EdgeClient],
    fake: FakeSession,
):
    server = make_server(max_workers=1)
    client = make_client(server.endpoint)
    in_thread(lambda: client.request(DecideRequest(["block"]), "a", WAIT))
    assert fake.entered.wait(WAIT)
    assert client.hello(WAIT).side == "blue"


def test_one_shared_client_serves_many_threads_and_sessions(client: EdgeClient, fake: FakeSession):
    def battle(n: int) -> list[str]:
        problems = []
        for i in range(40):
            frame = f"battle {n} call {i}"
            body = client.request(DecideRequest([frame]), f"s{n}", WAIT)
            if body.observation != {"frames": [frame], "session": f"s{n}"}:
                problems.append(f"{frame}: got {body.observation}")
        return problems

    runs = [in_thread(lambda n=n: battle(n)) for n in range(8)]
    for run in runs:
        status, problems = outcome(run, timeout=60)
        assert status == "ok" and problems == []
    assert fake.overlaps == []  # never two requests of one session at once


def test_requests_of_one_session_run_one_at_a_time_in_order(client: EdgeClient, fake: FakeSession):
    sizes = list(range(1, 30))
    pending = [
        in_thread(lambda n=n: client.request(DecideRequest(["x" * n]), "one", WAIT)) for n in sizes
    ]
    for run in pending:
        assert outcome(run)[0] == "ok"
    assert sorted(fake.seen["one"]) == sizes
    assert fake.overlaps == []


def test_a_call_made_while_another_gives_up_gets_its_reply(client: EdgeClient, fake: FakeSession):
    """Two threads' calls in flight at once; the first gives up. The second still gets its reply,
    and the first's late reply is dropped."""
    first = in_thread(lambda: client.request(DecideRequest(["block"]), "a", 1.0))
    assert fake.entered.wait(WAIT)
    second = in_thread(lambda: client.request(DecideRequest(["block"]), "b", WAIT))
    status, error = outcome(first)
    assert status == "error" and isinstance(error, EdgeTimeout), error
    fake.gate.set()  # both replies come now: the first's is dropped, the second's is read
    status, body = outcome(second)
    assert status == "ok" and body.observation == {"frames": ["block"], "session": "b"}
    assert client.request(DecideRequest(["after"]), "c", WAIT).observation["frames"] == ["after"]


def test_a_call_whose_reply_comes_first_leaves_the_other_waiting_for_its_own(
    client: EdgeClient, fake: FakeSession
):
    first = in_thread(lambda: client.request(DecideRequest(["sleep", "0.3"]), "a", WAIT))
    assert fake.sleeping.wait(WAIT)  # the first call is in flight
    second = in_thread(lambda: client.request(DecideRequest(["sleep", "1.0"]), "b", WAIT))
    assert outcome(first)[0] == "ok"
    status, body = outcome(second)
    assert status == "ok" and body.observation["session"] == "b", body


def test_a_waiting_call_that_gives_up_leaves_the_call_using_the_socket_alone(
    client: EdgeClient, fake: FakeSession
):
    first = in_thread(lambda: client.request(DecideRequest(["block"]), "a", WAIT))
    assert fake.entered.wait(WAIT)
    with pytest.raises(EdgeTimeout):
        client.request(DecideRequest(["block"]), "b", SHORT)
    fake.gate.set()
    status, body = outcome(first)
    assert status == "ok" and body.observation == {"frames": ["block"], "session": "a"}
    threads = [
        in_thread(lambda n=n: client.request(DecideRequest([str(n)]), "c", WAIT)) for n in range(4)
    ]
    assert sorted(outcome(t)[1].observation["frames"][0] for t in threads) == ["0", "1", "2", "3"]


def test_a_thread_that_never_called_reads_what_the_client_last_saw(client: EdgeClient):
    """``connected`` asked from a thread with no socket of its own: what another thread's socket
    says (the edge answered), not a connection made just to answer."""
    assert client.hello(WAIT).side == "blue"
    assert outcome(in_thread(lambda: client.connected)) == ("ok", True)


def test_a_second_close_touches_no_file_opened_since(tmp_path: Path):
    """close() then ``with``'s exit: the second close must not write to the close pipe's old file
    descriptor, which a file opened meanwhile may have taken."""
    client = EdgeClient("tcp://127.0.0.1:1")
    client.close()
    paths = [tmp_path / f"victim{i}" for i in range(3)]
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) for p in paths]
    try:
        client.close()
    finally:
        for fd in fds:
            os.close(fd)
    assert [p.read_bytes() for p in paths] == [b"", b"", b""]


def test_two_threads_closing_one_client_at_once_release_it_once(server: EdgeSocketServer):
    errors: list[str] = []
    for _ in range(20):
        client = EdgeClient(server.endpoint)
        start = threading.Barrier(2)

        def close(client: EdgeClient = client, start: threading.Barrier = start) -> None:
            start.wait(WAIT)
            try:
                client.close()
            except BaseException as exc:
                errors.append(repr(exc))

        closers = [threading.Thread(target=close, daemon=True) for _ in range(2)]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join(WAIT)
        assert not any(closer.is_alive() for closer in closers), "a close hung"
    assert errors == []


def test_first_calls_of_new_threads_racing_a_close_fail_as_the_edge_unavailable(
    server: EdgeSocketServer, monkeypatch: pytest.MonkeyPatch
):
    """A thread's first call makes its socket while another thread closes the client: the call
    fails with EdgeUnavailable (a side's DISCONNECT), never with a raw ZeroMQ error that would
    crash a battle thread."""
    from center.isolation import connection

    opened = connection.open_dealer

    def slow_open(*args: Any) -> Any:  # widens the window between the check and the socket
        time.sleep(0.01)
        return opened(*args)

    monkeypatch.setattr(connection, "open_dealer", slow_open)
    outcomes: list[str] = []
    for round_ in range(10):
        client = EdgeClient(server.endpoint)
        go = threading.Event()

        def call(client: EdgeClient = client, go: threading.Event = go) -> None:
            go.wait(WAIT)
            try:
                client.hello(2.0)
                outcomes.append("ok")
            except EdgeCallError as exc:
                outcomes.append(type(exc).__name__)
            except BaseException as exc:
                outcomes.append(repr(exc))

        callers = [threading.Thread(target=call, daemon=True) for _ in range(8)]
        for caller in callers:
            caller.start()
        go.set()
        time.sleep(0.002 * (round_ % 5))  # the close lands before, among or after their checks
        client.close()
        for caller in callers:
            caller.join(WAIT)
    assert set(outcomes) <= {"ok", "EdgeUnavailable"}, sorted(set(outcomes))
    assert "EdgeUnavailable" in outcomes


# -- liveness and reconnection ---------------------------------------------------------------


def test_a_threads_socket_goes_when_the_thread_ends(client: EdgeClient):
    """Each calling thread has a socket of its own to the edge: a thread that ended leaves
    none behind (a runner's threads come and go; their sockets and connections must not pile
    up)."""

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def calls_in_threads(n: int) -> None:
        for _ in range(n):
            run = in_thread(lambda: client.hello(WAIT))
            assert outcome(run)[0] == "ok"

    calls_in_threads(5)  # libzmq's own threads and descriptors are up
    before = open_fds()
    calls_in_threads(40)
    assert wait_until(lambda: open_fds() <= before + 6, WAIT), (before, open_fds())


def test_nobody_listening_is_reported_as_unavailable(make_client: Callable[..., EdgeClient]):
    client = make_client(tcp_endpoint("127.0.0.1", free_port()))
    with pytest.raises(EdgeUnavailable, match="nobody is listening"):
        client.hello(1.0)
    assert not client.ping(0.5)


def test_the_client_works_again_after_the_edge_restarts_on_the_same_port(
    fake: FakeSession, make_client: Callable[..., EdgeClient]
):
    first = handler_server("blue", "127.0.0.1", 0, fake.handlers())
    first.start()
    port = first.port
    client = make_client(first.endpoint)
    try:
        old = client.hello(WAIT).instance
    finally:
        first.close()
    with pytest.raises(EdgeUnavailable):
        client.request(DecideRequest(["down"]), "s", 1.0)
    second = handler_server("blue", "127.0.0.1", port, fake.handlers())
    second.start()
    try:
        assert client.hello(WAIT).instance != old
        body = client.request(DecideRequest(["up"]), "s", WAIT)
        assert body.observation["frames"] == ["up"]
    finally:
        second.close()


def test_an_edge_dying_mid_request_is_unavailable_not_a_timeout(
    fake: FakeSession, make_client: Callable[..., EdgeClient]
):
    server = handler_server("blue", "127.0.0.1", 0, fake.handlers())
    server.start()
    client = make_client(server.endpoint)
    waiting = in_thread(lambda: client.request(DecideRequest(["block"]), "s", 60))
    assert fake.entered.wait(WAIT)
    server.close()
    status, error = outcome(waiting)
    assert status == "error" and isinstance(error, EdgeUnavailable), error
    assert "lost" in str(error)


def test_closing_the_client_fails_waiting_requests(client: EdgeClient, fake: FakeSession):
    waiting = in_thread(lambda: client.request(DecideRequest(["block"]), "s", 60))
    assert fake.entered.wait(WAIT)
    client.close()
    status, error = outcome(waiting)
    assert status == "error" and isinstance(error, EdgeUnavailable)
    with pytest.raises(EdgeUnavailable, match="closed"):
        client.hello(WAIT)


# -- CURVE and the bind policy ---------------------------------------------------------------


@pytest.fixture
def keys() -> dict[str, KeyPair]:
    return {name: generate_keypair() for name in ("edge", "center", "stranger")}


@pytest.fixture
def curve_server(
    make_server: Callable[..., EdgeSocketServer], keys: dict[str, KeyPair]
) -> EdgeSocketServer:
    config = CurveConfig(keys["edge"], frozenset({keys["center"].public}))
    return make_server(curve=config)


def test_curve_with_the_right_keys_connects(
    curve_server: EdgeSocketServer, make_client: Callable[..., EdgeClient], keys: dict[str, KeyPair]
):
    client = make_client(
        curve_server.endpoint, server_public_key=keys["edge"].public, client_keys=keys["center"]
    )
    assert client.hello(WAIT).side == "blue"
    body = client.request(DecideRequest(["secret"]), "s", WAIT)
    assert body.observation["frames"] == ["secret"]


def test_curve_with_a_wrong_server_key_is_refused_clearly(
    curve_server: EdgeSocketServer, make_client: Callable[..., EdgeClient], keys: dict[str, KeyPair]
):
    client = make_client(
        curve_server.endpoint,
        server_public_key=keys["stranger"].public,
        client_keys=keys["center"],
    )
    with pytest.raises(AuthenticationError, match="public key"):
        client.hello(AUTH_WAIT)


def test_curve_with_an_unauthorized_client_is_refused_clearly(
    curve_server: EdgeSocketServer,
    make_client: Callable[..., EdgeClient],
    keys: dict[str, KeyPair],
    caplog: pytest.LogCaptureFixture,
):
    client = make_client(
        curve_server.endpoint, server_public_key=keys["edge"].public, client_keys=keys["stranger"]
    )
    with (
        caplog.at_level(logging.WARNING, logger="edge.service.server.socket_server"),
        pytest.raises(AuthenticationError, match="authorized_clients") as caught,
    ):
        client.hello(AUTH_WAIT)
    assert keys["stranger"].public in str(caught.value)
    # The edge's log names the refused key too, for its organizer.
    assert f"refused CURVE client key {keys['stranger'].public}" in caplog.text


def test_a_plain_client_cannot_talk_to_a_curve_edge(
    curve_server: EdgeSocketServer, make_client: Callable[..., EdgeClient]
):
    client = make_client(curve_server.endpoint)
    with pytest.raises(AuthenticationError, match="CURVE"):
        client.hello(AUTH_WAIT)


def test_a_curve_client_cannot_talk_to_a_plain_edge(
    server: EdgeSocketServer, make_client: Callable[..., EdgeClient], keys: dict[str, KeyPair]
):
    client = make_client(
        server.endpoint, server_public_key=keys["edge"].public, client_keys=keys["center"]
    )
    with pytest.raises(AuthenticationError, match="CURVE"):
        client.hello(AUTH_WAIT)


def test_an_unauthorized_client_gets_in_once_the_edge_authorizes_it(
    fake: FakeSession, make_client: Callable[..., EdgeClient], keys: dict[str, KeyPair]
):
    refusing = handler_server(
        "red", "127.0.0.1", 0, fake.handlers(),
        curve=CurveConfig(keys["edge"], frozenset({keys["center"].public})),
    )  # fmt: skip
    refusing.start()
    port = refusing.port
    client = make_client(
        refusing.endpoint, server_public_key=keys["edge"].public, client_keys=keys["stranger"]
    )
    try:
        with pytest.raises(AuthenticationError):
            client.hello(AUTH_WAIT)
    finally:
        refusing.close()
    fixed = handler_server(
        "red", "127.0.0.1", port, fake.handlers(),
        curve=CurveConfig(keys["edge"], frozenset({keys["stranger"].public})),
    )  # fmt: skip
    fixed.start()
    try:
        assert client.hello(WAIT).side == "red"  # libzmq gave up; the client rebuilt its socket
    finally:
        fixed.close()


def test_a_non_loopback_bind_without_keys_is_refused(fake: FakeSession):
    with pytest.raises(InsecureBindError, match="--insecure"):
        handler_server("blue", "0.0.0.0", 0, fake.handlers())


def test_a_non_loopback_bind_is_allowed_with_insecure_or_with_keys(
    make_server: Callable[..., EdgeSocketServer],
    make_client: Callable[..., EdgeClient],
    keys: dict[str, KeyPair],
):
    open_server = make_server(host="0.0.0.0", insecure=True)
    assert make_client(tcp_endpoint("127.0.0.1", open_server.port)).hello(WAIT).side == "blue"
    curve = CurveConfig(keys["edge"], frozenset({keys["center"].public}))
    assert make_server(host="0.0.0.0", curve=curve).port > 0


def test_localhost_is_loopback(make_server: Callable[..., EdgeSocketServer]):
    assert make_server(host="localhost").endpoint.startswith("tcp://127.0.0.1:")


def test_a_busy_port_is_a_transport_error(server: EdgeSocketServer, fake: FakeSession):
    with pytest.raises(TransportError, match=str(server.port)):
        handler_server("red", "127.0.0.1", server.port, fake.handlers())


def test_curve_config_needs_an_authorized_client(keys: dict[str, KeyPair]):
    with pytest.raises(CurveKeyError):
        CurveConfig(keys["edge"], frozenset())


# -- key files and sep_config.json ---------------------------------------------------------


def test_key_pairs_round_trip_through_files(tmp_path: Path):
    keypair = generate_keypair()
    public_file, secret_file = write_keypair(keypair, tmp_path / "keys", "blue")
    assert load_keypair(secret_file) == keypair
    assert load_public_key(public_file) == keypair.public
    assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
    assert zmq.auth.load_certificate(secret_file) == (
        keypair.public.encode(),
        keypair.secret.encode(),
    )
    assert keypair.secret not in repr(keypair)


def test_existing_key_files_are_not_overwritten(tmp_path: Path):
    first = generate_keypair()
    write_keypair(first, tmp_path, "center")
    with pytest.raises(CurveKeyError, match="already exist"):
        write_keypair(generate_keypair(), tmp_path, "center")
    assert load_keypair(tmp_path / "center.key_secret") == first
    second = generate_keypair()
    write_keypair(second, tmp_path, "center", overwrite=True)
    assert load_keypair(tmp_path / "center.key_secret") == second


def test_bad_key_files_are_curve_key_errors(tmp_path: Path):
    public_file, _ = write_keypair(generate_keypair(), tmp_path, "blue")
    (tmp_path / "junk").write_text("hello")
    for path in (public_file, tmp_path / "missing", tmp_path / "junk"):
        with pytest.raises(CurveKeyError):
            load_keypair(path)
    with pytest.raises(CurveKeyError):
        KeyPair(generate_keypair().public, generate_keypair().secret)


def test_the_minimal_sep_config_means_no_curve():
    config = {
        "blue": {"host": "127.0.0.1", "port": 51000},
        "red": {"host": "127.0.0.1", "port": 51010},
    }
    assert edge_curve_from_config(config, "blue") is None
    assert center_curve_from_config(config, "red") is None


def test_a_generated_sep_config_connects_center_and_edge(
    tmp_path: Path,
    make_server: Callable[..., EdgeSocketServer],
    make_client: Callable[..., EdgeClient],
):
    config: dict[str, Any] = {
        "blue": {"host": "127.0.0.1", "port": 0},
        "red": {"host": "127.0.0.1", "port": 0},
    }
    for name, sections in generate_curve_config(tmp_path / "keys", base_dir=tmp_path).items():
        config.setdefault(name, {}).update(sections)
    assert not Path(config["blue"]["curve"]["secret_key_file"]).is_absolute()
    config = json.loads(json.dumps(config))  # what sep_config.json would hold
    del config["blue"]["curve"]["authorized_clients"]  # defaults to the center's key

    edge_curve = edge_curve_from_config(config, "blue", tmp_path)
    assert edge_curve is not None
    server = make_server(curve=edge_curve)
    center_curve = center_curve_from_config(config, "blue", tmp_path)
    assert center_curve is not None
    server_key, center_keys = center_curve
    client = make_client(server.endpoint, server_public_key=server_key, client_keys=center_keys)
    assert client.hello(WAIT).side == "blue"

    red_curve = center_curve_from_config(config, "red", tmp_path)
    assert red_curve is not None
    red_client = make_client(
        server.endpoint, server_public_key=red_curve[0], client_keys=red_curve[1]
    )
    with pytest.raises(AuthenticationError):
        red_client.hello(AUTH_WAIT)  # the red edge's key is not the blue edge's


def test_a_secret_file_that_does_not_match_the_public_key_is_refused(tmp_path: Path):
    sections = generate_curve_config(tmp_path, base_dir=tmp_path)
    sections["blue"]["curve"]["secret_key_file"] = sections["red"]["curve"]["secret_key_file"]
    with pytest.raises(CurveKeyError, match="public_key"):
        edge_curve_from_config(sections, "blue", tmp_path)
    del sections["center"]
    with pytest.raises(CurveKeyError, match="center"):
        center_curve_from_config(sections, "red", tmp_path)


# -- clean shutdown from a signal --------------------------------------------------------------

EDGE_SCRIPT = textwrap.dedent(
    """
    import sys
    from tests.integration.handler_threads import handler_server
    server = handler_server("red", "127.0.0.1", 0, {})
    print(server.port, flush=True)
    server.serve_forever(handle_signals=True)
    print("stopped", flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_edge_stops_cleanly_on_a_signal(
    signum: signal.Signals, make_client: Callable[..., EdgeClient]
):
    process = subprocess.Popen(
        [sys.executable, "-c", EDGE_SCRIPT],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "the edge did not start"
        port = int(process.stdout.readline())
        assert make_client(tcp_endpoint("127.0.0.1", port)).hello(WAIT).side == "red"
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=30)
        assert process.returncode == 0, stderr
        assert "stopped" in stdout
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)


def test_the_servers_io_thread_drains_its_wake_socket_instead_of_spinning():
    """pyzmq's Poller reports plain sockets by file number: a wake-up must be consumed, or the
    I/O thread polls a forever-readable socket and burns a CPU core while idle."""
    import time as _time

    from center.isolation.edge_client import EdgeClient

    server = handler_server("blue", "127.0.0.1", 0, {})
    server.start()
    client = EdgeClient(server.endpoint)
    try:
        assert client.hello(timeout=10).side == "blue"
        wake = server._wake_r
        deadline = _time.monotonic() + 5.0
        drained = False
        while _time.monotonic() < deadline and not drained:
            try:
                peeked = wake.recv(1, __import__("socket").MSG_PEEK)
            except BlockingIOError:
                drained = True
            else:
                assert peeked  # a byte is waiting: give the I/O thread a moment
                _time.sleep(0.05)
        assert drained, "the server never drained its wake socket"
    finally:
        client.close()
        server.close()
