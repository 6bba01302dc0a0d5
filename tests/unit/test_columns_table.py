"""battles.csv's columns come from the record's fields: a new field of ``SideRecord`` or
``BattleRecord`` is a new column (after the placed ones) that is written and read back, and
docs/results.md names every column."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from center.evaluation import records

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "center" / "evaluation" / "records.py"


def _records_with(anchor: str, field: str) -> ModuleType:
    """records.py as it would be with ``field`` declared after ``anchor`` (a real module)."""
    text = SOURCE.read_text(encoding="utf-8")
    assert anchor in text
    spec = importlib.util.spec_from_loader("records_with_a_new_field", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's names through sys.modules
    try:
        exec(compile(text.replace(anchor, anchor + field, 1), str(SOURCE), "exec"), module.__dict__)
    finally:
        del sys.modules[spec.name]
    return module


def _last_side_field() -> str:
    """The declaration line of SideRecord's last field: a new field goes after it."""
    last = dataclasses.fields(records.SideRecord)[-1].name
    lines = SOURCE.read_text(encoding="utf-8").splitlines(keepends=True)
    (line,) = [line for line in lines if line.startswith(f"    {last}: ")]
    return line


def test_every_field_is_a_column_once():
    shared = [f.name for f in dataclasses.fields(records.BattleRecord)]
    per_side = [f.name for f in dataclasses.fields(records.SideRecord)]
    expected = {n for n in shared if n not in ("blue_side", "red_side")}
    expected |= {f"{side}_{n}" for side in records.SIDE_NAMES for n in per_side}
    assert len(records.COLUMNS) == len(set(records.COLUMNS))
    assert set(records.COLUMNS) == expected


def test_a_new_side_field_is_a_column_pair_written_and_read():
    module = _records_with(_last_side_field(), "    new_count: int = 0\n")
    assert module.COLUMNS[: len(records.COLUMNS)] == records.COLUMNS
    assert module.COLUMNS[len(records.COLUMNS) :] == ("blue_new_count", "red_new_count")
    side = module.SideRecord(status="OK", new_count=7)
    record = module.BattleRecord(
        battle_id="b1", blue="a", red="b", winner="blue", end_reason="win", turns=3,
        duration_s=1.0, seed=5, format="gen9randombattle", blue_side=side, red_side=side,
    )  # fmt: skip
    row = dict(zip(module.COLUMNS, record.to_row(), strict=True))
    assert row["blue_new_count"] == "7"
    assert module.BattleRecord.from_row(row) == record


def test_a_field_battles_csv_cannot_read_is_refused_at_once():
    with pytest.raises(TypeError, match="cannot read a bytes"):
        _records_with(_last_side_field(), "    raw: bytes = b''\n")


def test_docs_results_md_names_every_column():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    section = text[text.index("The `battles.csv` columns") :]
    table = section[section.index("| column |") :]
    named = re.findall(r"^\| `([A-Za-z_]+)` \|", table[: table.index("\n\n")], re.MULTILINE)
    side_fields = [f.name for f in dataclasses.fields(records.SideRecord)]
    documented = [c for c in named if not c.startswith("SIDE_")]
    assert documented == [c for c in records.COLUMNS if c.partition("_")[2] not in side_fields]
    assert [c.removeprefix("SIDE_") for c in named if c.startswith("SIDE_")] == side_fields
