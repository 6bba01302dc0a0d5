"""StateObserver: fixed-length float32 observations inside their Box, from a YAML spec."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import yaml
from poke_env.battle import Battle

from edge.errors import EdgeError, StateSpecError
from edge.maple.battle_view import move_slots, opponent_bench, own_bench
from edge.maple.features import registered_extractors
from edge.maple.state_observer import StateObserver
from edge.maple.state_spec import DEFAULT_SPEC_PATH
from edge.maple.type_chart import TYPE_MATCHUP_LABELS, type_matchup_vec
from tests.fixtures.replay import all_recordings, replay_frames
from tests.fixtures.synthetic_battle import Mon, build_battle

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observation.md"


@pytest.fixture(scope="module")
def observer() -> StateObserver:
    return StateObserver()


def recorded_frames() -> Iterator[tuple[str, Battle]]:
    """(label, battle) after every frame each player received, over all recordings."""
    for recording in all_recordings():
        for user, frames in recording.frames.items():
            for i, battle in enumerate(replay_frames(frames, user)):
                yield f"{recording.path.name}:{user}:{i}", battle


def position(observer: StateObserver, name: str) -> int:
    return observer.feature_names().index(name)


def value(observer: StateObserver, obs: np.ndarray, name: str) -> float:
    return float(obs[position(observer, name)])


# --- shape, bounds, determinism over real battles ---------------------------------------


def test_recordings_cover_the_three_formats():
    formats = {r.battle_format for r in all_recordings()}
    assert {"gen9bssfactory", "gen9randombattle", "gen9bssregi"} <= formats


def test_dimension_equals_observation_length(observer: StateObserver):
    """get_observation_dimension() is the length of the observation vector."""
    _, battle = next(recorded_frames())
    assert observer.observe(battle).shape == (observer.get_observation_dimension(),)


def test_every_recorded_observation_is_finite_float32_and_inside_the_space(
    observer: StateObserver, caplog: pytest.LogCaptureFixture
):
    dim = observer.get_observation_dimension()
    space = observer.observation_space
    count = 0
    with caplog.at_level(logging.WARNING, logger="edge.maple.state_observer"):
        for label, battle in recorded_frames():
            obs = observer.observe(battle)
            assert obs.dtype == np.float32 and obs.ndim == 1 and obs.shape[0] == dim, label
            assert np.isfinite(obs).all(), label
            assert space.contains(obs), label
            count += 1
    assert count > 1000
    assert not caplog.records, "an extractor failed on a recorded battle"


def test_recordings_include_forced_switches_faints_and_terastallization():
    seen = {"force_switch": False, "fainted_active": False, "tera": False}
    for _, battle in recorded_frames():
        seen["force_switch"] |= bool(battle.force_switch)
        active = battle.active_pokemon
        seen["fainted_active"] |= bool(active is not None and active.fainted)
        seen["tera"] |= bool(active is not None and active.is_terastallized)
    assert all(seen.values()), seen


def test_observation_space_is_a_float32_box_with_per_feature_bounds(observer: StateObserver):
    space = observer.observation_space
    assert isinstance(space, gymnasium.spaces.Box)
    assert space.dtype == np.float32
    assert space.shape == (observer.get_observation_dimension(),)
    start = position(observer, "type_matchup.move1_vs_opp_active")
    assert space.low[start] == -10.0 and space.high[start] == 2.0
    assert space.low[position(observer, "own_active.hp_frac")] == 0.0
    assert space.low[position(observer, "own_active.boosts.atk")] == -1.0


def test_same_battle_gives_the_same_vector(observer: StateObserver):
    other = StateObserver()
    for i, (_, battle) in enumerate(recorded_frames()):
        if i % 7 == 0:
            first = observer.observe(battle)
            np.testing.assert_array_equal(first, observer.observe(battle))
            np.testing.assert_array_equal(first, other.observe(battle))


def test_feature_names_are_unique_and_one_per_element(observer: StateObserver):
    names = observer.feature_names()
    assert len(names) == observer.get_observation_dimension() == len(set(names))
    assert "own_active.hp_frac" in names


def test_s4_minimum_content_is_present(observer: StateObserver):
    names = set(observer.feature_names())
    required = {
        "own_active.hp_frac",
        "opp_active.hp_frac",
        "own_side.remaining",
        "opp_side.remaining",
        "field.weather.RAINDANCE",
        "field.terrain.ELECTRIC_TERRAIN",
        *(f"move{i}.has_pp" for i in range(1, 5)),
    }
    assert required <= names


# --- meaning of the values ---------------------------------------------------------------


def test_team_preview_is_all_zero_but_the_preview_flag(observer: StateObserver):
    # Replays update one Battle in place: observe it while it is at the preview.
    previews = 0
    for label, battle in recorded_frames():
        if battle.teampreview:
            obs = observer.observe(battle)
            assert value(observer, obs, "battle.teampreview") == 1.0, label
            assert np.count_nonzero(obs) == 1, label
            previews += 1
    assert previews > 0


def test_empty_battle_before_any_message_gives_zeros(observer: StateObserver):
    battle = Battle("battle-gen9randombattle-1", "nobody", logging.getLogger(__name__), gen=9)
    obs = observer.observe(battle)
    assert obs.shape == (observer.get_observation_dimension(),)
    assert not obs.any()


def test_recorded_values_match_the_battle(observer: StateObserver):
    checked = 0
    for label, battle in recorded_frames():
        if battle.teampreview or battle.active_pokemon is None:
            continue
        obs = observer.observe(battle)
        active = battle.active_pokemon
        assert value(observer, obs, "own_active.hp_frac") == pytest.approx(
            active.current_hp_fraction, abs=1e-6
        ), label
        bench = own_bench(battle)
        for j in (1, 2):
            assert value(observer, obs, f"own_bench{j}.present") == float(len(bench) >= j), label
        opp_bench = opponent_bench(battle)
        assert value(observer, obs, "opp_bench1.present") == float(len(opp_bench) >= 1), label
        for i, move in enumerate(move_slots(battle), start=1):
            assert value(observer, obs, f"move{i}.present") == float(move is not None), label
            if move is not None:
                assert value(observer, obs, f"move{i}.type.{move.type.name}") == 1.0, label
        start = position(observer, "type_matchup.move1_vs_opp_active")
        np.testing.assert_array_equal(obs[start : start + 18], type_matchup_vec(battle))
        checked += 1
    assert checked > 500


def test_synthetic_position_reads_as_expected(observer: StateObserver):
    battle = build_battle(
        [Mon("Pikachu", ["thunderbolt", "thunderwave"], tera_type="Flying"), Mon("Gyarados")],
        [Mon("Garchomp"), Mon("Snorlax", fainted=True)],
        extra_lines=[
            "|-weather|RainDance",
            "|-fieldstart|move: Electric Terrain",
            "|-boost|p1a: Pikachu|spa|2",
            "|-status|p2a: Garchomp|par",
            "|-sidestart|p2: rival|move: Stealth Rock",
        ],
    )
    obs = observer.observe(battle)
    expected = {
        "battle.turn": 0.01,
        "battle.can_tera": 1.0,
        "own_side.remaining": 2 / 6,
        "opp_side.remaining": 1 / 6,
        "field.weather.RAINDANCE": 1.0,
        "field.terrain.ELECTRIC_TERRAIN": 1.0,
        "opp_side.conditions.STEALTH_ROCK": 1.0,
        "own_active.types.ELECTRIC": 1.0,
        "own_active.tera_type.FLYING": 1.0,
        "own_active.boosts.spa": 2 / 6,
        "own_active.level": 0.5,
        "opp_active.status.PAR": 1.0,
        "opp_active.types.DRAGON": 1.0,
        "opp_active.types.GROUND": 1.0,
        "own_bench1.types.WATER": 1.0,
        "opp_bench1.present": 1.0,
        "opp_bench1.hp_frac": 0.0,
        "move1.base_power": 90 / 250,
        "move1.category.SPECIAL": 1.0,
        "move1.pp_frac": 1.0,
        "move1.has_pp": 1.0,
        "move2.category.STATUS": 1.0,
        "move3.present": 0.0,
        "type_matchup.move1_vs_opp_active": -10.0,
        "type_matchup.opp_stab2_vs_own_active": 1.0,
    }
    for name, want in expected.items():
        assert value(observer, obs, name) == pytest.approx(want, abs=1e-6), name


def test_boosts_and_clipping_stay_inside_bounds(observer: StateObserver):
    battle = build_battle(
        [Mon("Pikachu", ["thunderbolt"])],
        [Mon("Garchomp")],
        extra_lines=["|-boost|p2a: Garchomp|atk|6", "|-unboost|p2a: Garchomp|spe|6"],
    )
    battle.turn = 500
    obs = observer.observe(battle)
    assert value(observer, obs, "opp_active.boosts.atk") == 1.0
    assert value(observer, obs, "opp_active.boosts.spe") == -1.0
    assert value(observer, obs, "battle.turn") == 1.0
    assert observer.observation_space.contains(obs)


def test_move_pp_flag_is_0_when_the_request_says_no_pp(observer: StateObserver):
    battle = build_battle([Mon("Pikachu", ["thunderbolt", "surf"])], [Mon("Garchomp")])
    request = dict(battle.last_request)
    request["active"] = [
        {
            "moves": [
                {"move": "Thunderbolt", "id": "thunderbolt", "pp": 0, "maxpp": 24},
                {"move": "Surf", "id": "surf", "pp": 12, "maxpp": 24},
            ]
        }
    ]
    battle.parse_request(request)
    obs = observer.observe(battle)
    assert value(observer, obs, "move1.has_pp") == 0.0
    assert value(observer, obs, "move1.pp_frac") == 0.0
    assert value(observer, obs, "move2.has_pp") == 1.0
    assert value(observer, obs, "move2.pp_frac") == 0.5


# --- the spec ----------------------------------------------------------------------------


def write_spec(tmp_path: Path, features: list[dict], **top: object) -> Path:
    path = tmp_path / "spec.yml"
    document = {"version": 1, "features": features, **top}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_default_spec_is_the_packaged_file():
    assert DEFAULT_SPEC_PATH.is_file()
    assert StateObserver().feature_names() == StateObserver(DEFAULT_SPEC_PATH).feature_names()


def test_custom_spec_sets_dimension_names_and_bounds(tmp_path: Path):
    path = write_spec(
        tmp_path,
        [
            {"name": "hp", "extractor": "hp_fraction", "target": "own_active", "low": 0, "high": 1},
            {
                "name": "w",
                "extractor": "weather",
                "categories": ["RAINDANCE", "SUNNYDAY"],
                "low": 0,
                "high": 1,
            },
            {"name": "tm", "extractor": "type_matchup", "low": -10, "high": 2},
        ],
    )
    observer = StateObserver(path)
    assert observer.get_observation_dimension() == 1 + 2 + 18
    assert observer.feature_names()[:3] == ["hp", "w.RAINDANCE", "w.SUNNYDAY"]
    assert observer.feature_names()[3:] == [f"tm.{label}" for label in TYPE_MATCHUP_LABELS]
    assert observer.observation_space.low.tolist() == [0, 0, 0] + [-10] * 18
    _, battle = next(recorded_frames())
    assert observer.observe(battle).shape == (21,)


GOOD = {"name": "hp", "extractor": "hp_fraction", "target": "own_active", "low": 0, "high": 1}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**GOOD, "extractor": "species_onehot"}, r"'hp'.*unknown extractor 'species_onehot'"),
        ({k: v for k, v in GOOD.items() if k != "low"}, r"'hp'.*missing field 'low'"),
        ({k: v for k, v in GOOD.items() if k != "name"}, r"feature #2.*missing field 'name'"),
        ({k: v for k, v in GOOD.items() if k != "target"}, r"'hp'.*missing parameter 'target'"),
        ({**GOOD, "target": "own_bench3"}, r"'hp'.*target='own_bench3'"),
        ({**GOOD, "scale": 2}, r"'hp'.*unknown parameter.*'scale'"),
        ({**GOOD, "low": 1, "high": 0}, r"'hp'.*'low'.*below 'high'"),
        ({**GOOD, "high": "one"}, r"'hp'.*'high' must be a finite number"),
        ({**GOOD, "extractor": "types", "categories": ["FIRE", "LAVA"]}, r"'hp'.*'LAVA'"),
        ({**GOOD, "extractor": "boosts", "divide_by": 0}, r"'hp'.*'divide_by'.*positive"),
        ({**GOOD, "extractor": "move_type", "target": None, "slot": 5}, r"'hp'.*'slot'"),
    ],
)
def test_bad_entry_raises_a_clear_error_naming_it(tmp_path: Path, entry: dict, message: str):
    entry = {k: v for k, v in entry.items() if v is not None}
    first = {"name": "turn", "extractor": "turn", "low": 0, "high": 1}
    path = write_spec(tmp_path, [first, entry])
    with pytest.raises(StateSpecError, match=message):
        StateObserver(path)


def test_duplicate_names_are_rejected(tmp_path: Path):
    path = write_spec(tmp_path, [GOOD, GOOD])
    with pytest.raises(StateSpecError, match=r"feature #2: duplicate name 'hp'"):
        StateObserver(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("features: []\n", r"'version' must be 1"),
        ("version: 1\nfeatures: []\n", r"'features' must be a non-empty list"),
        ("version: 1\nfeatures: [1]\nextra: 2\n", r"unknown top-level key.*'extra'"),
        ("version: 1\nfeatures: [1]\n", r"feature #1: must be a mapping"),
        ("version: 1\nfeatures: [\n", r"invalid YAML"),
        ("- just a list\n", r"must be a mapping"),
    ],
)
def test_bad_document_raises_a_clear_error(tmp_path: Path, text: str, message: str):
    path = tmp_path / "spec.yml"
    path.write_text(text)
    with pytest.raises(StateSpecError, match=message):
        StateObserver(path)


def test_missing_spec_file_raises_spec_error(tmp_path: Path):
    with pytest.raises(StateSpecError, match="cannot read observation spec"):
        StateObserver(tmp_path / "nope.yml")


def test_spec_error_is_an_edge_error_and_a_value_error():
    assert issubclass(StateSpecError, EdgeError)
    assert issubclass(StateSpecError, ValueError)


def test_docs_describe_every_feature_group_and_the_dimension(observer: StateObserver):
    text = DOCS.read_text(encoding="utf-8")
    spec = yaml.safe_load(DEFAULT_SPEC_PATH.read_text(encoding="utf-8"))
    for entry in spec["features"]:
        assert f"`{entry['name']}`" in text, entry["name"]
    for name in registered_extractors():
        assert f"`{name}`" in text, name
    match = re.search(r"dimension is \*\*(\d+)\*\*", text)
    assert match and int(match.group(1)) == observer.get_observation_dimension()


def test_docs_feature_table_gives_each_groups_indices(observer: StateObserver):
    # An inserted feature shifts every later range: the table must say where each group lies.
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("## Features") : text.index("\n## ", text.index("## Features"))]
    rows = re.findall(r"^\| (\d+)(?:–(\d+))? \| `([^`]+)` \| (\d+) \|", table, re.MULTILINE)
    documented = [(name, int(first), int(last or first) + 1) for first, last, name, size in rows]
    assert all(
        int(size) == stop - start
        for (_, start, stop), (*_, size) in zip(documented, rows, strict=True)
    )
    actual: list[tuple[str, int, int]] = []
    for group in observer._groups:  # the layout the observer computed from the spec
        name, start, stop = group.spec.name, group.start, group.stop
        row = next((r for r in documented if r[0] == f"{name.split('.')[0]}.*"), None)
        if row is not None and actual and actual[-1][0] == row[0]:
            actual[-1] = (row[0], actual[-1][1], stop)  # one row for a family of groups
        else:
            actual.append((row[0] if row else name, start, stop))
    assert documented == actual


def test_docs_feature_table_names_each_groups_extractor():
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("## Features") : text.index("\n## ", text.index("## Features"))]
    rows = re.findall(r"^\| [\d–]+ \| `([^`]+)` \| \d+ \| `([^`]+)`", table, re.MULTILINE)
    spec = yaml.safe_load(DEFAULT_SPEC_PATH.read_text(encoding="utf-8"))
    extractors = {entry["name"]: entry["extractor"] for entry in spec["features"]}
    single = [(name, extractor) for name, extractor in rows if not name.endswith(".*")]
    assert single and all(extractors[name] == extractor for name, extractor in single), single
