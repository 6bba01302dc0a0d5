"""A fake chat-completions server that counts every token it serves, as a model server's bill
would: prompt and output, whether or not it reports them, and a stream cut short too."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OWN_LIMIT = 300
"""What the fake server generates when a request sets no max_tokens (a real one: its context)."""


class CountingServer:
    """Chat completions (``/v1/chat/completions``) that count what they serve: a token per byte of
    each message's content, as JSON, plus 2 (a chat template's), and a token per chunk of output,
    up to ``max_tokens`` (OWN_LIMIT without); ``usage`` only as OpenAI reports it."""

    def __init__(self) -> None:
        self.served = 0
        self.bodies: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                with server._lock:
                    server.bodies.append(asked)
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                prompt = sum(len(json.dumps(m["content"]).encode()) + 2 for m in asked["messages"])
                server.count(prompt)
                output = asked.get("max_tokens") or OWN_LIMIT
                if not asked.get("stream"):
                    server.count(output)
                    usage = {"total_tokens": prompt + output}
                    self._send(
                        json.dumps({"choices": [{"message": {"content": "x"}}], "usage": usage})
                    )
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for _ in range(output):
                        chunk = {"choices": [{"index": 0, "delta": {"content": "a "}}]}
                        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                        server.count(1)
                    if (asked.get("stream_options") or {}).get("include_usage"):
                        usage = {"choices": [], "usage": {"total_tokens": prompt + output}}
                        self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\n")
                    self.wfile.write(b"data: [DONE]\n\n")
                except OSError:
                    pass  # the client went away; what was generated is served all the same

            def _send(self, text: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text.encode())

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def count(self, tokens: int) -> None:
        with self._lock:
            self.served += tokens

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
