"""The per-worker limits are one table: every field of ``Limits`` is applied in a real process and
reported at start-up, and docs/sandbox.md's sample report says what the edge says."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edge.service.sandbox import Limits

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, resource, sys
from edge.service.sandbox import Limits
limits = Limits(**json.loads(sys.argv[1]))
limits.apply(own_user=sys.argv[2] == "1")
names = {"memory": "RLIMIT_AS", "cpu_seconds": "RLIMIT_CPU", "file_size": "RLIMIT_FSIZE",
         "open_files": "RLIMIT_NOFILE", "processes": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}
print(json.dumps({k: resource.getrlimit(getattr(resource, v))[0] for k, v in names.items()}))
"""

SMALL = {
    "memory": 2**33,
    "cpu_seconds": 500,
    "file_size": 2**20,
    "open_files": 200,
    "processes": 300,
}


def _applied(own_user: bool) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(SMALL), "1" if own_user else "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("own_user", [True, False])
def test_every_limit_is_applied_to_a_real_process(own_user: bool):
    applied = _applied(own_user)
    assert applied["core"] == 0
    for name in SMALL:
        if name == "processes" and not own_user:
            assert applied[name] != SMALL[name]  # a per-user count: only with a user of its own
        else:
            assert applied[name] == SMALL[name], name


def test_every_limit_has_a_start_up_line():
    lines = Limits().lines()
    labels = [f.metadata["label"] for f in dataclasses.fields(Limits)]
    assert [line.partition(":")[0] for line in lines] == [*labels, "core dumps"]
    assert "processes and threads: 256" in lines[labels.index("processes and threads")]
    assert Limits(memory=0).lines()[0] == "memory (address space): none"


def test_docs_sample_report_lists_the_edges_limit_lines():
    text = (ROOT / "docs" / "sandbox.md").read_text(encoding="utf-8")
    sample = re.findall(r"^  worker limit, (.*)$", text, re.MULTILINE)
    assert sample == Limits().lines()
