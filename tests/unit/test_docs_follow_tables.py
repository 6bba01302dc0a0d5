"""The numbers and lists the docs repeat from the code's tables say what the tables say: the
status tables and the README's list, the invalid-action reward and its retries, the default
decision budget, the observation's size, the rating methods, the backends, the timers, the
worker limits, the extractors and the messages' fields. A change to a table fails here until its
docs follow."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from center.env.backend import BACKENDS
from center.env.rounds import RewardConfig
from center.evaluation.judging.rating_methods import RATING_METHODS
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.timers import TIMERS
from edge.contract.legality import MAX_INVALID_RETRIES
from edge.contract.outcomes import SIDE_STATUSES
from edge.maple.features import registered_extractors
from edge.maple.state_observer import StateObserver
from edge.options import OPTION, option_fields
from edge.service.sandbox.limits import Limits, size_text
from edge.wire.messages import MESSAGES

ROOT = Path(__file__).resolve().parents[2]


def _read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


@pytest.mark.parametrize("doc", ["docs/contract.md", "docs/running.md"])
def test_status_tables_list_the_status_table(doc: str):
    text = _read(doc)
    table = text[text.index("| status | cause | effect |") :]
    table = table[: table.index("\n\n")]
    listed = re.findall(r"^\| `([A-Z]+)` \|", table, re.MULTILINE)
    assert listed == [s.value for s in SIDE_STATUSES]


def test_the_readme_names_the_statuses():
    listed = re.search(
        r"is a status \(((?:`[A-Z]+`(?:, )?)+)\)", _read("README.md").replace("\n  ", " ")
    )
    assert listed, "README.md no longer lists the statuses: update this test"
    assert re.findall(r"`([A-Z]+)`", listed.group(1)) == [s.value for s in SIDE_STATUSES]


@pytest.mark.parametrize(
    "doc", ["docs/contract.md", "docs/running.md", "docs/environment.md", "README.md"]
)
def test_the_invalid_action_reward_and_its_retries(doc: str):
    text = _read(doc)
    rewards = re.findall(r"[−-](0\.\d+)[^|\n]{0,40}(?:request|illegal)", text)
    rewards += re.findall(r"(?:illegal|invalid) action[^|\n]{0,12}[−-](0\.\d+)", text)
    for found in rewards:
        assert -_number(found) == RewardConfig().invalid, doc
    for found in re.findall(r"after (\d+) retries", text):
        assert int(found) == MAX_INVALID_RETRIES, doc
    if doc != "README.md":
        assert rewards, f"{doc} no longer states the invalid-action reward: update this test"


def test_the_default_budget_in_the_docs():
    budget = Budget()
    contract, running = _read("docs/contract.md"), _read("docs/running.md")
    for text in (contract, running):
        free = re.search(r"`--decision-time` seconds \(default (\d+(?:\.\d+)?)\)", text)
        bank = re.search(r"`--bank` seconds[^(]*\(default (\d+(?:\.\d+)?)\)", text)
        assert free and _number(free.group(1)) == budget.decision_time
        assert bank and _number(bank.group(1)) == budget.bank
    cap = re.search(r"--call-cap\)` \(default (\d+(?:\.\d+)?) s\)", contract)
    assert cap and _number(cap.group(1)) == budget.call_cap
    summary = re.search(
        r"\((\d+) s free per decision, a (\d+) s bank, (\d+) s per call\)", contract
    )
    assert summary, "contract.md's summary of the defaults moved: update this test"
    assert tuple(map(float, summary.groups())) == (
        budget.decision_time,
        budget.bank,
        budget.call_cap,
    )


@pytest.mark.parametrize("doc", ["README.md", "docs/environment.md", "docs/observation.md"])
def test_the_observation_size_in_the_docs(doc: str):
    size = StateObserver().get_observation_dimension()
    stated = re.findall(
        r"`Box` of (\d+)|dimension is \*\*(\d+)\*\*|shape \((\d+),\)|dimension\(\) +# (\d+)"
        r"|, \((\d+),\), float32\)|vector are unchanged \((\d+)\)",
        _read(doc),
    )
    assert stated, f"{doc} no longer states the observation size: update this test"
    assert {int(next(n for n in groups if n)) for groups in stated} == {size}


def test_the_rating_methods_table_in_results_md():
    text = _read("docs/results.md")
    table = text[text.index("| key | method |") :]
    keys = re.findall(r"^\| `([a-z_]+)` \|", table[: table.index("\n\n")], re.MULTILINE)
    assert keys == list(RATING_METHODS)


def test_the_backends_table_in_environment_md():
    text = _read("docs/environment.md")
    table = "| |" + text[text.index("## Backends") :].split("\n| |", 1)[1].split("\n\n", 1)[0]
    header, _, *rows = table.splitlines()
    assert set(re.findall(r"`(\w+)`", header)) == set(BACKENDS), header  # a column each
    for row in rows:  # and a cell in each row
        assert row.count(" | ") == len(BACKENDS), row


def _seconds(cell: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", cell)]


def test_the_timers_table_in_running_md():
    text = _read("docs/running.md")
    table = text[text.index("| `--timer` | free a decision |") :]
    rows = table[: table.index("\n\n")].splitlines()[2:]
    names = [re.match(r"\| `(\w+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert names == list(TIMERS)
    for row, name in zip(rows, names, strict=True):
        budget = TIMERS[name].budget
        free, bank, turn, most, clock = (cell.strip() for cell in row.split("|")[2:7])
        assert _seconds(free) == [budget.decision_time], row
        assert _seconds(bank) == [budget.bank] + ([budget.grace] if budget.grace else []), row
        assert _seconds(turn) == ([budget.increment] if budget.increment else []), row
        if budget.turn_time is None:
            assert _seconds(most) == [budget.call_cap] and "a call" in most, row
        else:
            first = budget.turn_cap(True)
            expected = [budget.turn_time] + ([first] if first != budget.turn_time else [])
            assert _seconds(most) == expected, row
        assert _seconds(clock) == [budget.battle_time], row


def test_the_worker_limits_in_running_md():
    """The sandbox paragraph's limits are every option of ``Limits``, each with its default."""
    text = _read("docs/running.md")
    stated = dict(re.findall(r"`(--[a-z-]+-limit)` (\d+(?: [GMK]iB| s)?)[,)]", text))
    expected = {}
    for f in option_fields(Limits):
        unit, default = f.metadata["unit"], getattr(Limits(), f.name)
        if unit == "size":
            value = re.sub(r"(\d+)([GMK]iB)", r"\1 \2", size_text(default))
        elif unit == "seconds":
            value = f"{default} s"
        else:
            value = str(default)
        expected[f.metadata[OPTION].flags[0]] = value
    assert stated == expected


def test_the_extractor_table_in_observation_md():
    text = _read("docs/observation.md")
    table = text[text.index("| extractor | parameters | size | value |") :]
    names = re.findall(r"^\| `(\w+)` \|", table[: table.index("\n\n")], re.MULTILINE)
    assert sorted(names) == sorted(registered_extractors())


def test_the_field_types_in_protocol_md_name_every_body_field():
    """Each message's bullet under "Field types" names every field of its request and reply."""
    text = _read("docs/protocol.md")
    section = text[text.index("Field types (") : text.index("### Values")]
    bullets = dict(re.findall(r"^- \*\*(\w+)\*\*(.*?)(?=^- \*\*|\Z)", section, re.M | re.S))
    for request_type, spec in MESSAGES.items():
        name = request_type.removesuffix("_request")
        assert name in bullets, f"protocol.md's field types have no bullet for {name}"
        for body in (spec.request_body, spec.reply_body):
            for field in msgspec.structs.fields(body):
                assert f"`{field.encode_name}" in bullets[name], f"{name}: {field.encode_name}"
