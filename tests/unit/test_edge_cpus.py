"""Where an edge's calls run, as its hello says it and the center reads it: the CPUs and their
hyperthread siblings (a call competes with its sibling for the core), named by host."""

from __future__ import annotations

from pathlib import Path

from center.evaluation.edge_source import cpus_of
from edge.service.scheduling import with_core_siblings
from edge.wire.messages import HelloReply


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
