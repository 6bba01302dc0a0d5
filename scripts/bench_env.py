"""Benchmark PokemonEnv: step() latency and battles per second, against poke-env's own random pair.

    python scripts/bench_env.py --battles 30 --format gen9bssfactory

On one local Showdown server, interleaved in rounds: poke-env's ``RandomPlayer`` pair, then
PokemonEnv with two random MapleAgents. Reports step() p50/p99, the part spent in our own code,
and the battles/s ratio env / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time

import numpy as np
from poke_env.player import RandomPlayer
from poke_env.ps_client import AccountConfiguration

from center.env.env_player import unique_username
from center.env.pokemon_env import PokemonEnv
from center.showdown import ShowdownServer


def run_baseline(server: ShowdownServer, battle_format: str, n: int) -> float:
    """Seconds for n battles between two poke-env RandomPlayers."""
    config = server.server_configuration()
    players = [
        RandomPlayer(
            AccountConfiguration(unique_username("benchrnd"), None),
            battle_format=battle_format,
            server_configuration=config,
        )
        for _ in range(2)
    ]

    async def play() -> None:
        await players[0].battle_against(players[1], n_battles=n)

    start = time.perf_counter()
    asyncio.run(play())
    elapsed = time.perf_counter() - start
    for player in players:
        asyncio.run(player.ps_client.stop_listening())
    return elapsed


def run_env(
    env: PokemonEnv, n: int, rng: np.random.Generator
) -> tuple[float, list[float], list[float]]:
    """Seconds for n env battles, the step() latencies and the in-env CPU time per step."""
    steps: list[float] = []
    overhead: list[float] = []
    start = time.perf_counter()
    for _ in range(n):
        _, infos = env.reset(seed=int(rng.integers(1 << 30)))
        while env.agents:
            actions = {}
            for p in env.agents:
                legal = np.flatnonzero(infos[p]["action_mask"])
                actions[p] = int(rng.choice(legal)) if legal.size else 0
            t0 = time.perf_counter()
            c0 = time.thread_time()
            _, _, _, _, infos = env.step(actions)
            overhead.append(time.thread_time() - c0)
            steps.append(time.perf_counter() - t0)
    return time.perf_counter() - start, steps, overhead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--battles", type=int, default=30, help="battles per side of the comparison"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--format", default="gen9bssfactory")
    parser.add_argument(
        "--server", default=None, help="URL of a running server (default: start one)"
    )
    args = parser.parse_args()

    server = ShowdownServer.find_or_start(args.server)
    rng = np.random.default_rng(0)
    per_round = max(1, args.battles // args.rounds)
    base_time = env_time = 0.0
    steps: list[float] = []
    overhead: list[float] = []
    try:
        with PokemonEnv(args.format, server=server) as env:
            env.reset(seed=0)  # log in and warm up before timing
            for _ in range(args.rounds):
                base_time += run_baseline(server, args.format, per_round)
                t, s, o = run_env(env, per_round, rng)
                env_time += t
                steps += s
                overhead += o
    finally:
        server.stop()
    n = per_round * args.rounds
    step_ms = np.array(steps) * 1e3
    over_ms = np.array(overhead) * 1e3
    print(
        f"conditions: {platform.processor() or platform.machine()}, {args.format}, {n} battles each, "
        f"{args.rounds} interleaved rounds, one local Showdown on loopback, Python {platform.python_version()}"
    )
    print(f"poke-env RandomPlayer pair : {n / base_time:6.2f} battles/s")
    print(
        f"PokemonEnv, random agents  : {n / env_time:6.2f} battles/s  "
        f"(ratio {base_time / env_time:.2f}x the baseline)"
    )
    print(
        f"step() latency             : p50 {np.percentile(step_ms, 50):.2f} ms, "
        f"p99 {np.percentile(step_ms, 99):.2f} ms over {len(step_ms)} steps (requirement: p99 <= 200 ms)"
    )
    print(
        f"  of which our code (CPU)  : p50 {np.percentile(over_ms, 50):.2f} ms, "
        f"p99 {np.percentile(over_ms, 99):.2f} ms"
    )


if __name__ == "__main__":
    main()
