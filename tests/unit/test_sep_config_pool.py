"""sep_config.json sides as lists of edges (battle runners use one edge of each list)."""

from __future__ import annotations

import json

import pytest

from center.scale.spec import EdgeAddress, SourceSpec
from edge.errors import SepConfigError
from edge.wire.sep_config import load_sep_config


def _config(tmp_path, data):
    path = tmp_path / "sep_config.json"
    path.write_text(json.dumps(data))
    return load_sep_config(path)


def test_a_side_may_list_edges_and_each_one_reads_as_a_single_edge(tmp_path):
    config = _config(
        tmp_path,
        {
            "blue": [{"host": "10.0.0.1", "port": 51000}, {"host": "10.0.0.2", "port": 51001}],
            "red": {"host": "10.0.0.3", "port": 51010},
        },
    )
    assert config.edge_count("blue") == 2 and config.edge_count("red") == 1
    assert config.edge("blue", 1).endpoint("blue") == "tcp://10.0.0.2:51001"
    assert config.edge("red", 0).endpoint("red") == "tcp://10.0.0.3:51010"
    with pytest.raises(SepConfigError, match="blue lists 2 edges where one is needed"):
        config.address("blue")  # what sep_edge reads: it serves one edge


def test_an_empty_list_or_a_bad_entry_is_one_clear_error(tmp_path):
    with pytest.raises(SepConfigError, match="empty list"):
        _config(tmp_path, {"blue": [], "red": {"host": "h", "port": 1}}).edge("blue", 0)
    bad = _config(tmp_path, {"blue": [{"host": "h", "port": "x"}], "red": {"host": "h", "port": 1}})
    with pytest.raises(SepConfigError, match=r"blue\.port must be an integer"):
        bad.edge("blue", 0).endpoint("blue")


def test_runners_spread_evenly_over_each_sides_edges():
    pool = SourceSpec(
        "candidates.json",
        {
            "blue": tuple(EdgeAddress(f"tcp://b{i}:1") for i in range(2)),
            "red": tuple(EdgeAddress(f"tcp://r{i}:1") for i in range(3)),
        },
    )
    used = [(pool.edge_for("blue", r).endpoint, pool.edge_for("red", r).endpoint) for r in range(6)]
    assert [blue for blue, _ in used].count("tcp://b0:1") == 3
    assert sorted({red for _, red in used}) == ["tcp://r0:1", "tcp://r1:1", "tcp://r2:1"]
    assert all([red for _, red in used].count(r) == 2 for r in ("tcp://r0:1", "tcp://r1:1"))
