"""The per-worker limits are one table: every field of ``Limits`` is applied in a real process and
reported at start-up, and docs/sandbox.md's sample report and limits table say what the edge
says."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edge.service.sandbox.limits import Limits

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, resource, sys
from edge.service.sandbox.limits import Limits
limits = Limits(**json.loads(sys.argv[1]))
limits.apply(own_user=sys.argv[2] == "1")
names = json.loads(sys.argv[3])
print(json.dumps({k: resource.getrlimit(getattr(resource, v))[0] for k, v in names.items()}))
"""

# What each limit must set, stated here rather than read from the field's metadata, so that a
# limit applied through the wrong rlimit fails; a new field of Limits needs its line here.
RLIMITS = {
    "memory": "RLIMIT_AS",
    "cpu_seconds": "RLIMIT_CPU",
    "file_size": "RLIMIT_FSIZE",
    "open_files": "RLIMIT_NOFILE",
    "processes": "RLIMIT_NPROC",
}

# Half of each default: a value the process had not before (the defaults are not the host's).
SMALL = {f.name: getattr(Limits(), f.name) // 2 for f in dataclasses.fields(Limits)}


def _applied(own_user: bool) -> dict[str, int]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            json.dumps(SMALL),
            "1" if own_user else "0",
            json.dumps({**RLIMITS, "core": "RLIMIT_CORE"}),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def test_every_limit_says_which_rlimit_it_sets():
    assert set(RLIMITS) == {f.name for f in dataclasses.fields(Limits)}


@pytest.mark.parametrize("own_user", [True, False])
def test_every_limit_is_applied_to_a_real_process(own_user: bool):
    applied = _applied(own_user)
    assert applied["core"] == 0
    for field in dataclasses.fields(Limits):
        name = field.name
        if field.metadata["own_user"] and not own_user:
            assert applied[name] != SMALL[name], name  # a per-user count: only with its own user
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


def test_docs_limits_table_has_a_row_per_limit_with_its_default():
    text = (ROOT / "docs" / "sandbox.md").read_text(encoding="utf-8")
    table = text.split("### Limits (per worker)", 1)[1].split("\n###", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")]
    for field, line in zip(dataclasses.fields(Limits), Limits().lines(), strict=False):
        default = line.partition(": ")[2].split(" per worker")[0].split(" (with")[0]
        (row,) = [row for row in rows if f"({RLIMITS[field.name]}" in row[0]]
        assert row[1].startswith(default), (field.name, row[1], default)
