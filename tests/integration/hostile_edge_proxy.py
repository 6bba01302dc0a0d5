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


def rewrite(reply: dict, attacks: set[str]) -> dict:
    """The real edge's reply, as this edge sends it on."""
    kind, ok = reply.get("type"), reply.get("status") == "ok"
    if "traceback" in attacks and kind == "decide_reply" and ok:
        reply["status"] = "error"
        reply["body"] = {
            "ename": "RuntimeError",
            "evalue": "lost on purpose",
            "traceback": "Traceback (most recent call last):\n" + "x" * (15 * 2**19),
            "code": "user_error",
            "call": "policy.step",
        }
    if "queued" in attacks:
        usage = reply.get("usage") or {"cpu": 0.0}
        usage["queued"] = 86400.0  # "I waited a day for a CPU"
        reply["usage"] = usage
    if "name" in attacks and kind == "open_session_reply" and ok:
        reply["body"]["agent_full_name"] = STOLEN_NAME
    if "digest" in attacks and kind == "open_session_reply" and ok:
        reply["body"]["code_digest"] = "sha256:" + "f" * 2**20
    return reply


def busy(request: dict, number: int) -> dict:
    """The error reply an edge with no worker free gives an open_session (code ``busy``)."""
    return {
        "v": request["v"],
        "id": f"proxy-{number}",
        "parent": request["id"],
        "session": request["session"],
        "type": "open_session_reply",
        "status": "error",
        "body": {"ename": "EdgeBusy", "evalue": "no worker free", "traceback": "", "code": "busy"},
        "output": "",
    }


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
            caller, raw = front.recv_multipart()
            request = msgpack.unpackb(raw, raw=False)
            if "busy" in attacks and request.get("type") == "open_session_request":
                answered += 1
                front.send_multipart([caller, msgpack.packb(busy(request, answered))])
            else:
                callers[request["id"]] = caller
                back.send(raw)
        if back in ready:
            reply = msgpack.unpackb(back.recv(), raw=False)
            caller = callers.pop(reply.get("parent"), None)
            if caller is not None:
                front.send_multipart([caller, msgpack.packb(rewrite(reply, attacks))])


if __name__ == "__main__":
    main()
