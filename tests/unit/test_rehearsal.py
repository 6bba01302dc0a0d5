"""The zygote's rehearsal (edge.service.forking.rehearsal): the edge's zygote plays every
recording before it forks; each goes through a worker's request handling, encoded and decoded as
on the wire, to its end, with a legal decision at every request that asks for one; a rehearsal
that cannot run is a warning, never an error of the zygote."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from edge.checker.samples import SAMPLES_DIR, decision_points, load_sample_battles
from edge.service.forking import rehearsal


@pytest.mark.parametrize("battle_format", rehearsal.REHEARSED)
def test_a_rehearsed_battle_decides_at_every_request_without_an_error(battle_format):
    sample = load_sample_battles(SAMPLES_DIR / f"{battle_format}.json.gz")[0]
    expected = [point.battle.turn for point in decision_points(sample)]
    *decisions, end = rehearsal.play(battle_format)
    assert len(decisions) == len(expected) > 5
    for decision in decisions:
        assert decision.step_error is None and decision.deploy_error is None
        assert (
            decision.stepped and decision.order and decision.order.startswith(("/team", "/choose"))
        )
    # The battle's end: the policy's last step, nothing deployed.
    assert end.stepped and end.step_error is None and end.order is None


def test_a_rehearsal_that_fails_is_logged_and_the_others_still_run(monkeypatch, caplog):
    played = []
    real_play = rehearsal.play

    def play(battle_format: str) -> list:
        played.append(battle_format)
        return real_play(battle_format)

    monkeypatch.setattr(rehearsal, "REHEARSED", ("gen9nosuchformat", "gen9randombattle"))
    monkeypatch.setattr(rehearsal, "play", play)
    with caplog.at_level(logging.WARNING, logger=rehearsal.__name__):
        rehearsal.rehearse()
    assert played == ["gen9nosuchformat", "gen9randombattle"]
    assert [r.getMessage() for r in caplog.records] == [
        "no rehearsal of gen9nosuchformat in the zygote"
    ]


def test_the_zygote_rehearses_every_recording_before_it_forks():
    # In a process of its own: the zygote's preload stops poke-env's loop thread for good.
    script = (
        "import os, sys\n"
        "from edge.service.forking import rehearsal, zygote\n"
        "played = []\n"
        "real_play = rehearsal.play\n"
        "rehearsal.play = lambda f: real_play(f) and played.append(f)\n"
        "zygote._preload()\n"
        "print(' '.join(played), flush=True)\n"
        "os._exit(0)\n"  # poke-env's exit hook would wait for the loop the preload stopped
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == list(rehearsal.REHEARSED)
