"""A poke-env Player module (``getUserPlayerClass``) as the loader runs it, and the seeding of the
global generators (docs/contract.md, "A poke-env Player" and "Randomness")."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from poke_env.battle import Battle

from edge.contract.legality import canonical_order
from edge.contract.randomness import seed_global_generators
from edge.contract.showdown_request import request_of
from edge.contract.user_module import UserModel, load_user_model
from edge.errors import ContractError
from tests.fixtures.replay import all_recordings, replay_frames

ROOT = Path(__file__).resolve().parents[2]
DOCS_EXAMPLE = ROOT / "tests" / "outside_agents" / "max_power_player" / "__init__.py"


@pytest.fixture
def player_model(tmp_path: Path) -> Iterator[Callable[[str], UserModel]]:
    """``make(source)``: the UserModel of a module written into tmp_path (forgotten afterwards)."""
    created: list[str] = []

    def make(source: str) -> UserModel:
        name = f"player_{uuid.uuid4().hex[:10]}"
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(textwrap.dedent(source))
        created.append(name)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"m": {"userModuleID": name}}))
        return load_user_model(path, "m")

    yield make
    for name in created:
        sys.modules.pop(name, None)


def _decisions(limit: int = 40) -> Iterator[Battle]:
    recording = next(r for r in all_recordings() if r.battle_format == "gen9bssfactory")
    username, frames = next(iter(recording.frames.items()))
    for i, battle in enumerate(replay_frames(frames, username)):
        if "|request|" in frames[i] and not battle._wait and i < limit:
            yield battle


def test_the_player_example_of_the_contract_is_the_tested_module():
    docs = (ROOT / "docs" / "contract.md").read_text()
    section = docs[docs.index("## A poke-env Player") :]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert example is not None
    code = DOCS_EXAMPLE.read_text()
    code = code[code.index('"""', 3) + 3 :].strip()  # without the module's docstring
    assert example.group(1).strip() == code


def test_an_async_player_is_built_for_the_format_and_answers_every_request(player_model):
    model = player_model(
        """
        from poke_env.player import Player

        BUILT = []

        class AsyncPlayer(Player):
            def __init__(self, **kwargs):
                BUILT.append(kwargs)
                super().__init__(**kwargs)

            async def choose_move(self, battle):
                assert self.battles[battle.battle_tag] is battle
                return self.choose_random_move(battle)

            async def teampreview(self, battle):
                return "/team 321"

        def getUserPlayerClass(args):
            return AsyncPlayer
        """
    )
    assert model.plays_player
    agent = model.make_agent(
        {"side": "blue", "player": "player_0", "battle_format": "gen9bssfactory", "seed": 1}
    )
    built = model.module.BUILT
    assert len(built) == 1 and built[0]["battle_format"] == "gen9bssfactory"
    assert built[0]["start_listening"] is False
    orders = [canonical_order(request_of(b), agent.deploy(b, 0)) for b in _decisions()]
    assert orders[0] == "/team 321"
    assert len(orders) > 5 and all(o.startswith("/choose ") for o in orders[1:])
    assert model.agent_full_name(model.new_policy()) == "m:m:AsyncPlayer"


def test_a_module_with_both_contracts_is_refused(player_model):
    model = player_model(
        """
        from poke_env.player import RandomPlayer

        def getUserPlayerClass(args):
            return RandomPlayer

        def getUserAgentClass(args):
            return RandomPlayer

        def getUserPolicy(args):
            return None
        """
    )
    with pytest.raises(
        ContractError, match="defines both getUserAgentClass and getUserPlayerClass"
    ):
        _ = model.agent_class


def test_a_player_instance_instead_of_its_class_says_what_to_return(player_model):
    model = player_model(
        """
        from poke_env.player import RandomPlayer

        def getUserPlayerClass(args):
            return RandomPlayer(start_listening=False)
        """
    )
    with pytest.raises(ContractError, match=r"return the class RandomPlayer itself"):
        _ = model.agent_class


def test_seeding_makes_the_global_generators_draw_the_same():
    seed_global_generators(7)
    first = (random.random(), float(np.random.rand()))
    random.random(), np.random.rand()
    seed_global_generators(7)
    assert (random.random(), float(np.random.rand())) == first
    seed_global_generators(None)  # no seed: left alone
    assert (random.random(), float(np.random.rand())) != first


def test_seeding_seeds_torch_only_once_a_module_imported_it():
    code = (
        "import sys\n"
        "from edge.contract.randomness import seed_global_generators\n"
        "seed_global_generators(5)\n"
        "print('torch' in sys.modules)\n"
        "import torch\n"
        "draws = []\n"
        "for _ in range(2):\n"
        "    seed_global_generators(5)\n"
        "    draws.append(torch.rand(1).item())\n"
        "print(draws[0] == draws[1])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["False", "True"]
