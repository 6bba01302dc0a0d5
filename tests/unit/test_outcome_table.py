"""The outcome table (edge.contract.outcomes.OUTCOMES): a row for every error code and everything
the center sees, the void rule of trusted and untrusted edges, the center's reactions read from it,
and a new status (a CRASH apart from ERROR) made of an enum member and table cells reaching every
consumer."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from center.errors import EdgeDown, EdgeRemoteError, SideError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.edge_source import EdgeSource
from center.evaluation.playing.in_process import failed_side
from center.evaluation.schedule import ScheduledBattle
from edge.contract import outcomes
from edge.contract.outcomes import OUTCOMES, Outcome, Seen, SideStatus, Void, voided
from edge.wire.messages import ERROR_CODES, ErrorCode

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "tests" / "agents"
BATTLE = ScheduledBattle(
    "good_random-vs-good_random_2-0000", "good_random", "good_random_2", 1, ("", ""), 0
)


def test_every_error_code_and_everything_the_center_sees_has_a_row():
    assert set(OUTCOMES) == {*ErrorCode, *Seen}
    assert set(ERROR_CODES) == set(ErrorCode)
    assert outcomes.outcome_of("a code from the future") == OUTCOMES[ErrorCode.USER_ERROR]


@pytest.mark.parametrize(
    ("void", "trusted", "edge_loss", "expected"),
    [
        (Void.NEVER, True, "void", False),
        (Void.LOSS, True, "void", True),
        (Void.LOSS, False, "void", False),  # pulling the plug voids nothing
        (Void.LOSS, True, "forfeit", False),
        (Void.POLICY, False, "void", True),
        (Void.POLICY, False, "forfeit", False),
        (Void.ALWAYS, False, "forfeit", True),
    ],
)
def test_when_an_outcome_voids(void, trusted, edge_loss, expected):
    row = Outcome(SideStatus.DISCONNECT, ends_battle=True, void=void)
    assert voided(row, trusted=trusted, edge_loss=edge_loss) is expected


def test_the_pinned_rows():
    # What docs/results.md, "What a failure books", promises participants.
    rows = {
        cause.value: (row.status.value, row.ends_battle, row.void.value, row.waits)
        for cause, row in OUTCOMES.items()
    }
    assert rows["user_error"] == ("ERROR", True, "never", False)
    assert rows["worker_died"] == ("ERROR", True, "never", False)
    assert rows["timeout"] == rows["overran"] == ("TIMEOUT", False, "never", False)
    assert rows["clock"] == ("TIMEOUT", True, "never", False)
    assert rows["lost"] == rows["unknown_session"] == ("DISCONNECT", True, "loss", False)
    assert rows["busy"] == ("ERROR", True, "never", True)
    assert rows["stalled"] == ("DISCONNECT", True, "policy", False)
    assert rows["bad_reply"] == ("ERROR", True, "never", False)  # an edge's bad reply: its side's
    assert rows["unfollowed"][2] == "always"


def test_the_docs_table_lists_every_row():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    table = text[text.index("| cause | books | ends the battle | voided |") :]
    table = table[: table.index("\n\n")]
    listed = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        listed[cells[0].split("`")[0]] = (cells[1].strip("`"), cells[2], cells[3].strip("`"))
    assert listed == {
        cause.value: (row.status.value, "yes" if row.ends_battle else "no", row.void.value)
        for cause, row in OUTCOMES.items()
    }


# --- the center reads it ---------------------------------------------------------------------------


def test_the_guard_books_what_the_row_says(monkeypatch: pytest.MonkeyPatch):
    lost = Outcome(SideStatus.DISCONNECT, ends_battle=True, void=Void.LOSS)
    monkeypatch.setitem(OUTCOMES, ErrorCode.USER_ERROR, lost)  # type: ignore[index]
    for trusted in (True, False):
        guard = failed_side("m", Budget(), SideError(ErrorCode.USER_ERROR, "x"), trusted=trusted)
        assert guard.fatal is SideStatus.DISCONNECT
        assert guard.voids("void") is trusted  # an untrusted edge's loss is booked
        assert not guard.voids("forfeit")


class _Edge:
    """What EdgeSource uses of an EdgeClient, for an edge that answers every call with ``code``."""

    lost_at = None
    connected = True

    def __init__(self, code: str, address: str) -> None:
        self.code, self.address = code, address

    def call(self, body: object, **kwargs: object) -> object:
        raise EdgeRemoteError("Refused", "no", code=self.code)

    def ping(self, timeout: float = 2.0) -> bool:
        return False

    def close(self) -> None:
        pass


def _open(code: str, *, trusted: bool, edge_loss: str = "void"):
    edge = _Edge(code, "tcp://192.0.2.11:51010")
    source = EdgeSource(
        {"blue": edge, "red": edge},  # type: ignore[dict-item]
        AGENTS / "candidates.json",
        trusted={"blue": trusted, "red": trusted},
        edge_loss=edge_loss,  # type: ignore[arg-type]
        edge_wait=0.0,
    )
    return source.open_side("good_random_2", "red", BATTLE, "gen9randombattle", Budget(), "u")


def test_an_edge_that_lost_the_session_at_opening_stops_the_run_only_when_trusted():
    with pytest.raises(EdgeDown, match="red edge down"):
        _open(ErrorCode.UNKNOWN_SESSION, trusted=True)
    guard = _open(ErrorCode.UNKNOWN_SESSION, trusted=False)  # booked, never voided
    assert guard.fatal is SideStatus.DISCONNECT and not guard.voids("void")


def test_an_opening_waits_only_where_the_row_says(monkeypatch: pytest.MonkeyPatch):
    row = OUTCOMES[ErrorCode.BUSY]
    monkeypatch.setitem(OUTCOMES, ErrorCode.BUSY, dataclasses.replace(row, waits=False))  # type: ignore[index]
    guard = _open(ErrorCode.BUSY, trusted=True)  # no wait: booked as its status
    assert guard.fatal is SideStatus.ERROR


# --- a new status: an enum member and table cells -------------------------------------------------

_NEW_STATUS = """
import sys, types
from pathlib import Path

path = Path("edge/contract/outcomes.py")
source = path.read_text()
# Typical change 1: CRASH apart from ERROR, as a developer would write it.
source = source.replace('    DISCONNECT = "DISCONNECT"\\n',
                        '    DISCONNECT = "DISCONNECT"\\n    CRASH = "CRASH"\\n', 1)
row = ('    SideStatus.CRASH: SideStatusSpec(severity=5, failure=True, short="CR", '
       'failure_type="Crash", forfeit_reason=EndReason.ERROR, tone="fail"),\\n}\\n')
head, sep, tail = source.partition("\\n}\\n")
source = head + "\\n" + row + tail
source = source.replace(
    "ErrorCode.WORKER_DIED: _ERROR,",
    "ErrorCode.WORKER_DIED: Outcome(SideStatus.CRASH, ends_battle=True),")
module = types.ModuleType("edge.contract.outcomes")
module.__file__ = str(path)
sys.modules[module.__name__] = module
exec(compile(source, str(path), "exec"), module.__dict__)

from center.errors import SideError
from center.evaluation.playing import battle_loop
from center.evaluation.recording.battles_csv import ResultsWriter, load_records
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.in_process import failed_side
from center.evaluation.playing.preflight import failure_summary
from center.evaluation.records import BattleRecord, SideRecord
from center.evaluation.playing.side_stats import SideStats
from center.evaluation.judging.standings import compute_standings
from center.evaluation.judging.standings_output import format_standings, write_standings
from center.report import write_report
from center.season.store import charged
from edge.contract.outcomes import SideStatus
from edge.wire.messages import ErrorCode

log_dir = Path(sys.argv[1])
crash = SideStatus("CRASH")
guard = failed_side("m", Budget(), SideError(ErrorCode.WORKER_DIED, "killed by signal 11"))
assert guard.fatal is crash, guard.fatal
assert guard.stats.error_line.startswith("Crash: setting up m"), guard.stats.error_line
assert battle_loop.forfeit_reason(guard) == "error"
stats = SideStats()
stats.note(SideStatus.DISCONNECT)
stats.note(crash)
assert stats.status is crash
record = BattleRecord(battle_id="a-vs-b-0000", blue="a", red="b", winner="red",
    end_reason="error", turns=3, duration_s=1.0, seed=0, format="gen9randombattle",
    blue_side=SideRecord(crash, error=guard.stats.error_line), red_side=SideRecord(SideStatus.OK))
with ResultsWriter(log_dir) as writer:
    writer.write(record)
assert load_records(log_dir)[0].blue_side.status is crash
standings = compute_standings([record])
assert next(c for c in standings.candidates if c.id == "a").statuses["CRASH"] == 1
assert " CR " in format_standings(standings).splitlines()[0] + " "
write_standings([record], log_dir)
assert "status_crash" in (log_dir / "standings.csv").read_text()
assert failure_summary([record])[1].startswith("  a: 1 CRASH;")
html = write_report(log_dir).read_text(encoding="utf-8")
assert '<th class="num">CRASH</th>' in html
assert charged(record, "blue") and not charged(record, "red")
print("every consumer follows")
"""


def test_a_new_status_is_an_enum_member_and_table_cells(tmp_path: Path):
    if "CRASH" in SideStatus.__members__:
        pytest.skip("CRASH is a status now: this rehearsal of adding it has served")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_NEW_STATUS), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "every consumer follows" in done.stdout
