"""The places an edge gives its workers, without user ids or control groups (the host gives
none): each starting worker takes the lowest free slot; a start that fails gives its slot back at
once, a worker that ends gives back its slot and its folder."""

from __future__ import annotations

import socket
from pathlib import Path

from edge.service.channel import FrameReader
from edge.service.sandbox.cgroups import CgroupSupport
from edge.service.sandbox.limits import Limits
from edge.service.supervision.worker_handle import WorkerHandle
from edge.service.supervision.worker_places import WorkerPlaces


def places() -> WorkerPlaces:
    return WorkerPlaces(CgroupSupport(), Limits(), host_uids=False, admission=None, templates=None)


def test_each_worker_takes_the_lowest_free_slot_and_a_failed_start_frees_it():
    edge = places()
    first, second = edge.admit(1, None), edge.admit(2, None)
    edge.settle(first, None)
    edge.settle(second, None)
    assert (first.slot, second.slot, first.group) == (0, 1, None)
    edge.give_back(first)
    third = edge.admit(3, None)
    edge.settle(third, None)
    assert third.slot == 0


def test_an_ended_worker_frees_its_slot_and_its_folder(tmp_path: Path):
    edge = places()
    place = edge.admit(1, None)
    edge.settle(place, None)
    assert place.slot is not None
    home = tmp_path / "w0"
    (home / "left").mkdir(parents=True)
    a, b = socket.socketpair()
    try:
        worker = WorkerHandle(1, "model", place.slot, a, FrameReader(1024), home)
        edge.release(worker)
    finally:
        a.close()
        b.close()
    assert not home.exists()
    again = edge.admit(2, None)
    edge.settle(again, None)
    assert again.slot == 0
