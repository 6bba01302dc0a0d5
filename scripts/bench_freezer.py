"""Benchmark what freezing a worker between its calls costs the edge, per call, on each freezer
this host has: cgroup v2 and cgroup v1, v1 with and without the frozen anchor group an edge holds
(``edge.service.sandbox.cgroups.hold_v1_freezer``).

    python scripts/bench_freezer.py --calls 2000 --rounds 3

Needs root and at least one freezer. How, and why the anchor: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edge.service.sandbox.cgroups import (
    CGROUP_ROOT,
    CgroupSupport,
    WorkerGroup,
    hold_v1_freezer,
    remove_edge_groups,
    v2_groups_folder,
)

V1_FREEZER = CGROUP_ROOT / "freezer"


@dataclass
class Config:
    """One way of freezing: ``support`` says where the edge's groups go (None: no freezer, the
    plain round trip)."""

    name: str
    support: CgroupSupport | None
    anchor: bool = False
    thaw_ms: list[float] = field(default_factory=list)
    freeze_ms: list[float] = field(default_factory=list)
    trip_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    calls: int = 0


class StandIn:
    """A forked worker stand-in in ``group``: it answers each byte it reads."""

    def __init__(self, group: WorkerGroup | None) -> None:
        self.ours, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:  # the stand-in
            self.ours.close()
            while True:
                data = theirs.recv(16)
                if not data:
                    os._exit(0)
                theirs.send(data)
        theirs.close()
        if group is not None:
            for procs in group.join_paths():
                Path(procs).write_text(str(self.pid))

    def trip(self) -> None:
        self.ours.send(b"x")
        if not self.ours.recv(16):
            raise RuntimeError("the stand-in is gone")

    def stop(self) -> None:
        self.ours.close()
        os.waitpid(self.pid, 0)


def run_calls(config: Config, n: int, edge_name: str) -> None:
    """``n`` calls of the supervisor on one stand-in: thaw, round trip, freeze."""
    group = None
    if config.support is not None:
        group = WorkerGroup(config.support, f"bench-{config.calls}")
        group.create(memory=0, processes=0)
    stand_in = StandIn(group)
    clock: Callable[[], float] = time.perf_counter
    anchor = None
    if config.anchor and config.support is not None:
        anchor = hold_v1_freezer(config.support)  # held for these calls only
        if anchor is None:
            raise RuntimeError("the anchor group could not be made")
    try:
        if group is not None:
            group.freeze()
        c0 = time.process_time()
        for _ in range(n):
            t0 = clock()
            if group is not None:
                group.thaw()
            t1 = clock()
            stand_in.trip()
            t2 = clock()
            if group is not None:
                group.freeze()
            t3 = clock()
            config.thaw_ms.append((t1 - t0) * 1e3)
            config.trip_ms.append((t2 - t1) * 1e3)
            config.freeze_ms.append((t3 - t2) * 1e3)
        config.cpu_s += time.process_time() - c0
        config.calls += n
    finally:
        if group is not None:
            group.thaw()
        stand_in.stop()
        if group is not None:
            group.kill()
            for _ in range(100):
                if group.remove():
                    break
                time.sleep(0.01)
        if anchor is not None:
            (anchor / "freezer.state").write_text("THAWED")
            anchor.rmdir()


def frozen_v1_groups() -> int:
    """Groups of the v1 freezer frozen on this host now (each keeps the kernel's key on)."""
    count = 0
    for state in V1_FREEZER.glob("**/freezer.state"):
        try:
            if state.read_text().strip() in ("FROZEN", "FREEZING"):
                count += 1
        except OSError:
            continue
    return count


def configs(edge_name: str) -> tuple[list[Config], list[str]]:
    found = [Config("no freezer (the round trip alone)", None)]
    missing = []
    try:
        v2 = v2_groups_folder()
    except OSError as exc:
        v2 = None
        missing.append(f"cgroup v2: this process's group cannot be read ({exc.strerror})")
    if v2 is not None:
        folder = v2 / f"sep-edge-{edge_name}"
        try:
            folder.mkdir(exist_ok=True)
            probe = folder / "probe"
            probe.mkdir(exist_ok=True)
            has_freeze = (probe / "cgroup.freeze").exists()
            probe.rmdir()
            if has_freeze:
                support = CgroupSupport(base={"freeze": str(folder)}, v2={"freeze": True})
                found.append(Config("cgroup v2 cgroup.freeze", support))
            else:
                folder.rmdir()
                missing.append("cgroup v2: no cgroup.freeze")
        except OSError as exc:
            missing.append(f"cgroup v2 at {v2}: {exc.strerror}")
    elif not missing:
        missing.append("cgroup v2: not mounted")
    if (V1_FREEZER / "cgroup.procs").exists():
        for anchor in (False, True):
            folder = V1_FREEZER / f"sep-edge-{edge_name}-{'anchor' if anchor else 'bare'}"
            try:
                folder.mkdir(exist_ok=True)
            except OSError as exc:
                missing.append(f"cgroup v1 freezer: {exc.strerror}")
                break
            support = CgroupSupport(base={"freeze": str(folder)}, v2={"freeze": False})
            name = "cgroup v1 freezer, " + (
                "an empty group held frozen" if anchor else "no group held"
            )
            found.append(Config(name, support, anchor=anchor))
    else:
        missing.append("cgroup v1 freezer: not mounted")
    return found, missing


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per configuration")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_freezer: needs root (it makes control groups)")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"conditions: {os.cpu_count()} CPUs ({platform.machine()}), kernel {platform.release()}, "
        f"load average {load} at start, Python {platform.python_version()}",
        flush=True,
    )
    edge_name = f"bench-{os.getpid()}"
    found, missing = configs(edge_name)
    try:
        if any(c.support is not None and not c.support.v2.get("freeze") for c in found):
            others = frozen_v1_groups()
            print(
                f"v1 groups frozen on this host before the run: {others}"
                + (
                    " (they keep the key on: 'no group held' is not measured bare)"
                    if others
                    else ""
                )
            )
        per_round = max(1, args.calls // args.rounds)
        for r in range(args.rounds):
            order = found if r % 2 == 0 else found[::-1]
            for config in order:
                run_calls(config, per_round, edge_name)
    finally:
        for config in found:
            if config.support is not None:
                remove_edge_groups(config.support)
    for line in missing:
        print(f"not measured: {line}")
    print(f"per call, ms ({found[0].calls} calls each, {args.rounds} interleaved rounds)")
    print(
        f"  {'':52s} {'thaw p50':>9s} {'freeze p50':>11s} {'trip p50':>9s} "
        f"{'total mean':>11s} {'CPU mean':>9s}"
    )
    base = found[0]
    base_cpu = base.cpu_s / max(base.calls, 1) * 1e3
    for config in found:
        total = [
            a + b + c
            for a, b, c in zip(config.thaw_ms, config.trip_ms, config.freeze_ms, strict=True)
        ]
        cpu = config.cpu_s / max(config.calls, 1) * 1e3
        print(
            f"  {config.name:52s} {pct(config.thaw_ms, 50):9.4f} {pct(config.freeze_ms, 50):11.4f} "
            f"{pct(config.trip_ms, 50):9.4f} {statistics.mean(total):11.4f} {cpu:9.4f}"
        )
    for config in found[1:]:
        cpu = config.cpu_s / max(config.calls, 1) * 1e3
        print(
            f"freezing's own CPU per call, {config.name}: {cpu - base_cpu:.4f} ms "
            f"({cpu / base_cpu:.2f}x the plain round trip's)"
        )


if __name__ == "__main__":
    main()
