"""Showdown's request decodes once into its Struct: a real one captured from Showdown, one with a
field this project does not know, and a malformed one (a clear error)."""

from __future__ import annotations

import msgspec
import orjson
import pytest

from edge.contract.showdown_request import (
    RequestPokemon,
    RequestSide,
    ShowdownRequest,
    decode_request,
    request_of,
)
from tests.fixtures.replay import all_recordings, replay_frames


def _captured() -> list[str]:
    """Every request JSON of the recorded battles (captured from Showdown)."""
    texts = []
    for recording in all_recordings():
        for frames in recording.frames.values():
            for frame in frames:
                for line in frame.split("\n"):
                    if line.startswith("|request|") and len(line) > len("|request|"):
                        texts.append(line[len("|request|") :])
    return texts


def test_every_captured_request_decodes_and_reads_as_its_json():
    texts = _captured()
    assert len(texts) > 50
    for text in texts:
        request = decode_request(text)
        raw = orjson.loads(text)
        assert request.team_preview == bool(raw.get("teamPreview"))
        assert request.force_switch == (raw.get("forceSwitch") or [])
        assert [p.ident for p in request.party] == [p["ident"] for p in raw["side"]["pokemon"]]
        assert request == msgspec.convert(raw, ShowdownRequest)


def test_a_battles_request_is_converted_once_per_request():
    recording = all_recordings()[0]
    username = recording.usernames[0]
    frames = recording.frames[username]
    for i, battle in enumerate(replay_frames(frames, username)):
        if "|request|" in frames[i] and battle.last_request:
            first = request_of(battle)
            assert first is not None and request_of(battle) is first
            return
    pytest.fail("no request in the recording")


def test_an_unknown_field_is_ignored():
    request = decode_request(
        '{"wait": true, "side": {"name": "a", "id": "p1", "pokemon": []}, "newField": [1]}'
    )
    assert request.wait and request.party == []


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('{"side": {"pokemon": [{"ident": 7}]}}', "$.side.pokemon[0].ident"),
        ('{"forceSwitch": "yes"}', "$.forceSwitch"),
    ],
)
def test_a_malformed_request_names_its_field(text, names):
    with pytest.raises(
        msgspec.ValidationError, match=names.replace("[", r"\[").replace("$", r"\$")
    ):
        decode_request(text)


def test_text_that_is_not_json_is_refused():
    with pytest.raises(msgspec.DecodeError):
        decode_request("{not json")


def test_derived_values_are_set_however_the_request_is_made_and_never_sent():
    raw = {
        "side": {
            "pokemon": [{"ident": "p1: Rotom", "details": "Rotom-Wash, L85", "condition": "0 fnt"}]
        },
        "forceSwitch": [True, False],
    }
    built = ShowdownRequest(
        side=RequestSide(pokemon=[RequestPokemon("p1: Rotom", "Rotom-Wash, L85", "0 fnt")]),
        force_switch=[True, False],
    )
    made = [decode_request(orjson.dumps(raw)), msgspec.convert(raw, ShowdownRequest), built]
    for request in [*made, msgspec.structs.replace(built, rqid=3)]:
        mon = request.party[0]
        assert (mon.name, mon.species, mon.fainted) == ("Rotom", "rotomwash", True)
        assert request.party is request.side.pokemon and request.slots == 2
    plain = msgspec.to_builtins(built)
    assert not {"party", "slots"} & set(plain)
    assert not {"name", "species", "fainted"} & set(plain["side"]["pokemon"][0])
