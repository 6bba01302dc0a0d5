"""The center's EdgeClient when its connection to the edge is lost while calls wait on it with
long deadlines: none of them may wait out its deadline.

A call in flight on the lost connection fails at once with EdgeUnavailable; the call its caller
makes right after, while libzmq is still tearing the lost connection down, is not sent into it
(libzmq reports the disconnection before it detaches the connection's pipe: a message sent in
between is lost and its caller waited its whole deadline) but goes out on the next connection.
The killed-peer test checks the first on a process that really dies (it passed before the fix
too); the dropped-connection test repeats the second until the race shows: before the fix it
failed with EdgeTimeout after 60 s, as test_transport's oversized-message test once did. A
session's call made after the edge went away gives up, unsent, once the address has refused
connections for REFUSED_GRACE_S."""

from __future__ import annotations

import queue
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from center.errors import EdgeUnavailable, SideError
from center.isolation.connection import REFUSED_GRACE_S
from center.isolation.edge_client import EdgeClient
from center.isolation.edge_session import EdgeSession
from edge.contract.outcomes import Seen
from edge.wire.messages import PROTOCOL_VERSION, HelloReply, HelloRequest, InstanceConfig
from edge.wire.transport import tcp_endpoint
from tests.integration.handler_threads import handler_server
from tests.integration.test_sandbox import wait_until

ROOT = Path(__file__).resolve().parents[2]

LONG = 60.0  # the deadline of every call here: none may come near it
PROMPT = 15.0  # what "at once" means on a loaded machine
ROUNDS = 12
CALLERS = 3
OVERSIZED_ROUNDS = 60

# A bare edge: answers every hello at once, except those of session "hang", which it never
# answers; prints the session of each request it gets. msgpack and zmq only: it starts fast.
PEER_SCRIPT = textwrap.dedent(
    """
    import sys
    import msgpack
    import zmq

    endpoint, version = sys.argv[1], sys.argv[2]
    sock = zmq.Context().socket(zmq.ROUTER)
    sock.linger = 0
    sock.bind(endpoint)
    print("ready", flush=True)
    while True:
        ident, head, _ = sock.recv_multipart()  # [envelope, body]
        request = msgpack.unpackb(head)
        session = request.get("session", "")
        print("got", session, flush=True)
        if session == "hang":
            continue
        body = {"type": "hello_reply", "side": "blue", "protocol_version": version,
                "models": [], "instance": "peer"}
        reply = {
            "v": version, "id": "peer-" + request["id"], "parent": request["id"],
            "session": session, "type": "hello_reply", "status": "ok",
        }
        sock.send_multipart([ident, msgpack.packb(reply), msgpack.packb(body)])
    """
)


class Peer:
    """The bare edge in a process of its own, at a fixed endpoint, killed and started again."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", PEER_SCRIPT, self.endpoint, PROTOCOL_VERSION],
            stdout=subprocess.PIPE,
            bufsize=0,  # lines are read after select(): nothing may wait in a Python buffer
        )
        assert self.line() == "ready"

    def line(self, timeout: float = 30.0) -> str:
        assert self.process is not None and self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            pytest.fail(f"the peer said nothing within {timeout} s")
        return self.process.stdout.readline().decode().strip()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)


@pytest.fixture
def peer() -> Iterator[Peer]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    peer = Peer(tcp_endpoint("127.0.0.1", port))
    peer.start()
    yield peer
    peer.kill()


@pytest.fixture
def client(peer: Peer) -> Iterator[EdgeClient]:
    client = EdgeClient(peer.endpoint)
    yield client
    client.close()


def hang_then_retry(client: EdgeClient) -> tuple[BaseException | None, float, object, float]:
    """A call the peer never answers, then, the moment it fails, a hello: their outcomes
    (the first call's error, the hello's reply or error) and how long each took."""
    started = time.monotonic()
    first: BaseException | None = None
    try:
        client.request(HelloRequest("test"), "hang", LONG)
    except Exception as exc:
        first = exc
    first_took = time.monotonic() - started
    started = time.monotonic()
    second: object
    try:
        second = client.request(HelloRequest("test"), "retry", LONG)
    except Exception as exc:
        second = exc
    return first, first_took, second, time.monotonic() - started


def call_into(
    client: EdgeClient, results: queue.Queue[tuple[BaseException | None, float, object, float]]
) -> None:
    results.put(hang_then_retry(client))


@pytest.mark.timeout(240)
def test_calls_on_a_killed_edge_fail_at_once_and_the_next_calls_wait_for_the_new_one(
    peer: Peer, client: EdgeClient
):
    assert client.hello(30).instance == "peer"
    assert peer.line() == "got"
    for round_ in range(ROUNDS):
        results: queue.Queue[tuple[BaseException | None, float, object, float]] = queue.Queue()
        callers = [
            threading.Thread(target=call_into, args=(client, results), daemon=True)
            for _ in range(CALLERS)
        ]
        for caller in callers:
            caller.start()
        for _ in callers:  # every call is in flight: the peer got it
            assert peer.line() == "got hang"
        peer.kill()
        peer.start()
        for _ in callers:
            try:
                first, first_took, second, second_took = results.get(timeout=2 * PROMPT)
            except queue.Empty:
                pytest.fail(f"round {round_}: a call still waits {2 * PROMPT:g} s after the kill")
            assert isinstance(first, EdgeUnavailable), first
            assert "lost" in str(first)
            assert first_took < PROMPT
            assert isinstance(second, HelloReply), f"round {round_}: {second!r}"
            assert second_took < PROMPT
        for _ in callers:
            assert peer.line() == "got retry"


@pytest.mark.timeout(120)
def test_a_session_call_on_an_edge_that_went_away_gives_up_unsent_after_the_grace(
    peer: Peer, client: EdgeClient
):
    # What EdgeSession asks for every call: an edge that is not listening has lost its sessions,
    # so a battle's call made after the loss fails in seconds, not at the end of its deadline
    # (a decision or an open waited 15-35 s, and a league whose edge stayed down that much longer).
    assert client.hello(30).instance == "peer"
    assert peer.line() == "got"
    peer.kill()
    assert wait_until(lambda: client.refused, 30)
    started = time.monotonic()
    with pytest.raises(EdgeUnavailable, match="not sent: nobody is listening"):
        client.call(HelloRequest("test"), "s1", LONG, refused_grace=REFUSED_GRACE_S)
    assert REFUSED_GRACE_S <= time.monotonic() - started < PROMPT
    peer.start()  # back: the client's next call goes out on the new connection
    client.call(HelloRequest("test"), "s2", LONG)
    assert peer.line() == "got s2"


class _Unreachable:
    """A client whose every call fails unsent, recording its keyword arguments."""

    address = "tcp://127.0.0.1:1"

    def __init__(self) -> None:
        self.kwargs: dict[str, object] = {}

    def call(self, body: object, **kwargs: object) -> None:
        self.kwargs = kwargs
        raise EdgeUnavailable("open_session_request not sent: nobody is listening")


def test_every_call_of_a_session_gives_up_after_the_refused_grace():
    client = _Unreachable()
    with pytest.raises(SideError, match="nobody is listening") as raised:
        EdgeSession(client, "m", InstanceConfig("blue", "player_0", "gen9randombattle"), "u")  # type: ignore[arg-type]
    assert raised.value.cause == Seen.LOST
    assert client.kwargs["refused_grace"] == REFUSED_GRACE_S


@pytest.mark.timeout(240)
def test_a_call_made_as_the_edge_drops_the_connection_goes_out_on_the_next_one():
    """The edge drops the connection of a message larger than it accepts; the caller's next call,
    made the moment the first one fails, must not be sent into the connection being torn down.
    Before that was so, about 1 round in 15 lost its call here (it waited out its deadline)."""
    server = handler_server("blue", "127.0.0.1", 0, {}, max_message_size=64 * 1024)
    server.start()
    client = EdgeClient(server.endpoint, max_message_size=1024 * 1024)
    try:
        assert client.hello(30).side == "blue"
        for round_ in range(OVERSIZED_ROUNDS):
            with pytest.raises(EdgeUnavailable, match="lost"):
                client.request(HelloRequest("x" * 100_000), "", LONG)
            started = time.monotonic()
            assert client.hello(LONG).side == "blue"  # a lost call: EdgeTimeout after LONG s
            took = time.monotonic() - started
            assert took < PROMPT, f"round {round_}: the reply took {took:.1f} s"
    finally:
        client.close()
        server.close()


# -- between calls, and calls cut short ---------------------------------------------------------


def run_script(script: str, *args: str) -> str:
    """What ``script`` printed, run in a Python of its own from the repository (it must exit 0
    within 90 s): signals and hangs stay out of the test process."""
    run = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


# The edge refuses for a long while with no call in flight: the connection's monitor reports each
# reconnection (here every millisecond); when nobody read them, libzmq's I/O thread blocked on
# the full monitor queue, and close() waited for it forever.
IDLE_REFUSED_SCRIPT = textwrap.dedent(
    """
    import faulthandler, socket, sys, time
    import center.isolation.connection as connection
    connection.RECONNECT_IVL_MS = connection.RECONNECT_IVL_MAX_MS = 1
    from center.isolation.edge_client import EdgeClient
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = EdgeClient(f"tcp://127.0.0.1:{port}")
    time.sleep(float(sys.argv[1]))
    faulthandler.dump_traceback_later(20, exit=True)
    print("refused", client.refused, flush=True)
    client.close()
    print("closed", flush=True)
    """
)


@pytest.mark.timeout(120)
def test_a_client_left_idle_while_the_edge_refuses_still_closes():
    stdout = run_script(IDLE_REFUSED_SCRIPT, "5")
    assert stdout.split() == ["refused", "True", "closed"], stdout


# A call whose thread is interrupted (Ctrl-C: a KeyboardInterrupt in the main thread) while
# another thread's call is in flight, or alone: the calls of other threads still get their
# replies, and the interrupted thread's next call gets its own (not the interrupted one's).
INTERRUPTED_SCRIPT = textwrap.dedent(
    """
    import os, queue, signal, threading, time
    from center.isolation.edge_client import EdgeClient
    from edge.wire.messages import DecideRequest
    from tests.integration.handler_threads import handler_server
    from tests.integration.test_transport import FakeSession

    # Ctrl-C raises KeyboardInterrupt here even when this process was started with SIGINT
    # ignored (Python then leaves it ignored; a test runner's worker may start it so).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    fake = FakeSession()
    server = handler_server("blue", "127.0.0.1", 0, fake.handlers())
    server.start()
    client = EdgeClient(server.endpoint)
    client.hello(10)
    results = queue.Queue()

    def call(tag, seconds, session):
        try:
            client.request(DecideRequest(["sleep", seconds]), session, 8.0)
            results.put(f"{tag} ok")
        except Exception as exc:
            results.put(f"{tag} {type(exc).__name__}")

    def interrupted_call(session):
        # a call of the main thread, interrupted by SIGINT 0.3 s in
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            client.request(DecideRequest(["sleep", "3.0"]), session, 8.0)
        except KeyboardInterrupt:
            print("interrupted", flush=True)

    # 1. the main thread is interrupted while another thread's call is in flight
    threading.Thread(target=call, args=("A", "1.0", "a"), daemon=True).start()
    assert fake.sleeping.wait(10)
    interrupted_call("main1")
    threading.Thread(target=call, args=("B", "1.5", "b"), daemon=True).start()
    print(*sorted(results.get(timeout=15) for _ in range(2)), flush=True)

    # 2. the main thread is interrupted in a call made alone
    time.sleep(2.0)  # the first interrupted call's reply comes, and is dropped
    interrupted_call("main2")
    threading.Thread(target=call, args=("C", "1.0", "c"), daemon=True).start()
    print(results.get(timeout=15), flush=True)
    # the main thread's next call gets its own reply (the interrupted call's is dropped)
    time.sleep(3.0)
    body = client.request(DecideRequest(["after"]), "main3", 8.0)
    print("main", *body.observation["frames"], flush=True)
    client.close()
    server.close()
    """
)


@pytest.mark.timeout(120)
def test_a_call_interrupted_in_its_thread_leaves_the_other_calls_served():
    lines = run_script(INTERRUPTED_SCRIPT).splitlines()
    assert lines == ["interrupted", "A ok B ok", "interrupted", "C ok", "main after"], lines


def test_what_the_client_says_of_its_connection_is_current_without_a_call():
    server = handler_server("blue", "127.0.0.1", 0, {})
    server.start()
    client = EdgeClient(server.endpoint)
    try:
        assert client.hello(LONG).side == "blue"
        assert client.connected and client.lost_at is None
        server.close()
        # No call is made: the client must still see the loss (it read its monitor only while a
        # call was in flight, and said "connected" long after the edge had gone).
        assert wait_until(lambda: not client.connected, PROMPT)
        assert client.lost_at is not None
    finally:
        client.close()
        server.close()
