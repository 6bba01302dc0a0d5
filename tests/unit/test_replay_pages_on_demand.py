"""A battle's replay pages are built from its gzipped log when asked, never for every battle: the
report links those that exist and says how to build the others."""

from __future__ import annotations

import gzip

import pytest
from click.testing import CliRunner

from center.commands.report import sep_report
from center.errors import ConfigError
from center.evaluation.records import log_relpath
from center.report.build import battle_pages, write_report
from tests.unit.test_report_pages import _log_dir


def _gzipped_log_dir(tmp_path):
    """The LOG_DIR of test_report_pages with its log stored as a battle now stores it."""
    log_dir, record = _log_dir(tmp_path)
    log = log_dir / log_relpath(record.battle_id)
    log.with_name(log.name + ".gz").write_bytes(gzip.compress(log.read_bytes()))
    log.unlink()
    return log_dir, record


def test_the_report_alone_builds_no_replay_page_and_says_how(tmp_path):
    log_dir, record = _gzipped_log_dir(tmp_path)
    report = write_report(log_dir).read_text(encoding="utf-8")
    assert battle_pages(log_dir, record.battle_id) == []
    assert 'class="replay"' not in report and 'class="showdown"' not in report
    assert 'id="pages-hint"' in report and "sep_report LOG_DIR --pages" in report
    assert f'href="logs/{record.battle_id}.log.gz"' in report


def test_a_battle_asked_for_gets_both_pages_from_its_gzipped_log(tmp_path):
    log_dir, record = _gzipped_log_dir(tmp_path)
    report = write_report(log_dir, battles=[record.battle_id]).read_text(encoding="utf-8")
    offline, showdown = battle_pages(log_dir, record.battle_id)
    assert offline.name.endswith(".offline.html") and showdown.name.endswith(".html")
    page = offline.read_text(encoding="utf-8")
    assert page.count('<section class="panel step"') == record.turns + 1
    assert "|win|" in showdown.read_text(encoding="utf-8")
    assert 'class="replay"' in report and 'id="pages-hint"' not in report
    # Pages that exist are kept on the next report, asked for or not.
    write_report(log_dir)
    assert battle_pages(log_dir, record.battle_id) == [offline, showdown]


def test_an_unknown_battle_is_one_clear_error(tmp_path):
    log_dir, _ = _gzipped_log_dir(tmp_path)
    with pytest.raises(ConfigError, match=r"no battle 'alpha-vs-beta-000'.*did you mean"):
        write_report(log_dir, battles=["alpha-vs-beta-000"])


def test_sep_report_battle_prints_the_pages_and_refuses_an_unknown_battle(tmp_path):
    log_dir, record = _gzipped_log_dir(tmp_path)
    built = CliRunner().invoke(sep_report, [str(log_dir), "--battle", record.battle_id])
    assert built.exit_code == 0, built.output
    assert built.output.splitlines() == [
        str(log_dir / "report.html"),
        *(str(page) for page in battle_pages(log_dir, record.battle_id)),
    ]
    assert len(built.output.splitlines()) == 3
    unknown = CliRunner().invoke(sep_report, [str(log_dir), "--battle", "nope"])
    assert unknown.exit_code == 2
    assert unknown.output.startswith("error: no battle 'nope' in ")
    assert len(unknown.output.splitlines()) == 1
