"""Model endpoints, piece by piece: the tokens a reply reports, the candidates' ``endpoints``, the
``sep_edge --endpoint`` options, and ``usage.endpoint`` on the wire."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgpack
import pytest

from edge.contract.candidates import load_candidates
from edge.errors import CandidatesError, ProtocolError
from edge.service.endpoints.http_parts import MAX_LINE, UsageScanner
from edge.service.endpoints.options import parse_endpoints
from edge.wire.envelopes import CODEC, Envelope
from edge.wire.messages import PROTOCOL_VERSION, CallUsage, CloseSessionReply


def test_a_json_reply_reports_its_total_tokens():
    scanner = UsageScanner("application/json")
    text = json.dumps({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}})
    for i in range(0, len(text), 7):  # as it arrives, in pieces, relayed as it is
        assert scanner.feed(text[i : i + 7].encode()) == text[i : i + 7].encode()
    assert scanner.end() == b""
    assert scanner.tokens() == 7


EVENTS = (
    b'data: {"choices": [{"delta": {"content": "a"}}], "usage": null}\n\n'
    b'data: {"choices": [], "usage": {"total_tokens": 42}}\n\n'
    b"data: [DONE]"
)


@pytest.mark.parametrize("strip", [False, True])
def test_a_streamed_reply_reports_the_usage_of_its_last_chunk(strip):
    """Relayed in whole lines; the usage chunk only when the worker asked for it itself."""
    scanner = UsageScanner("text/event-stream; charset=utf-8", strip_usage=strip)
    relayed = b"".join(scanner.feed(EVENTS[i : i + 5]) for i in range(0, len(EVENTS), 5))
    relayed += scanner.end()
    assert scanner.tokens() == 42
    usage_chunk = b'data: {"choices": [], "usage": {"total_tokens": 42}}\n'
    assert relayed == (EVENTS.replace(usage_chunk, b"") if strip else EVENTS)


def test_a_responses_stream_reports_its_response_usage_and_a_long_line_is_relayed_unread():
    scanner = UsageScanner("text/event-stream", strip_usage=True)
    done = {
        "type": "response.completed",
        "response": {"usage": {"input_tokens": 4, "output_tokens": 3}},
    }
    line = b"data: " + json.dumps(done).encode() + b"\n\n"
    long = b'data: {"usage": {"total_tokens": 9}, "pad": "' + b"x" * (MAX_LINE + 10) + b'"}\n'
    relayed = (
        scanner.feed(line) + scanner.feed(long[: MAX_LINE + 1]) + scanner.feed(long[MAX_LINE + 1 :])
    )
    assert relayed == line + long and scanner.end() == b""
    assert scanner.tokens() == 7


def test_a_reply_without_usage_reports_no_tokens():
    scanner = UsageScanner("application/json")
    scanner.feed(b'{"usage": "lots"}')
    assert scanner.tokens() is None
    assert UsageScanner("text/event-stream").tokens() is None


def _candidates(tmp_path: Path, entry: dict) -> Path:
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps({"M": {"userModuleID": "m", **entry}}))
    return path


def test_a_candidate_lists_its_endpoints_by_name(tmp_path):
    models = load_candidates(_candidates(tmp_path, {"endpoints": ["llm", "Judge"]}))
    assert models["M"].endpoints == ("JUDGE", "LLM")
    assert load_candidates(_candidates(tmp_path, {}))["M"].endpoints == ()


@pytest.mark.parametrize("value", ["LLM", ["a-b"], [3], ["9x"]])
def test_endpoints_that_are_not_a_list_of_names_are_one_clear_error(tmp_path, value):
    with pytest.raises(CandidatesError, match='"endpoints" must be a list of endpoint names'):
        load_candidates(_candidates(tmp_path, {"endpoints": value}))


def test_endpoint_options_give_each_endpoint_its_url_and_headers(monkeypatch):
    monkeypatch.setenv("SEP_ENDPOINT_JUDGE_API_KEY", "from-env")
    endpoints = parse_endpoints(
        ["llm=http://10.0.0.5:8000/v1/", "JUDGE=https://judge.example/api"],
        ["LLM=Authorization: Bearer k", "LLM=X-Team:red"],
    )
    assert endpoints["LLM"].path == "/v1"
    assert endpoints["LLM"].origin == "http://10.0.0.5:8000"
    assert endpoints["LLM"].headers == (("Authorization", "Bearer k"), ("X-Team", "red"))
    assert endpoints["JUDGE"].headers == (("Authorization", "Bearer from-env"),)
    assert "k" not in repr(endpoints["LLM"])  # an API key never lands in a log by repr
    assert "SEP_ENDPOINT_JUDGE_API_KEY" not in os.environ  # no worker inherits it


@pytest.mark.parametrize(
    ("specs", "headers", "message"),
    [
        (["LLM"], [], "give NAME=URL"),
        (["LLM=ftp://x/v1"], [], "http:// or https://"),
        (["LLM=http://u:p@x/v1"], [], "no query, fragment or credentials"),
        (["LLM=http://x/v1", "llm=http://y/v1"], [], "given twice"),
        (["LLM=http://x/v1"], ["OTHER=A:b"], "no --endpoint OTHER=URL"),
        (["LLM=http://x/v1"], ["LLM=nocolon"], "NAME=HEADER:VALUE"),
    ],
)
def test_endpoint_option_mistakes_are_one_clear_line(specs, headers, message):
    with pytest.raises(ValueError, match=message):
        parse_endpoints(specs, headers)


def _reply() -> list[bytes]:
    request = Envelope(v=PROTOCOL_VERSION, id="q1", session="s", type="close_session_request")
    return CODEC.reply("r1", request, CloseSessionReply(), max_size=1 << 20)


def test_usage_carries_the_endpoint_counts_of_a_call():
    frames = [*_reply(), CODEC.usage_frame(CallUsage(0.5, 0.0, 3, 2048, 30))]
    assert CODEC.decode_reply(frames, 1 << 20).usage == CallUsage(0.5, 0.0, 3, 2048, 30)
    plain = CODEC.usage_frame(CallUsage(0.5, 0.0))
    assert b"endpoint" not in plain  # a call that asked nothing says nothing
    assert CODEC.decode_reply([*_reply(), plain], 1 << 20).usage == CallUsage(0.5, 0.0)


def test_a_malformed_endpoint_usage_is_a_protocol_error():
    usage = msgpack.packb({"cpu": 0.1, "queued": 0.0, "endpoint_requests": -1})
    with pytest.raises(ProtocolError, match=r"endpoint_requests"):
        CODEC.decode_reply([*_reply(), usage], 1 << 20)
