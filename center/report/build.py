"""Writing a LOG_DIR's report: ``report.html``, and the replay pages of the battles asked for.

A battle's replay pages (the offline one, ``replays/ID.offline.html``, and Showdown's,
``replays/ID.html``) are built from its compressed log when asked (``pages``: every battle,
``battles``: these), not for every battle: they would be most of a LOG_DIR (their size:
docs/performance.md, "LOG_DIR size"). Pages that exist are kept: an offline page older than what it is made
of is rebuilt, so that writing the report of a long run stays quick. Every file is written to a
temporary name and renamed, so a browser (or a second writer) never sees half a page.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping
from importlib import resources
from pathlib import Path

from center.errors import ConfigError
from center.evaluation.playing.match import PLAYERS_SUFFIX
from center.evaluation.records import BattleRecord, replay_relpath
from center.files import existing, write_atomically
from center.report.pages import render_replay, render_report
from center.report.protocol import read_battle
from center.report.showdown_renewal import renew_showdown_page
from center.report.sources import SIDES, LogDir, read_log_dir
from edge.contract.suggest import did_you_mean
from edge.visible_text import visible_controls

logger = logging.getLogger(__name__)

REPORT_HTML = "report.html"
OFFLINE_SUFFIX = ".offline.html"


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # A page holds user text (names, errors, nicknames): no raw control character for ``cat``.
    write_atomically(path, visible_controls(text))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _package_mtime() -> float:
    """When the templates or this package last changed: older pages are rebuilt."""
    root = resources.files("center.report")
    newest = 0.0
    for folder in ("templates", "static"):
        for item in root.joinpath(folder).iterdir():
            newest = max(newest, _mtime(Path(str(item))))
    modules = ("pages.py", "protocol.py", "narrator.py", "dex.py")
    return max(newest, *(_mtime(Path(str(root / m))) for m in modules))


def _relative(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path, start)).as_posix()


def _replay_page(
    data: LogDir, record: BattleRecord, page: Path, force: bool, newest: float, build: bool
) -> None:
    log_dir = data.path
    log = log_dir / data.log_path(record)
    log = existing(log) or log  # logs/ID.log.gz, or logs/ID.log as older runs keep it
    showdown = log_dir / data.replay_path(record)
    sources = [log, showdown.with_suffix(PLAYERS_SUFFIX)]
    made = _mtime(page)
    if not (build or made) or (not force and made > max(newest, *(_mtime(p) for p in sources))):
        return
    players = data.players.get(record.battle_id, {})
    who = {
        side: {
            "id": getattr(record, side),
            "label": players[side].log_name
            if side in players
            else data.name(getattr(record, side)),
        }
        for side in SIDES
    }
    links = {
        "report": _relative(log_dir / REPORT_HTML, page.parent),
        "showdown": _relative(showdown, page.parent) if showdown.exists() else None,
        "log": _relative(log, page.parent) if log.exists() else None,
    }
    _write_atomically(
        page, render_replay(record, read_battle(log_dir / data.log_path(record)), who, links)
    )


def offline_replay_path(data: LogDir, record: BattleRecord) -> Path:
    """Where a battle's offline replay page goes: beside Showdown's replay."""
    return (data.path / data.replay_path(record)).with_suffix(OFFLINE_SUFFIX)


def battle_pages(log_dir: Path, battle_id: str) -> list[Path]:
    """The replay pages of ``battle_id`` that exist under ``log_dir``: offline, then Showdown's."""
    showdown = log_dir / replay_relpath(battle_id)
    return [p for p in (showdown.with_suffix(OFFLINE_SUFFIX), showdown) if p.exists()]


def write_report(
    log_dir: str | Path,
    *,
    candidates: Path | None = None,
    force: bool = False,
    pages: bool = False,
    battles: Collection[str] = (),
) -> Path:
    """Write ``LOG_DIR/report.html`` and the replay pages asked for; return the report.

    ``pages`` builds every battle's replay pages (offline and Showdown's), ``battles`` those of
    these battle ids (ConfigError for one LOG_DIR does not hold); pages that exist are kept up to
    date either way. ``candidates`` (a candidates.json) gives logNames to battles recorded before
    replays named their players; ``force`` rebuilds every existing or asked-for offline page.
    Works while a run is writing LOG_DIR.
    """
    data = read_log_dir(log_dir, candidates=candidates)
    recorded = {record.battle_id for record in data.records}
    for battle_id in battles:
        if battle_id not in recorded:
            hint = did_you_mean(battle_id, sorted(recorded))
            where = data.path / "battles.csv"
            raise ConfigError(f"no battle {battle_id!r} in {where}{f'; {hint}' if hint else ''}")
    newest = _package_mtime()
    links: dict[str, Mapping[str, str | None]] = {}
    for record in data.records:
        page = offline_replay_path(data, record)
        build = pages or record.battle_id in battles
        try:
            _replay_page(data, record, page, force, newest, build)
        except Exception:  # one odd log must not cost the whole report
            logger.exception("%s: could not write the replay page", record.battle_id)
        try:
            renew_showdown_page(data, record, build=build)
        except Exception:
            logger.exception("%s: could not rewrite its Showdown replay page", record.battle_id)
        showdown = data.replay_path(record)
        stored = existing(data.path / data.log_path(record))
        links[record.battle_id] = {
            "offline": _relative(page, data.path) if page.exists() else None,
            "showdown": showdown if (data.path / showdown).exists() else None,
            "log": _relative(stored, data.path) if stored is not None else None,
        }
    report = data.path / REPORT_HTML
    _write_atomically(report, render_report(data, links))
    return report
