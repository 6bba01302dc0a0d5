"""A participant-hosted edge that lies, as an attacker would write it from docs/protocol.md alone:
a proxy (ZeroMQ ROUTER in front, DEALER to a real sep_edge) that rewrites the edge's replies.

    python hostile_edge_proxy.py LISTEN UPSTREAM ATTACK[,ATTACK...]

Attacks: ``traceback`` (every decide answered by an error with a 7.5 MiB traceback), ``busy``
(every open_session answered ``busy``, for ever), ``queued`` (every reply claims a day of waiting
for a CPU), ``name`` (another entrant's name in agent_full_name), ``digest`` (a 1 MiB code
digest). It imports nothing of the service: pyzmq and msgpack only.
"""

from __future__ import annotations

import signal
import sys

import msgpack
import zmq

STOLEN_NAME = "good_random:good_random:RandomPolicy"  # the blue entrant's, as its edge says it


def rewrite(frames: list[bytes], attacks: set[str]) -> list[bytes]:
    """The real edge's reply (its frames: envelope, body, usage), as this edge sends it on."""
    envelope = msgpack.unpackb(frames[0], raw=False)
    body = msgpack.unpackb(frames[1], raw=False)
    usage = msgpack.unpackb(frames[2], raw=False) if len(frames) > 2 else None
    kind, ok = envelope.get("type"), envelope.get("status", "ok") == "ok"
    if "traceback" in attacks and kind == "decide_reply" and ok:
        envelope["status"] = "error"
        body = {
            "type": "error_body",
            "ename": "RuntimeError",
            "evalue": "lost on purpose",
            "traceback": "Traceback (most recent call last):\n" + "x" * (15 * 2**19),
            "code": "user_error",
            "call": "policy.step",
        }
    if "queued" in attacks:
        usage = usage or {"cpu": 0.0}
        usage["queued"] = 86400.0  # "I waited a day for a CPU"
    if "name" in attacks and kind == "open_session_reply" and ok:
        body["agent_full_name"] = STOLEN_NAME
    if "digest" in attacks and kind == "open_session_reply" and ok:
        body["code_digest"] = "sha256:" + "f" * 2**20
    rewritten = [msgpack.packb(envelope), msgpack.packb(body)]
    return rewritten if usage is None else [*rewritten, msgpack.packb(usage)]


def busy(request: dict, number: int) -> list[bytes]:
    """The error reply an edge with no worker free gives an open_session (code ``busy``)."""
    envelope = {
        "v": request["v"],
        "id": f"proxy-{number}",
        "parent": request["id"],
        "session": request["session"],
        "type": "open_session_reply",
        "status": "error",
    }
    body = {"type": "error_body", "ename": "EdgeBusy", "evalue": "no worker free", "code": "busy"}
    return [msgpack.packb(envelope), msgpack.packb(body)]


def main() -> None:
    listen, upstream, attack = sys.argv[1:4]
    attacks = set(attack.split(","))
    context = zmq.Context()
    front = context.socket(zmq.ROUTER)
    front.bind(listen)
    back = context.socket(zmq.DEALER)
    back.connect(upstream)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    poller.register(back, zmq.POLLIN)
    callers: dict[str, bytes] = {}  # request id -> the center's socket that sent it
    answered = 0
    while True:
        ready = dict(poller.poll())
        if front in ready:
            caller, *frames = front.recv_multipart()
            request = msgpack.unpackb(frames[0], raw=False)
            if "busy" in attacks and request.get("type") == "open_session_request":
                answered += 1
                front.send_multipart([caller, *busy(request, answered)])
            else:
                callers[request["id"]] = caller
                back.send_multipart(frames)
        if back in ready:
            frames = back.recv_multipart()
            parent = msgpack.unpackb(frames[0], raw=False).get("parent")
            caller = callers.pop(parent, None)
            if caller is not None:
                front.send_multipart([caller, *rewrite(frames, attacks)])


if __name__ == "__main__":
    main()
