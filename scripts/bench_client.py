"""Benchmark the center's EdgeClient alone: CPU per call of each calling thread.

    python scripts/bench_client.py --calls 2000 --threads 2

An in-process ROUTER thread answers every ``decide_request`` at once with a fixed reply, so what
is measured is the client (encode, send, poll, receive, decode) and no edge. Each of ``--threads``
threads (battle threads) makes ``--calls`` calls after 200 warm-up calls, with frames of the size
a decision carries; its CPU comes from ``time.thread_time``. Results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np
import zmq

from center.isolation.edge_client import EdgeClient
from edge.wire.envelopes import CODEC
from edge.wire.messages import PROTOCOL_VERSION, DecideReply, DecideRequest, HelloReply

MAX_SIZE = 1 << 22
WARM_UP = 200
FRAMES = ["|request|" + "x" * 2800, "|turn|3"]  # about a decision's median (2.9 kB)


class Answerer:
    """A ROUTER on loopback that answers every request at once (hello and decide)."""

    def __init__(self) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.router: zmq.Socket[bytes] = self.context.socket(zmq.ROUTER)
        self.port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.stopped = False
        self.thread = threading.Thread(target=self.serve, name="answerer", daemon=True)
        self.thread.start()

    def serve(self) -> None:
        observation = np.zeros(8, dtype=np.float32)
        mask = np.ones(10, dtype=np.int8)
        for n in range(1, 1 << 62):
            if self.stopped:
                break
            if not self.router.poll(100):
                continue
            routing_id, *frames = self.router.recv_multipart()
            request = CODEC.decode_request(frames, MAX_SIZE).envelope
            body: HelloReply | DecideReply
            if request.type == "hello_request":
                body = HelloReply("blue", PROTOCOL_VERSION, [], "answerer", 10.0)
            else:
                body = DecideReply(observation, mask, True, 0, "/choose move 1")
            reply = CODEC.reply(f"r-{n}", request, body, max_size=MAX_SIZE)
            self.router.send_multipart([routing_id, *reply])
        self.router.close(linger=0)
        self.context.term()

    def stop(self) -> None:
        self.stopped = True
        self.thread.join(5.0)


def measure(client: EdgeClient, threads: int, calls: int) -> tuple[list[float], float]:
    """µs of CPU per call of each calling thread, and the wall seconds of all the calls."""
    cpu: dict[int, float] = {}

    def caller(k: int) -> None:
        request = DecideRequest(FRAMES, 0.0, done=False)
        for _ in range(WARM_UP):
            client.call(request, f"s{k}", 10.0)
        start = time.thread_time()
        for _ in range(calls):
            client.call(request, f"s{k}", 10.0)
        cpu[k] = (time.thread_time() - start) / calls * 1e6

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(threads)]
    wall = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [cpu[k] for k in sorted(cpu)], time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per thread")
    parser.add_argument("--threads", type=int, default=2, help="calling threads (battle threads)")
    args = parser.parse_args()
    if args.calls < 1 or args.threads < 1:
        parser.error("--calls and --threads must be positive")
    answerer = Answerer()
    client = EdgeClient(f"tcp://127.0.0.1:{answerer.port}")
    try:
        client.hello(10.0)
        per_thread, wall = measure(client, args.threads, args.calls)
    finally:
        client.close()
        answerer.stop()
    shown = ", ".join(f"{value:.1f}" for value in per_thread)
    print(f"{args.threads} threads x {args.calls} calls, {wall:.2f} s")
    print(f"CPU per call of each calling thread, µs: {shown}; mean {np.mean(per_thread):.1f}")


if __name__ == "__main__":
    main()
