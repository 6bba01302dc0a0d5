"""The model endpoints' token cap on real sockets: a fake model server that counts every token it
serves (``tests/counting_model.py``), the forwarder in front, and plain ``urllib`` clients
streaming at once from threads, as a module's code would."""

from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.service.endpoints.budget import DEFAULT_MAX_TOKENS, prepare
from edge.service.endpoints.forwarder import EndpointForwarder, ModelEndpoint
from edge.service.endpoints.http_parts import BadRequest
from tests.counting_model import CountingServer


@pytest.fixture
def server() -> Iterator[CountingServer]:
    s = CountingServer()
    yield s
    s.stop()


def _door(forwarder: EndpointForwarder) -> str:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    assert forwarder.attach(1, ["LLM"], [os.dup(listener.fileno())]) is None
    listener.close()
    return f"http://127.0.0.1:{port}/v1"


def _stream(base: str, body: dict) -> str:
    """Stream a chat completion as a module would (every chunk's first choice); its text."""
    body = {"model": "m", "messages": [{"role": "user", "content": "pick"}], **body, "stream": True}
    request = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode())
    text = ""
    with urllib.request.urlopen(request, timeout=30) as reply:
        for line in reply:
            if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                text += json.loads(line[6:])["choices"][0]["delta"]["content"]
    return text


def test_eight_streams_at_once_stay_within_the_cap_as_the_server_counts(server):
    """Eight threads stream at once, round after round, half with no max_tokens and none asking
    for the stream's usage: the server serves no more than the cap, the forwarder counts what it
    served, and no module sees a usage chunk it did not ask for."""
    cap = 1500
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", server.url)}, tokens_per_battle=cap)
    refused: list[int] = []
    failed: list[BaseException] = []
    try:
        base = _door(forwarder)
        forwarder.open(1, "battle")
        start = threading.Barrier(8)

        def module(i: int) -> None:
            try:
                for _ in range(4):
                    start.wait(timeout=30)
                    try:
                        _stream(base, {"max_tokens": 150} if i % 2 else {})
                    except urllib.error.HTTPError as exc:
                        refused.append(exc.code)
            except BaseException as exc:  # a usage chunk without choices, a hang: the test's
                failed.append(exc)
                start.abort()

        threads = [threading.Thread(target=module, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads)
        assert not failed, failed
        usage = forwarder.close(1)
    finally:
        forwarder.stop()
    assert refused and set(refused) == {429}
    assert 0 < server.served <= cap
    assert usage.tokens == server.served  # every stream reported its usage, to the forwarder
    streamed = [b for b in server.bodies if b.get("stream")]
    assert all(b["stream_options"] == {"include_usage": True} for b in streamed)
    assert {b["max_tokens"] for b in streamed} <= {150, DEFAULT_MAX_TOKENS}


def test_a_stream_that_asks_for_its_usage_gets_it_and_is_counted_without_a_cap(server):
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", server.url)})
    try:
        base = _door(forwarder)
        forwarder.open(1, "s")
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        request = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode())
        with urllib.request.urlopen(request, timeout=30) as reply:
            chunks = [json.loads(line[6:]) for line in reply if line.startswith(b"data: {")]
        assert chunks[-1] == {"choices": [], "usage": {"total_tokens": 6 + 3}}
        assert _stream(base, {"max_tokens": 2}) == "a a "  # not asked: not seen, still counted
        assert forwarder.close(1).tokens == 9 + 10
    finally:
        forwarder.stop()
    assert server.bodies[1]["stream_options"] == {"include_usage": True}


def _post(base: str, body: bytes, path: str = "/chat/completions") -> urllib.error.HTTPError:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(base + path, data=body), timeout=30)
    return caught.value


def test_a_request_that_could_pass_the_cap_is_refused_and_one_that_fails_costs_nothing(server):
    cap = 400
    forwarder = EndpointForwarder({"LLM": ModelEndpoint("LLM", server.url)}, tokens_per_battle=cap)
    messages = [{"role": "user", "content": "x"}]
    try:
        base = _door(forwarder)
        forwarder.open(1, "battle")
        unbounded = json.dumps({"model": "m", "messages": messages}).encode()
        refused = _post(base, unbounded)  # sent with max_tokens 1024: more than the cap
        assert refused.code == 429
        detail = json.load(refused)["error"]
        assert detail["code"] == "token_limit"
        assert f"token limit of {cap} has {cap} tokens left" in detail["message"]
        sent = json.dumps({"model": "m", "messages": messages, "max_tokens": DEFAULT_MAX_TOKENS})
        assert f"may cost {len(sent) + DEFAULT_MAX_TOKENS} " in detail["message"]
        for _ in range(8):  # 8 times its bytes pass the cap, but a 404 generated nothing: released
            assert _post(base, unbounded, "/embeddings").code == 404
        # Two keys of one name: the server is sent the value the edge read, and only it.
        doubled = b'{"model": "m", "messages": [{"role": "user", "content": "x"}], '
        assert _post(base, doubled + b'"max_tokens": 5, "max_tokens": 5000}').code == 429
        with urllib.request.urlopen(
            urllib.request.Request(
                base + "/chat/completions", data=doubled + b'"max_tokens": 5000, "max_tokens": 5}'
            ),
            timeout=30,
        ) as reply:
            assert json.load(reply)["usage"]["total_tokens"] == 5 + 5
        for value in ('"100"', "-1", "0", "true", "1.5"):
            body = doubled + b'"max_tokens": ' + value.encode() + b"}"
            assert _post(base, body).code == 400, value
        assert forwarder.close(1).requests == 8 + 1
    finally:
        forwarder.stop()
    assert server.served == 5 + 5
    assert [b.get("max_tokens") for b in server.bodies if "messages" in b] == [None] * 8 + [5]


@pytest.mark.parametrize(
    ("body", "bound"),
    [
        ({"max_tokens": 10}, 10),
        ({"max_completion_tokens": 30, "max_tokens": 10}, 30),
        ({"max_tokens": 10, "n": 3}, 30),
        ({"max_tokens": 10, "n_predict": 99}, 99),  # llama.cpp's name wins there
        ({}, DEFAULT_MAX_TOKENS),
    ],
)
def test_a_chat_requests_bound_is_its_bytes_plus_its_output_limit_times_its_choices(body, bound):
    prepared = prepare("/v1/chat/completions", json.dumps(body).encode(), capped=True)
    assert prepared.bound == len(prepared.body) + bound
    assert json.loads(prepared.body).get("max_tokens") == body.get("max_tokens", bound)


def test_a_batch_of_prompts_has_each_prompts_choices_and_an_escaped_path_is_read_decoded():
    body = json.dumps({"prompt": ["a", "b"], "max_tokens": 10, "best_of": 3, "n": 2}).encode()
    assert prepare("/v1/completions", body, capped=True).bound == len(body) + 2 * 3 * 10
    tokens = json.dumps({"prompt": [1, 2, 3], "max_tokens": 10}).encode()
    assert prepare("/v1/completions", tokens, capped=True).bound == len(tokens) + 10
    unbounded = json.dumps({"messages": []}).encode()
    escaped = prepare("/v1/chat/complet%69ons/", unbounded, capped=True)
    assert json.loads(escaped.body)["max_tokens"] == DEFAULT_MAX_TOKENS
    assert prepare("/v1/embeddings", unbounded, capped=True).body == unbounded


def test_without_a_cap_only_a_stream_is_changed():
    plain = json.dumps({"messages": []}).encode()
    assert prepare("/v1/chat/completions", plain, capped=False).body == plain
    streamed = prepare("/v1/chat/completions", b'{"stream": true}', capped=False)
    assert json.loads(streamed.body)["stream_options"] == {"include_usage": True}
    assert streamed.strip_usage
    asked = b'{"stream": true, "stream_options": {"include_usage": true}}'
    assert not prepare("/v1/completions", asked, capped=False).strip_usage
    with pytest.raises(BadRequest, match='"stream" must be true or false'):
        prepare("/v1/chat/completions", b'{"stream": "yes"}', capped=False)
    with pytest.raises(BadRequest, match="must be a JSON object"):
        prepare("/v1/chat/completions", b"[1]", capped=True)


@pytest.mark.parametrize("doc", ["docs/contract.md", "docs/sandbox.md", "edge/cli.py"])
def test_the_docs_give_the_default_output_limit(doc):
    text = (Path(__file__).resolve().parents[2] / doc).read_text(encoding="utf-8")
    assert f"max_tokens: {DEFAULT_MAX_TOKENS}" in text or f"({DEFAULT_MAX_TOKENS} when" in text
