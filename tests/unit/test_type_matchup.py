"""type_matchup_vec: the 18 log2 type-matchup values of the observation (docs/observation.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from poke_env.battle import MoveCategory, PokemonType
from poke_env.data import GenData

from edge.maple.battle_view import move_slots, opponent_bench, own_bench
from edge.maple.type_chart import (
    TYPE_MATCHUP_IMMUNE,
    TYPE_MATCHUP_LABELS,
    damage_multiplier,
    type_matchup_vec,
)
from tests.fixtures.replay import all_recordings, replay_frames
from tests.fixtures.synthetic_battle import Mon, build_battle

PIKACHU_MOVES = ["thunderbolt", "earthquake", "flamethrower", "thunderwave"]


def index(label: str) -> int:
    return TYPE_MATCHUP_LABELS.index(label)


def test_labels_are_move_major_then_stab_type_major():
    assert len(TYPE_MATCHUP_LABELS) == 18
    assert TYPE_MATCHUP_LABELS[:4] == (
        "move1_vs_opp_active",
        "move1_vs_opp_bench1",
        "move1_vs_opp_bench2",
        "move2_vs_opp_active",
    )
    assert TYPE_MATCHUP_LABELS[12:] == (
        "opp_stab1_vs_own_active",
        "opp_stab1_vs_own_bench1",
        "opp_stab1_vs_own_bench2",
        "opp_stab2_vs_own_active",
        "opp_stab2_vs_own_bench1",
        "opp_stab2_vs_own_bench2",
    )


def test_returns_18_float32_values():
    battle = build_battle([Mon("Pikachu", PIKACHU_MOVES)], [Mon("Gyarados")])
    vec = type_matchup_vec(battle)
    assert vec.shape == (18,)
    assert vec.dtype == np.float32


def test_electric_move_on_water_flying_is_4x_so_2():
    battle = build_battle([Mon("Pikachu", ["thunderbolt"])], [Mon("Gyarados")])
    assert type_matchup_vec(battle)[index("move1_vs_opp_active")] == 2.0


def test_ground_move_on_flying_is_an_immunity_so_minus_10():
    battle = build_battle([Mon("Garchomp", ["earthquake"])], [Mon("Tornadus")])
    assert type_matchup_vec(battle)[index("move1_vs_opp_active")] == TYPE_MATCHUP_IMMUNE == -10.0


def test_fire_move_on_water_rock_is_quarter_so_minus_2():
    battle = build_battle([Mon("Charizard", ["flamethrower"])], [Mon("Relicanth")])
    assert type_matchup_vec(battle)[index("move1_vs_opp_active")] == -2.0


@pytest.mark.parametrize(
    ("move", "target", "expected"),
    [
        ("flamethrower", "Gyarados", -1.0),
        ("tackle", "Gyarados", 0.0),
        ("thunderbolt", "Gyarados", 2.0),
        ("thunderbolt", "Pelipper", 2.0),
        ("icebeam", "Garchomp", 2.0),
        ("icebeam", "Dragonite", 2.0),
        ("thunderbolt", "Magnezone", -1.0),
        ("shadowball", "Snorlax", -10.0),
        ("closecombat", "Kingambit", 2.0),
    ],
)
def test_each_multiplier_maps_to_its_log2(move: str, target: str, expected: float):
    battle = build_battle([Mon("Mew", [move])], [Mon(target)])
    assert type_matchup_vec(battle)[index("move1_vs_opp_active")] == expected


def test_status_move_is_0_even_against_an_immune_target():
    battle = build_battle([Mon("Pikachu", ["thunderwave"])], [Mon("Garchomp")])
    assert type_matchup_vec(battle)[index("move1_vs_opp_active")] == 0.0


def test_missing_move_slots_and_missing_opponent_bench_are_0():
    battle = build_battle([Mon("Pikachu", ["thunderbolt"])], [Mon("Gyarados")])
    vec = type_matchup_vec(battle)
    assert vec[index("move1_vs_opp_active")] == 2.0
    assert vec[index("move1_vs_opp_bench1")] == 0.0
    assert vec[index("move1_vs_opp_bench2")] == 0.0
    assert not vec[3:12].any()


def test_all_12_offensive_values_follow_move_slots_and_opponent_bench_order():
    battle = build_battle(
        [Mon("Pikachu", PIKACHU_MOVES)],
        [Mon("Garchomp"), Mon("Gyarados"), Mon("Relicanth")],
    )
    assert [m.id for m in move_slots(battle) if m] == PIKACHU_MOVES
    assert [m.species for m in opponent_bench(battle)] == ["gyarados", "relicanth"]
    expected = [
        [-10.0, 2.0, 1.0],  # Thunderbolt on Dragon/Ground, Water/Flying, Water/Rock
        [0.0, -10.0, 1.0],  # Earthquake
        [-1.0, -1.0, -2.0],  # Flamethrower
        [0.0, 0.0, 0.0],  # Thunder Wave: Status
    ]
    assert type_matchup_vec(battle)[:12].tolist() == [v for row in expected for v in row]


def test_six_defensive_values_are_opponent_stab_types_on_own_active_and_bench():
    battle = build_battle(
        [
            Mon("Pikachu", ["thunderbolt"]),
            Mon("Gyarados", ["waterfall"]),
            Mon("Heatran", ["lavaplume"]),
        ],
        [Mon("Garchomp")],
    )
    assert [m.species for m in own_bench(battle)] == ["gyarados", "heatran"]
    # Garchomp is Dragon/Ground (poke-env order); targets Electric, Water/Flying, Fire/Steel.
    assert type_matchup_vec(battle)[12:].tolist() == [0.0, 0.0, -1.0, 1.0, -10.0, 2.0]


def test_single_typed_opponent_has_0_for_the_second_stab_type():
    battle = build_battle(
        [Mon("Pikachu", ["thunderbolt"]), Mon("Heatran"), Mon("Gyarados")], [Mon("Dondozo")]
    )
    vec = type_matchup_vec(battle)
    assert vec[index("opp_stab1_vs_own_active")] == 0.0  # Water on Electric
    assert vec[index("opp_stab1_vs_own_bench1")] == 1.0  # Water on Fire/Steel
    assert vec[index("opp_stab1_vs_own_bench2")] == -1.0  # Water on Water/Flying
    assert not vec[index("opp_stab2_vs_own_active") :].any()


def test_missing_own_bench_gives_0_defensive_values():
    battle = build_battle([Mon("Pikachu", ["thunderbolt"])], [Mon("Garchomp")])
    vec = type_matchup_vec(battle)
    assert vec[index("opp_stab2_vs_own_active")] == 1.0
    for label in ("opp_stab1_vs_own_bench1", "opp_stab2_vs_own_bench2"):
        assert vec[index(label)] == 0.0


def test_fainted_opponent_bench_counts_as_missing():
    battle = build_battle(
        [Mon("Pikachu", ["thunderbolt"])],
        [Mon("Snorlax"), Mon("Gyarados", fainted=True)],
    )
    assert opponent_bench(battle)[0].fainted
    assert type_matchup_vec(battle)[index("move1_vs_opp_bench1")] == 0.0


def test_terastallized_defender_is_hit_as_its_tera_type():
    battle = build_battle(
        [Mon("Pikachu", ["thunderbolt", "surf"])], [Mon("Gyarados")], opp_tera="Fire"
    )
    vec = type_matchup_vec(battle)
    assert vec[index("move1_vs_opp_active")] == 0.0  # Electric on Fire
    assert vec[index("move2_vs_opp_active")] == 1.0  # Water on Fire


def test_terastallized_opponent_stab_is_its_tera_type_only():
    battle = build_battle(
        [Mon("Pikachu", ["thunderbolt"]), Mon("Scizor")], [Mon("Gyarados")], opp_tera="Fire"
    )
    vec = type_matchup_vec(battle)
    assert vec[index("opp_stab1_vs_own_bench1")] == 2.0  # Fire on Bug/Steel
    assert not vec[index("opp_stab2_vs_own_active") :].any()


def test_stellar_tera_keeps_the_original_types():
    battle = build_battle([Mon("Pikachu", ["thunderbolt"])], [Mon("Gyarados")], opp_tera="Stellar")
    vec = type_matchup_vec(battle)
    assert vec[index("move1_vs_opp_active")] == 2.0
    assert vec[index("opp_stab2_vs_own_active")] == -1.0  # Flying on Electric


def test_own_terastallized_active_is_hit_as_its_tera_type():
    battle = build_battle([Mon("Pikachu", ["thunderbolt"])], [Mon("Garchomp")], own_tera="Flying")
    vec = type_matchup_vec(battle)
    assert vec[index("opp_stab2_vs_own_active")] == TYPE_MATCHUP_IMMUNE  # Ground on Flying


def test_team_preview_gives_zeros():
    recording = next(r for r in all_recordings() if r.battle_format == "gen9bssfactory")
    user = recording.usernames[0]
    previews = 0
    for battle in replay_frames(recording.frames[user], user):
        if battle.teampreview:
            assert battle.active_pokemon is not None  # poke-env marks the first mon active
            assert not type_matchup_vec(battle).any()
            previews += 1
    assert previews > 0


def test_damage_multiplier_treats_typeless_and_stellar_as_neutral():
    assert damage_multiplier(PokemonType.THREE_QUESTION_MARKS, [PokemonType.GHOST]) == 1.0
    assert damage_multiplier(PokemonType.NORMAL, [PokemonType.THREE_QUESTION_MARKS]) == 1.0
    assert damage_multiplier(PokemonType.GROUND, [PokemonType.STELLAR, PokemonType.FLYING]) == 0.0


def _expected_value(move_or_type, attacker_ok: bool, target) -> float:
    """Independent computation with poke-env's PokemonType.damage_multiplier."""
    if move_or_type is None or target is None or target.fainted or not attacker_ok:
        return 0.0
    attacking = move_or_type
    if not isinstance(move_or_type, PokemonType):
        if move_or_type.category is MoveCategory.STATUS:
            return 0.0
        attacking = move_or_type.type
    multiplier = attacking.damage_multiplier(
        target.type_1, target.type_2, type_chart=GenData.from_gen(9).type_chart
    )
    return TYPE_MATCHUP_IMMUNE if multiplier == 0 else math.log2(multiplier)


def _uses_special_types(battle) -> bool:
    mons = [battle.active_pokemon, battle.opponent_active_pokemon, *own_bench(battle)]
    mons += opponent_bench(battle)
    return any(
        m is not None
        and (m.tera_type is PokemonType.STELLAR or PokemonType.THREE_QUESTION_MARKS in m.types)
        for m in mons
    )


def test_agrees_with_poke_env_damage_multiplier_on_every_recorded_frame():
    checked = 0
    for recording in all_recordings():
        for user, frames in recording.frames.items():
            for battle in replay_frames(frames, user):
                if battle.teampreview or _uses_special_types(battle):
                    continue
                own = battle.active_pokemon
                opp = battle.opponent_active_pokemon
                opp_targets = [opp, *opponent_bench(battle)[:2], None, None][:3]
                own_targets = [own, *own_bench(battle)[:2], None, None][:3]
                attacker_ok = own is not None and not own.fainted
                expected = [
                    _expected_value(move, attacker_ok, target)
                    for move in move_slots(battle)
                    for target in opp_targets
                ]
                stab = opp.types[:2] if opp is not None and not opp.fainted else []
                expected += [
                    _expected_value(stab[t] if t < len(stab) else None, True, target)
                    for t in range(2)
                    for target in own_targets
                ]
                assert type_matchup_vec(battle).tolist() == expected, recording.path.name
                checked += 1
    assert checked > 500
