"""Small helpers shared by the integration tests."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "data"


def random_legal(
    infos: dict[str, dict[str, Any]], agents: list[str], rng: np.random.Generator
) -> dict[str, int]:
    """A random legal action for every agent that needs one (0 for the others)."""
    actions = {}
    for name in agents:
        mask = infos[name]["action_mask"]
        legal = np.flatnonzero(mask)
        actions[name] = int(rng.choice(legal)) if legal.size else 0
    return actions


def team(name: str) -> str:
    """A team file from tests/data."""
    return (DATA / name).read_text()


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...); None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def parent_of(pid: int) -> int | None:
    """The parent of ``pid``; None when it is gone."""
    fields = proc_stat(pid)
    return int(fields[1]) if fields is not None else None


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(IndexError, ValueError):
                if parent_of(int(entry.name)) == pid:
                    found.append(int(entry.name))
    return found
