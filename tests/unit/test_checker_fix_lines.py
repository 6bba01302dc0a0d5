"""The checker's "Fix:" line answers the error above it: a module whose getUserPolicy cannot find
its weights file is told to ship the file or fix the path, not to return a policy instance."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

from edge.checker.report import Status
from edge.checker.run import check_user_module

# A stranger's module, from docs/contract.md alone: its policy loads a file named in its args.
MODULE = """
    import gymnasium
    import numpy as np


    class Agent:
        def __init__(self, modelConfig, instanceConfig):
            self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
            self.action_space = gymnasium.spaces.Discrete(11)

        def makeObs(self, battle):
            return np.zeros(1, np.float32)

        def deploy(self, battle, action):
            return "/choose default"


    class Policy:
        def __init__(self, path):
            with open(path, "rb") as f:
                self.weights = f.read()

        def reset(self):
            pass

        def step(self, observation, reward, done, info, agentFullName, observation_space, action_space):
            return 0


    def getUserAgentClass(args):
        return Agent


    def getUserPolicy(args):
        import os

        return Policy(os.path.join(os.path.dirname(__file__), args["weights"]))
"""


def test_a_missing_weights_file_gets_a_fix_about_the_file(tmp_path: Path) -> None:
    name = f"stranger_{uuid.uuid4().hex[:8]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(textwrap.dedent(MODULE))
    candidates = tmp_path / "candidates.json"
    candidates.write_text(
        json.dumps({"mine": {"userModuleID": name, "args": {"weights": "w.bin"}}})
    )
    report = check_user_module(candidates, "mine")
    policy = report.result("policy")
    assert policy.status is Status.FAIL and "raised FileNotFoundError:" in policy.message
    assert policy.fix == (
        "ship the file the error names with the module (inside its folder) or fix the path in "
        "the candidate's args in candidates.json"
    )
    assert f"  Fix: {policy.fix}" in report.format()
