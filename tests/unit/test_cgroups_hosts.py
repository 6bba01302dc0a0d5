"""The edge's control groups on hosts unlike this one (fake hierarchies under tmp_path): a host
that gives some mechanisms but not the freezer, and a v2 host whose own group is not where
/proc/self/cgroup says (a container without a cgroup namespace of its own). Neither may stop an
edge: what is missing is reported off, with a reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge.service.sandbox import cgroups
from edge.service.sandbox.cgroups import MECHANISMS, CgroupSupport, WorkerGroup, probe_cgroups

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the probe tries nothing without root")


def test_a_group_without_a_freezer_is_killed_and_removed_without_error(tmp_path):
    base = tmp_path / "memory"
    base.mkdir()
    support = CgroupSupport(base={"memory": str(base)}, v2={"memory": True})
    group = WorkerGroup(support, "w1")
    group.create(memory=1 << 30, processes=0)
    assert (base / "w1" / "memory.max").read_text() == str(1 << 30)
    group.freeze()  # no freezer: nothing to do
    group.thaw()
    group.kill()  # raised KeyError('freeze') before: every retired worker took its edge down
    assert group.empty()


@needs_root
def test_a_v2_host_whose_own_group_is_missing_reports_every_mechanism_off(tmp_path, monkeypatch):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids cpuset\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    monkeypatch.setattr(cgroups, "_own_v2_group", lambda unified: unified / "not" / "here")
    support = probe_cgroups("blue-1", root=tmp_path)
    assert not support.any
    for name in MECHANISMS:
        assert "cgroup v2 at" in support.why_off[name], support.why_off
    assert all(line.endswith(")") and ": off (" in line for line in support.lines())


@needs_root
def test_a_host_with_no_hierarchy_at_all_says_so_per_mechanism(tmp_path: Path):
    support = probe_cgroups("red-1", root=tmp_path)
    assert not support.any
    assert support.why_off["freeze"].startswith("no cgroup v2 freeze and no v1 freezer")


def test_a_private_folder_itself_is_never_kept_only_what_lies_below_it(tmp_path: Path):
    """A module right in /tmp is kept by its own folder: /tmp itself must still be covered (kept,
    it would stay the host's, shared and writable by every worker)."""
    from edge.service.sandbox.limits import paths_under

    module = tmp_path / "mybot"
    module.mkdir()
    assert paths_under([str(tmp_path)], [tmp_path, module]) == [str(module)]
    assert paths_under([str(tmp_path)], [tmp_path / "missing"]) == []


_V1_FREEZER = Path("/sys/fs/cgroup/freezer")


@pytest.mark.skipif(
    os.geteuid() != 0 or not (_V1_FREEZER / "cgroup.procs").exists(),
    reason="needs root and a mounted cgroup v1 freezer",
)
def test_a_v1_freezer_edge_keeps_an_empty_group_frozen_while_its_workers_freeze_and_thaw(
    tmp_path: Path,
):
    """A host with only the v1 freezer (this one's real hierarchy, without the unified one): the
    edge holds an empty group frozen for its life, so that its workers' freezes and thaws never
    switch the kernel's freezer key (hold_v1_freezer), and removing its groups removes it."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "freezer").symlink_to(_V1_FREEZER)
    support = probe_cgroups(f"blue-{os.getpid()}", root=root)
    assert support.on("freeze") and not support.v2["freeze"], support.why_off
    folder = Path(str(support.base["freeze"]))
    pid = 0
    try:
        anchor = cgroups.hold_v1_freezer(support)
        assert anchor is not None and anchor.parent == folder
        assert (anchor / "freezer.state").read_text().strip() == "FROZEN"
        assert not (anchor / "cgroup.procs").read_text().strip()  # it holds no process
        group = WorkerGroup(support, "w1")
        group.create(memory=0, processes=0)
        pid = os.fork()
        if pid == 0:  # a worker stand-in: it only waits to be killed
            try:
                os.kill(os.getpid(), 19)  # SIGSTOP
            finally:
                os._exit(0)
        (folder / "w1" / "cgroup.procs").write_text(str(pid))
        group.freeze()
        assert (folder / "w1" / "freezer.state").read_text().strip() in ("FREEZING", "FROZEN")
        group.thaw()
        assert (folder / "w1" / "freezer.state").read_text().strip() == "THAWED"
        assert (anchor / "freezer.state").read_text().strip() == "FROZEN"  # untouched by both
        group.kill()
        os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        cgroups.remove_edge_groups(support)
    assert not folder.exists()
