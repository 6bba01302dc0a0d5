"""Count and time the msgspec calls of one decision on the wire, step by step, in one process.

    python scripts/bench_wire_calls.py [--no-arrays] [--number 2000]

Each step is the codec call one process makes for a ``decide`` and its reply (docs/benchmarks.md):
the center's encode, the server's envelope, the worker's decode and encode, the supervisor's
envelope and usage frame, the center's decode. Calls are counted with ``sys.setprofile``.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable
from typing import Any

import numpy as np

from edge.wire.envelopes import CODEC
from edge.wire.messages import CallUsage, DecideReply, DecideRequest, PolicyInfo
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

SIZE = DEFAULT_MAX_MESSAGE_SIZE
CALLS = ("encode", "decode", "convert")


def steps(arrays: bool) -> list[tuple[str, Callable[[], Any]]]:
    """The decision's codec steps, in order, each run once here to feed the next."""
    info = PolicyInfo(needs_action=True, turn=3, battle_tag="battle-gen9bssfactory-1")
    request = DecideRequest(["|turn|3", "|move|p1a: Ting-Lu|Ruination|p2a: Kingambit"], 0.0, info)
    if arrays:
        body = DecideReply(
            np.zeros(10, np.float32), np.ones(11, np.int8), True, 3, "/choose move 1"
        )
    else:
        body = DecideReply([0.0] * 10, None, True, 3, "/choose move 1")
    sent = CODEC.request(request, msg_id="c-1", session="s-1", timeout=5.0, max_size=SIZE)
    served = CODEC.decode_request(sent, SIZE).envelope
    replied = CODEC.reply("w-1", served, body, max_size=SIZE)
    usage = CallUsage(0.001, 0.0)
    forwarded = [*replied, CODEC.usage_frame(usage)]
    return [
        ("center: encode the request", lambda: CODEC.request(
            request, msg_id="c-1", session="s-1", timeout=5.0, max_size=SIZE)),
        ("server: decode its envelope", lambda: CODEC.envelope(sent[0], SIZE)),
        ("worker: decode the request", lambda: CODEC.decode_request(sent, SIZE)),
        ("worker: encode the reply", lambda: CODEC.reply("w-1", served, body, max_size=SIZE)),
        ("supervisor: decode its envelope", lambda: CODEC.envelope(replied[0], SIZE)),
        ("supervisor: encode the usage frame", lambda: CODEC.usage_frame(usage)),
        ("center: decode the reply", lambda: CODEC.decode_reply(forwarded, SIZE)),
    ]  # fmt: skip


def count(step: Callable[[], Any]) -> int:
    """The msgspec encode and decode calls ``step`` makes."""
    seen = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal seen
        owner = getattr(arg, "__self__", None)
        module = type(owner).__module__ if owner is not None else getattr(arg, "__module__", "")
        if event == "c_call" and (module or "").startswith("msgspec") and arg.__name__ in CALLS:
            seen += 1

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-arrays", action="store_true", help="a reply without numpy arrays")
    parser.add_argument("--number", type=int, default=2000, help="runs per timing (best of 7)")
    args = parser.parse_args()
    if args.number < 1:
        parser.error("--number must be at least 1")
    total_calls, total_us = 0, 0.0
    print(f"{'calls':>5}  {'µs':>7}  step")
    for name, step in steps(arrays=not args.no_arrays):
        calls = count(step)
        micros = min(timeit.repeat(step, number=args.number, repeat=7)) / args.number * 1e6
        total_calls, total_us = total_calls + calls, total_us + micros
        print(f"{calls:5d}  {micros:7.2f}  {name}")
    print(f"{total_calls:5d}  {total_us:7.2f}  total")


if __name__ == "__main__":
    main()
