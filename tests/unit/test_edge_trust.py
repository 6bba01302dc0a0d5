"""Which edges the center takes at their word (sep_config.json's ``"trusted"``), and what it does
with an untrusted edge's ``busy``: waited for ``--edge-wait`` at most, then the side's DISCONNECT
(``--edge-loss forfeit``) or a void; a trusted edge's ``busy`` (memory admission) is waited for."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from center.errors import EdgeFull, EdgeRemoteError, InfrastructureError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.edge_source import EdgeSource
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.schedule import ScheduledBattle
from edge.contract.outcomes import SideStatus
from edge.errors import SepConfigError
from edge.wire.messages import ErrorCode
from edge.wire.sep_config import SepConfig, load_sep_config

AGENTS = Path(__file__).resolve().parents[1] / "agents"
BATTLE = ScheduledBattle(
    "good_random-vs-good_random_2-0000", "good_random", "good_random_2", 1, ("", ""), 0
)


def _config(tmp_path: Path, red: dict) -> SepConfig:
    path = tmp_path / "sep_config.json"
    path.write_text(json.dumps({"blue": {"host": "127.0.0.1", "port": 51000}, "red": red}))
    return load_sep_config(path)


@pytest.mark.parametrize(
    ("red", "trusted"),
    [
        ({"host": "127.0.0.1", "port": 1}, True),
        ({"host": "127.0.0.9", "port": 1}, True),
        ({"host": "::1", "port": 1}, True),
        ({"host": "localhost", "port": 1}, True),
        ({"host": "192.0.2.11", "port": 1}, False),  # another host: a participant's, say
        ({"host": "edge.example.org", "port": 1}, False),
        ({"host": "192.0.2.11", "port": 1, "trusted": True}, True),  # the organizer's own
        ({"host": "127.0.0.1", "port": 1, "trusted": False}, False),  # a proxy on loopback
    ],
)
def test_an_edge_is_trusted_on_loopback_unless_its_entry_says_otherwise(tmp_path, red, trusted):
    assert _config(tmp_path, red).trusted("red") is trusted


def test_a_trusted_that_is_not_a_bool_is_one_clear_error(tmp_path):
    config = _config(tmp_path, {"host": "127.0.0.1", "port": 1, "trusted": "yes"})
    with pytest.raises(SepConfigError, match=r"red\.trusted must be true or false"):
        config.trusted("red")


class _BusyEdge:
    """What EdgeSource uses of an EdgeClient, for an edge that answers every open ``busy``."""

    address = "tcp://192.0.2.11:51010"
    lost_at = None
    connected = True

    def __init__(self) -> None:
        self.opens = 0

    def call(self, body: object, **kwargs: object) -> object:
        self.opens += 1
        raise EdgeRemoteError("EdgeBusy", "no worker free", code=ErrorCode.BUSY)

    def close(self) -> None:
        pass


def _source(trusted: bool, **options: object) -> tuple[EdgeSource, _BusyEdge]:
    edge = _BusyEdge()
    clients = {"blue": edge, "red": edge}
    source = EdgeSource(
        clients,  # type: ignore[arg-type]
        AGENTS / "candidates.json",
        trusted={"blue": True, "red": trusted},
        **options,  # type: ignore[arg-type]
    )
    return source, edge


def _open(source: EdgeSource, side: str = "red") -> SideGuard:
    return source.open_side("good_random_2", side, BATTLE, "gen9randombattle", Budget(), "u")


def test_an_untrusted_edge_busy_past_the_wait_is_the_side_s_disconnect_under_forfeit():
    source, edge = _source(False, edge_wait=0.2, edge_loss="forfeit")
    with pytest.raises(EdgeFull):  # within the wait: the battle waits, unbooked
        _open(source)
    time.sleep(0.25)
    guard = _open(source)
    assert guard.fatal == SideStatus.DISCONNECT
    assert "answered busy" in guard.stats.detail
    assert _open(source).fatal == SideStatus.DISCONNECT
    assert edge.opens == 3  # each battle asks once more: the edge may have room again


def test_an_untrusted_edge_busy_past_the_wait_voids_the_battle_under_void():
    source, _ = _source(False, edge_wait=0.0)
    with pytest.raises(InfrastructureError, match=r"answered busy.*voided"):
        _open(source)


def test_a_trusted_edge_busy_is_waited_for_without_bound():
    source, _ = _source(True, edge_wait=0.0, edge_loss="forfeit")
    for _ in range(3):
        with pytest.raises(EdgeFull):
            _open(source)


def test_without_a_word_on_trust_an_edge_on_another_host_is_not_trusted():
    edge = _BusyEdge()
    source = EdgeSource({"red": edge}, AGENTS / "candidates.json")  # type: ignore[dict-item]
    assert source.trusted("red") is False
