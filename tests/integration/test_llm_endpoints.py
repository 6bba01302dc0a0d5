"""LLM agents and model endpoints: real ``sep_edge`` processes granted a model endpoint
(``--endpoint LLM=URL``) that is a small real HTTP server of this test speaking the
chat-completions shape, ``sep_main`` as an organizer runs it, modules of ``tests/outside_agents``
written from docs/contract.md alone.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.counting_model import CountingServer
from tests.integration.edges import SEP_EDGE, EdgeProcess, write_config

AGENTS = Path(__file__).resolve().parents[1] / "outside_agents" / "candidates_llm.json"
SEP_MAIN = [sys.executable, "-c", "from center.commands.run import sep_main; sep_main()"]
PLAIN = "answer: 1"
TOKENS = 10  # what a plain reply's usage says
STREAM_TOKENS = 12  # what a streamed reply's last chunk says

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the sandbox's kernel mechanisms are Linux's"
)


@dataclass
class ModelServer:
    """A chat-completions server on 127.0.0.1 that records every request it gets."""

    server: ThreadingHTTPServer
    requests: list[dict] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def _handler(record: list[dict]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                asked = json.loads(body)
            except ValueError:
                asked = {}
            record.append(
                {
                    "at": time.monotonic(),
                    "path": self.path,
                    "authorization": self.headers.get("Authorization", ""),
                    "body": body.decode("utf-8", "replace"),
                }
            )
            if not self.path.startswith("/v1/chat/completions"):
                self.send_error(404)
                return
            if asked.get("stream"):
                self._stream()
                return
            reply = {
                "id": "c1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": PLAIN}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": TOKENS},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            chunks = [
                {"choices": [{"index": 0, "delta": {"content": "answer: "}}]},
                {"choices": [{"index": 0, "delta": {"content": "2"}}]},
                {
                    "choices": [],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
                },
            ]
            for chunk in chunks:
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    record: list[dict] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(record))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ModelServer(server, record)
    finally:
        server.shutdown()
        server.server_close()


def start_edges(
    tmp_path: Path, server: ModelServer | CountingServer, *extra: str
) -> dict[str, EdgeProcess]:
    """Blue adds the organizer's key by --endpoint-header, red from its environment."""
    config = write_config(tmp_path / "sep_config.json")
    env = {"LLM_TEST_SERVER": server.url}
    common = ["--endpoint", f"LLM={server.url}", *extra]
    blue = EdgeProcess(
        "blue",
        config,
        AGENTS,
        tmp_path / "blue.log",
        extra=[*common, "--endpoint-header", "LLM=Authorization:Bearer organizer-key-blue"],
        env=env,
    )
    red = EdgeProcess(
        "red",
        config,
        AGENTS,
        tmp_path / "red.log",
        extra=common,
        env={**env, "SEP_ENDPOINT_LLM_API_KEY": "organizer-key-red"},
    )
    return {"blue": blue, "red": red}


@pytest.fixture
def edges_for(tmp_path: Path, request: pytest.FixtureRequest):
    started: list[EdgeProcess] = []

    def start(server: ModelServer | CountingServer, *extra: str) -> dict[str, EdgeProcess]:
        edges = start_edges(tmp_path, server, *extra)
        for process in edges.values():
            started.append(process)
            process.start()
        return edges

    yield start
    for process in started:
        process.stop()


def play(edges: dict[str, EdgeProcess], log_dir: Path, *args: str) -> list[dict[str, str]]:
    blue = edges["blue"]
    run = subprocess.run(
        [
            *SEP_MAIN,
            *args,
            "-l",
            str(log_dir),
            "--config",
            str(blue.config),
            "--candidates",
            str(blue.candidates),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (log_dir / "sep_main.stdout").write_text(run.stdout)  # for a test that reads the summary
    with (log_dir / "battles.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_an_llm_agent_plays_through_its_endpoint_and_its_tokens_land_in_battles_csv(
    model_server, edges_for, tmp_path
):
    """Both sides ask the model server at each decision (blue plainly, red streamed): every
    request carries the organizer's key, which neither module could see; battles.csv counts
    exactly the requests the server got, and the tokens its replies reported."""
    edges = edges_for(model_server)
    rows = play(edges, tmp_path / "run", "llm_chat", "llm_stream", "-n", "1", "--seed", "5")
    assert len(rows) == 1
    row = rows[0]
    assert row["blue_status"] == "OK" and row["red_status"] == "OK", row
    requests = model_server.requests
    blue = [r for r in requests if r["authorization"] == "Bearer organizer-key-blue"]
    red = [r for r in requests if r["authorization"] == "Bearer organizer-key-red"]
    assert len(blue) + len(red) == len(requests), {r["authorization"] for r in requests}
    assert len(blue) >= 3 and len(red) >= 3, (len(blue), len(red))
    assert int(row["blue_endpoint_requests"]) == len(blue), row
    assert int(row["red_endpoint_requests"]) == len(red), row
    assert int(row["blue_endpoint_tokens"]) == TOKENS * len(blue), row
    assert int(row["red_endpoint_tokens"]) == STREAM_TOKENS * len(red), row
    assert int(row["blue_endpoint_bytes"]) > sum(len(r["body"]) for r in blue), row
    summary = (tmp_path / "run" / "sep_main.stdout").read_text()  # the same, per candidate
    for model, asked, tokens in (("llm_chat", blue, TOKENS), ("llm_stream", red, STREAM_TOKENS)):
        assert (
            f"model endpoints of {model}: {len(asked):,} requests, {tokens * len(asked):,} "
            "tokens in 1 battle "
        ) in summary, summary
    log = edges["blue"].log.read_text()
    assert f"model endpoint LLM: {model_server.url} (Authorization; no token limit)" in log
    assert "organizer-key" not in log
    environments = [r["body"] for r in requests if "ENVIRONMENT" in r["body"]]
    assert len(environments) == 2  # each module told what it could see
    for seen in environments:
        assert "SEP_ENDPOINT_LLM" in seen  # the base URL is there ...
        assert "organizer-key" not in seen  # ... the organizer's key is not


def test_a_module_not_granted_the_endpoint_reaches_neither_it_nor_the_server(
    model_server, edges_for, tmp_path
):
    """``llm_unlisted`` has no endpoint: no SEP_ENDPOINT_LLM, and the server's own address is out
    of reach (its network namespace has none); ``llm_chat``, granted it, cannot go around the
    edge to the server's address either. Each would raise (an ERROR) if it could."""
    edges = edges_for(model_server)
    rows = play(edges, tmp_path / "run", "llm_unlisted", "llm_chat", "-n", "1", "--seed", "6")
    assert rows[0]["blue_status"] == "OK", rows[0]
    assert rows[0]["red_status"] == "OK", rows[0]
    assert rows[0]["blue_endpoint_requests"] == "0"
    assert all(r["authorization"] == "Bearer organizer-key-red" for r in model_server.requests)
    assert int(rows[0]["red_endpoint_requests"]) == len(model_server.requests)


def test_past_its_token_limit_a_side_is_refused_with_a_clear_error(
    model_server, edges_for, tmp_path
):
    """``--endpoint-tokens 140``: each of ``llm_capped``'s requests reserves its body's bytes (about
    100) plus its max_tokens (5) against what its earlier ones cost (10 each): a few pass, then
    one would not fit and is refused; the module's urllib raises, and battles.csv says why."""
    cap = 140
    edges = edges_for(model_server, "--endpoint-tokens", str(cap))
    rows = play(edges, tmp_path / "run", "llm_capped", "llm_unlisted", "-n", "1", "--seed", "7")
    row = rows[0]
    assert row["blue_status"] == "ERROR", row
    assert f"token limit of {cap} has" in row["blue_error"], row["blue_error"]
    served = model_server.requests
    assert len(served) >= 2 and int(row["blue_endpoint_requests"]) == len(served), row
    assert int(row["blue_endpoint_tokens"]) == TOKENS * len(served), row
    for before, request in enumerate(served):  # each fitted in what the ones before left
        assert TOKENS * before + len(request["body"].encode()) + 5 <= cap


def test_eight_streams_at_once_stay_within_the_cap_as_the_model_server_counts(edges_for, tmp_path):
    """``llm_swarm`` streams eight requests at once at each decision, half without max_tokens,
    none asking for usage, against a server that counts every token it serves: the side's
    battle is served no more than ``--endpoint-tokens``, battles.csv counts what was served, and
    the module never sees the usage chunk it did not ask for (its code would raise on it)."""
    cap = 3000
    counting = CountingServer()
    try:
        edges = edges_for(counting, "--endpoint-tokens", str(cap))
        rows = play(edges, tmp_path / "run", "llm_swarm", "llm_unlisted", "-n", "1", "--seed", "8")
    finally:
        counting.stop()
    row = rows[0]
    assert row["blue_status"] == "OK", row
    assert 0 < counting.served <= cap, counting.served
    assert int(row["blue_endpoint_tokens"]) == counting.served, row
    assert int(row["blue_endpoint_requests"]) == len(counting.bodies), row
    assert all(b["stream_options"] == {"include_usage": True} for b in counting.bodies)


def test_a_candidate_granted_an_endpoint_the_edge_lacks_is_one_clear_line(tmp_path):
    config = write_config(tmp_path / "sep_config.json")
    run = subprocess.run(
        [*SEP_EDGE, "blue", "--config", str(config), "--candidates", str(AGENTS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert lines == [
        "error: model 'llm_chat' is granted the model endpoint LLM in its candidates file, "
        "which this edge does not have: give sep_edge --endpoint LLM=URL"
    ], run.stderr


def test_without_a_network_namespace_the_edge_warns_that_endpoints_can_be_bypassed(
    model_server, tmp_path
):
    """``--allow-network``: endpoints still work, metered, but the start-up line says that a
    module can reach the URL directly."""
    config = write_config(tmp_path / "sep_config.json")
    edge = EdgeProcess(
        "blue",
        config,
        AGENTS,
        tmp_path / "blue.log",
        extra=["--endpoint", f"LLM={model_server.url}", "--allow-network"],
    )
    try:
        edge.start()
    finally:
        edge.stop()
    line = next(line for line in edge.log.read_text().splitlines() if "model endpoint LLM" in line)
    assert "WARNING: workers have the host's network" in line
    assert "reach the endpoint's URL directly, unmetered" in line


def test_the_checker_checks_an_llm_agent_against_the_endpoint_it_is_given(model_server, tmp_path):
    """``sep_edge --check MODEL --endpoint LLM=URL --battles 1``: the recorded checks reach the
    URL through the checker's edge, the real battle through edges granted it, both with the
    organizer's header."""
    run = subprocess.run(
        [
            *SEP_EDGE,
            "--check",
            "llm_chat",
            "--candidates",
            str(AGENTS),
            "--endpoint",
            f"LLM={model_server.url}",
            "--endpoint-header",
            "LLM=Authorization:Bearer organizer-key",
            "--battles",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    # The report says what the real battle asked: each reply reported TOKENS tokens.
    asked = re.search(r"model endpoints: (\d+) requests, ([\d,]+) tokens in 1 battle ", run.stdout)
    assert asked is not None, run.stdout[-3000:]
    requests, tokens = int(asked[1]), int(asked[2].replace(",", ""))
    assert 0 < requests < len(model_server.requests) and tokens == TOKENS * requests
    keys = {r["authorization"] for r in model_server.requests}
    # Every request, the recorded checks' included, went through an edge with the organizer's key
    # (a module reaching the URL directly would send its own "not-a-key").
    assert keys == {"Bearer organizer-key"}
