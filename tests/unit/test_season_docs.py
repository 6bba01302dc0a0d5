"""docs/seasons.md's settings table is SeasonSettings: every key, its default, nothing else."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from center.season.settings import SeasonSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "seasons.md"


def test_the_settings_table_lists_every_setting_with_its_default() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Settings (season.json)", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| `([^`]*)` \|", section, flags=re.MULTILINE))
    expected = {
        f.name: json.dumps(list(f.default) if isinstance(f.default, tuple) else f.default)
        for f in dataclasses.fields(SeasonSettings)
    }
    assert rows == expected
