"""The season's HTML pages: the leaderboard, an entry, the queue (jinja2, autoescaped), a battle's
replay (the report's own replay page), and the Content-Security-Policy each is served with.

A page's style and script are inlined from ``static/`` and allowed by their hashes; the script
fetches the page's API document every few seconds and updates the page (``connect-src 'self'``).
Text from the season (names, causes) is escaped by the template engine; the script writes it with
``textContent`` only, so none of it can become markup or script.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import msgspec
from markupsafe import Markup

from center.csp import script_hash_source
from center.evaluation.playing.match import PLAYERS_SUFFIX
from center.evaluation.records import BattleRecord, log_relpath, replay_relpath
from center.report.pages import render_replay
from center.report.protocol import read_battle
from edge.contract.outcomes import SIDE_STATUSES

__all__ = ["REFRESH_S", "page_policy", "render_page", "render_season_replay", "replay_policy"]

REFRESH_S = 3.0
"""Seconds between a page's fetches of its API document."""

_SIDES = ("blue", "red")


@cache
def _static(name: str) -> str:
    return (resources.files("center.season.web") / "static" / name).read_text(encoding="utf-8")


def page_policy() -> str:
    """The policy of the season's own pages: nothing but their inline style and script (by
    hash), and fetches of the same origin (the API)."""
    return (
        "default-src 'none'; "
        f"script-src {script_hash_source(_static('live.js'))}; "
        f"style-src {script_hash_source(_static('style.css'))}; "
        "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


_META_POLICY = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">')


def replay_policy(page: str) -> str:
    """The policy of a replay page: the report's own (its ``<meta>``, the first in its head,
    before any text of the battle), sent as a header too, framing refused."""
    found = _META_POLICY.search(page)
    policy = found.group(1) if found else "default-src 'none'"
    return f"{policy}; frame-ancestors 'none'"


def entry_path(entry: str) -> str:
    """The path of an entry's page (ids may hold '#', '?', '%' or spaces)."""
    return f"/entries/{quote(entry, safe='')}"


def _rating(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _gxe(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.0f} min"


@cache
def environment() -> jinja2.Environment:
    """The pages' templates: autoescaped, strict undefined names."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("center.season.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["inline"] = lambda name: Markup(_static(name))
    env.globals["refresh_ms"] = int(REFRESH_S * 1000)
    env.filters.update(rating=_rating, gxe=_gxe, seconds=_seconds, entry_path=entry_path)
    tones = {status.value: spec.tone for status, spec in SIDE_STATUSES.items()}
    env.globals["tones"] = tones  # the script's too (the body's data-tones)
    env.filters["tone"] = lambda status: tones.get(status, "")
    return env


def render_page(template: str, api: str, doc: msgspec.Struct, **extra: Any) -> str:
    """A page from its template and its API document (``api``: the path its script polls)."""
    plain = msgspec.to_builtins(doc)
    return environment().get_template(template).render(doc=plain, api=api, **extra)


def _players(season_dir: Path, record: BattleRecord, names: Mapping[str, str]) -> dict[str, Any]:
    """Each side's id and logName: the battle's players file, else candidates.json's names."""
    path = (season_dir / (record.replay or replay_relpath(record.battle_id))).with_suffix(
        PLAYERS_SUFFIX
    )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    players = {}
    for side in _SIDES:
        cid = getattr(record, side)
        found = doc.get(side) if isinstance(doc, dict) else None
        label = found.get("logName") if isinstance(found, dict) else None
        players[side] = {"id": cid, "label": str(label or names.get(cid, cid))}
    return players


def render_season_replay(season_dir: Path, record: BattleRecord, names: Mapping[str, str]) -> str:
    """A battle's offline replay page, built from its log by the report's own code (a battle
    without a log gets the page without turns)."""
    log = season_dir / (record.log or log_relpath(record.battle_id))
    battle = read_battle(log)  # logs/ID.log, or its compressed twin
    links = {"report": "/", "showdown": None, "log": None}  # its logs stay with the organizer
    return render_replay(record, battle, _players(season_dir, record, names), links)
