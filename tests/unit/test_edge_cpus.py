"""Where an edge's calls run, as its hello says it and the center reads it: the CPUs and their
hyperthread siblings (a call competes with its sibling for the core), named by host; a battle's
sides are apart (opened and asked at once) only when both edges say so and share no CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from center.errors import EdgeUnavailable
from center.evaluation.playing.edge_source import EdgeSource, cpus_of
from center.evaluation.playing.in_process import InProcessSource
from edge.service.supervision.scheduling import with_core_siblings
from edge.wire.messages import HelloReply

AGENTS = Path(__file__).resolve().parents[1] / "agents"


def _sysfs(tmp_path: Path, siblings: dict[int, str]) -> Path:
    for cpu, text in siblings.items():
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "thread_siblings_list").write_text(text + "\n")
    return tmp_path


def test_a_cpu_brings_its_hyperthread_siblings(tmp_path):
    # 8 logical CPUs on 4 cores, the common Intel numbering: CPU n and n + 4 share a core.
    sysfs = _sysfs(tmp_path, {n: f"{n % 4},{n % 4 + 4}" for n in range(8)})
    assert with_core_siblings([0, 1, 2, 3], sysfs) == list(range(8))  # the "first half": all cores
    assert with_core_siblings([0, 4], sysfs) == [0, 4]  # one whole core
    # Two edges on "0-3" and "4-7" share every core: not apart.
    assert set(with_core_siblings([0, 1, 2, 3], sysfs)) & set(with_core_siblings([4, 5], sysfs))


def test_a_cpu_whose_topology_cannot_be_read_stands_alone(tmp_path):
    sysfs = _sysfs(tmp_path, {0: "0-1", 2: "not a list"})
    assert with_core_siblings([0, 2, 3], sysfs) == [0, 1, 2, 3]


def test_the_center_names_cpus_by_host_and_reads_none_from_an_edge_that_names_no_host():
    hello = HelloReply("blue", "4.1", [], "i", 30.0, "boot-a", [0, 1])
    assert cpus_of(hello) == {"boot-a/0", "boot-a/1"}
    other = HelloReply("red", "4.1", [], "j", 30.0, "boot-b", [0, 1])
    assert cpus_of(hello).isdisjoint(cpus_of(other))  # the same numbers on another host
    assert cpus_of(HelloReply("red", "4.0", [], "j")) == frozenset()  # a 4.0 edge
    assert cpus_of(HelloReply("red", "4.1", [], "j", 30.0, "boot-b", [])) == frozenset()


class _Client:
    """What EdgeSource.apart uses of an EdgeClient: its hello (or the edge not answering)."""

    def __init__(self, hello: HelloReply | None) -> None:
        self.reply = hello

    def hello(self, timeout: float | None = None) -> HelloReply:
        if self.reply is None:
            raise EdgeUnavailable("no answer")
        return self.reply

    def close(self) -> None:
        pass


def _hello(side: str, host: str, cpus: list[int]) -> HelloReply:
    return HelloReply(side, "4.1", [], side, 30.0, host, cpus)


@pytest.mark.parametrize(
    ("blue", "red", "apart"),
    [
        (_hello("blue", "a", [0, 1]), _hello("red", "b", [0, 1]), True),  # hosts of their own
        (_hello("blue", "a", [0]), _hello("red", "a", [1]), True),  # CPUs of their own
        (_hello("blue", "a", [0, 1]), _hello("red", "a", [1, 2]), False),  # a CPU shared
        (_hello("blue", "a", [0]), _hello("red", "a", []), False),  # red not pinned
        (_hello("blue", "a", [0]), HelloReply("red", "4.0", [], "r"), False),  # a 4.0 edge
        (_hello("blue", "a", [0]), None, False),  # red does not answer
    ],
)
def test_a_battle_s_sides_are_apart_only_when_both_hellos_say_so(blue, red, apart):
    clients = {"blue": _Client(blue), "red": _Client(red)}
    source = EdgeSource(clients, AGENTS / "candidates.json")  # type: ignore[arg-type]
    assert source.apart() is apart


def test_sides_in_this_process_are_never_apart():
    assert InProcessSource(AGENTS / "candidates.json").apart() is False
