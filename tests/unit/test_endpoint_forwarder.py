"""The supervisor's model-endpoint forwarder on real sockets: a listening socket as a worker hands
it over, a real chat-completions server behind it, plain urllib in front (as a module would)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from edge.service.endpoints.forwarder import EndpointForwarder, ModelEndpoint

TOKENS = 10


class _Server:
    def __init__(self) -> None:
        self.seen: list[tuple[float, str, str]] = []  # (monotonic, path, authorization)
        self.headers: list[dict[str, str]] = []
        seen, headers = self.seen, self.headers

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen.append((time.monotonic(), self.path, self.headers.get("Authorization", "")))
                headers.append({name.lower(): value for name, value in self.headers.items()})
                data = json.dumps(
                    {"choices": [{"message": {"content": "1"}}], "usage": {"total_tokens": TOKENS}}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def _door(forwarder: EndpointForwarder, worker: int = 1) -> str:
    """A listening socket handed to the forwarder as a worker hands it; its base URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    assert forwarder.attach(worker, ["LLM"], [os.dup(listener.fileno())]) is None
    listener.close()
    return f"http://127.0.0.1:{port}/v1"


def _ask(base: str, path: str = "/chat/completions", body: bytes = b'{"model": "m"}') -> dict:
    request = urllib.request.Request(
        base + path, data=body, headers={"Authorization": "Bearer module"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.load(reply)


def _refusal(
    base: str, path: str = "/chat/completions", body: bytes = b'{"model": "m"}'
) -> urllib.error.HTTPError:
    with pytest.raises(urllib.error.HTTPError) as caught:
        _ask(base, path, body)
    return caught.value


def test_requests_pass_only_while_the_call_runs_and_carry_the_organizers_key(server):
    forwarder = EndpointForwarder(
        {"LLM": ModelEndpoint("LLM", server.url, (("Authorization", "Bearer org"),))}
    )
    try:
        base = _door(forwarder)
        before = _refusal(base)
        assert before.code == 503 and "only while the side's call runs" in before.reason
        opened = time.monotonic()
        forwarder.open(1, "s1")
        assert _ask(base)["choices"][0]["message"]["content"] == "1"
        assert _ask(base)["usage"]["total_tokens"] == TOKENS
        usage = forwarder.close(1)
        closed = time.monotonic()
        after = _refusal(base)
        assert after.code == 503
        assert (usage.requests, usage.tokens) == (2, 2 * TOKENS)
        assert usage.bytes > 0
        assert len(server.seen) == 2
        assert all(opened <= at <= closed for at, _, _ in server.seen)
        assert {auth for _, _, auth in server.seen} == {"Bearer org"}
        assert forwarder.close(1).requests == 0  # counted once
    finally:
        forwarder.stop()


def test_a_battles_token_limit_refuses_further_requests(server):
    """Each request reserves its bytes plus its max_tokens; the reply's 10 tokens are what it
    keeps: two pass, the third passes in what is left, the fourth would not fit."""
    body = json.dumps({"model": "m", "max_tokens": 5}).encode()
    bound = len(body) + 5
    cap = 2 * TOKENS + bound
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", server.url)}, tokens_per_battle=cap)
    try:
        base = _door(forwarder)
        forwarder.open(1, "battle-a")
        for _ in range(3):
            _ask(base, body=body)
        refused = _refusal(base, body=body)
        assert (
            refused.code == 429 and f"token limit of {cap} has {cap - 30} tokens" in refused.reason
        )
        assert forwarder.close(1).tokens == 30
        forwarder.open(1, "battle-b")  # another battle's session starts at zero
        _ask(base, body=body)
    finally:
        forwarder.stop()
    assert len(server.seen) == 4


def test_only_paths_under_the_endpoints_base_are_forwarded(server):
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", server.url)})
    try:
        base = _door(forwarder)
        forwarder.open(1, "s")
        origin = base.removesuffix("/v1")
        refused = _refusal(origin, "/admin")
        assert refused.code == 404 and "only paths under /v1" in refused.reason
        for path in ("/v10/chat", "/v1/../admin", "/v1/%2e%2e/admin", "/v1%2f..%2fadmin"):
            assert _refusal(origin, path).code == 404, path
        # A server may read a ';' parameter off a segment, or decode twice: neither is forwarded.
        for path in ("/v1/..;/secret", "/v1/chat;x/completions", "/v1/chat%3Bx/completions"):
            refused = _refusal(origin, path)
            assert refused.code == 400 and "with ';' in a segment" in refused.reason, path
        for path in ("/v1/%252e%252e/secret", "/v1/chat/%2563ompletions"):
            refused = _refusal(origin, path)
            assert refused.code == 400 and "escaped '%' (%25)" in refused.reason, path
        assert _ask(origin, "/v1/chat/completions?a=%25;b")["usage"]  # a query is the server's
        assert forwarder.close(1).requests == 1
    finally:
        forwarder.stop()
    assert [path for _, path, _ in server.seen] == ["/v1/chat/completions?a=%25;b"]


def _raw(base: str, request: bytes) -> bytes:
    """Send ``request`` as bytes to the worker's door; the whole reply."""
    parts = urllib.parse.urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
        conn.sendall(request)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    return reply


def test_requests_that_would_reach_another_url_are_not_forwarded_as_sent(server):
    """Absolute URIs, CONNECT, a chunked body beside a length (smuggling), a second request
    after the first, the worker's Host and an upgrade: none reaches the server as the worker
    meant it."""
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", server.url)})
    try:
        base = _door(forwarder)
        forwarder.open(1, "s")
        for line in (b"POST http://10.0.0.9/v1/chat HTTP/1.1", b"CONNECT 10.0.0.9:443 HTTP/1.1"):
            assert _raw(base, line + b"\r\nContent-Length: 0\r\n\r\n").startswith(b"HTTP/1.1 404")
        smuggled = (
            b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        assert _raw(base, smuggled).startswith(b"HTTP/1.1 411")
        body = b'{"model": "m"}'
        twice = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 10.0.0.9\r\nConnection: Upgrade\r\n"
            b"Upgrade: websocket\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        twice += b"POST /v1/admin HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
        assert _raw(base, twice).startswith(b"HTTP/1.1 200")
    finally:
        forwarder.stop()
    assert [path for _, path, _ in server.seen] == ["/v1/chat/completions"]
    (sent,) = server.headers
    assert sent["host"] == urllib.parse.urlsplit(server.url).netloc
    assert "upgrade" not in sent and sent.get("connection", "close") != "Upgrade"


def test_an_endpoint_that_is_down_is_the_sides_problem_and_its_error_says_so():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", f"http://127.0.0.1:{port}/v1")})
    try:
        base = _door(forwarder)
        forwarder.open(1, "s")
        refused = _refusal(base)
        assert refused.code == 502
        assert "could not be reached" in refused.reason and "side's own" in refused.reason
    finally:
        forwarder.stop()


def test_a_gone_workers_socket_is_closed(server):
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", server.url)})
    try:
        base = _door(forwarder)
        forwarder.open(1, "s")
        forwarder.detach(1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the accepting thread closes it
            try:
                _ask(base)
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, ConnectionRefusedError):
                    break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            pytest.fail("the gone worker's endpoint socket still accepts")
    finally:
        forwarder.stop()
    assert server.seen == []


def test_a_socket_that_is_not_listening_is_refused():
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", "http://127.0.0.1:9/v1")})
    try:
        with socket.socket() as plain:
            problem = forwarder.attach(1, ["LLM"], [os.dup(plain.fileno())])
        assert problem is not None and "not a listening TCP socket" in problem
    finally:
        forwarder.stop()
