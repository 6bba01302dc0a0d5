"""Export a trained policy as a user module that needs nothing from this project.

    python scripts/export_standalone_policy.py mine.npz --out submission/

The package carries its own copy of the MapleAgent observation and Agent code (imports made
relative), the numpy network runner and the weights, and imports only numpy, gymnasium, poke-env,
msgspec and PyYAML; a candidates.json is written beside it. The export refuses to finish if any
copied file still imports this project.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Copied files: (source under ROOT, destination under the package).
COPIED = [
    ("edge/errors.py", "maple/errors.py"),
    ("edge/contract/agent.py", "maple/agent.py"),
    ("edge/contract/policy.py", "maple/policy_base.py"),
    ("edge/contract/game_type.py", "maple/game_type.py"),
    ("edge/contract/legality.py", "maple/legality.py"),
    ("edge/contract/showdown_request.py", "maple/showdown_request.py"),
    ("edge/contract/doubles_slots.py", "maple/doubles_slots.py"),
    *(
        (f"edge/maple/{name}.py", f"maple/{name}.py")
        for name in (
            "maple_agent",
            "doubles_agent",
            "doubles_action_helper",
            "action_helper",
            "battle_view",
            "battle_context",
            "features",
            "type_chart",
            "state_observer",
            "state_spec",
        )
    ),
    ("edge/maple/config/state_spec.yml", "maple/config/state_spec.yml"),
    ("edge/maple/config/doubles_state_spec.yml", "maple/config/doubles_state_spec.yml"),
    ("agents/learned_policy/policy.py", "network.py"),
]

#: How the copies' imports of this project become relative ones.
REWRITES = [
    (re.compile(r"^(\s*)from edge\.maple\.(\w+) import", re.M), r"\1from .\2 import"),
    (re.compile(r"^(\s*)from edge\.errors import", re.M), r"\1from .errors import"),
    (re.compile(r"^(\s*)from edge\.contract\.agent import", re.M), r"\1from .agent import"),
    (
        re.compile(
            r"^(\s*)from edge\.contract\.(game_type|legality|showdown_request|doubles_slots) import",
            re.M,
        ),
        r"\1from .\2 import",
    ),
    (
        re.compile(r"^(\s*)from edge\.contract\.policy import", re.M),
        r"\1from .maple.policy_base import",
    ),
]
PROJECT_IMPORT = re.compile(r"^\s*(from|import)\s+(edge|center|agents)\b", re.M)

INIT = '''"""A trained MaskablePPO policy with its own numpy Agent: imports nothing from maple-sep.

Written by scripts/export_standalone_policy.py from {weights}. ``maple/`` is a copy of the
project's MapleAgent (observation and actions), ``network.py`` runs the network with numpy.
``args["weights"]`` (optional) names another weights file, relative to this folder.
"""

from pathlib import Path

from .maple.maple_agent import MapleAgent
from .maple.state_observer import StateObserver
from .network import LearnedPolicy, MLPWeights

HERE = Path(__file__).parent


def getUserAgentClass(args):
    return MapleAgent


def getUserAgentModelConfig(args):
    return {{}}


def getUserPolicy(args):
    path = HERE / (args.get("weights") or "weights.npz")
    return LearnedPolicy(MLPWeights.load(path), StateObserver().feature_names())
'''


def export(weights: Path, out: Path, package: str, model_id: str) -> Path:
    """Write ``out/package`` and its candidates.json entry; the package folder."""
    if not package.isidentifier():
        raise SystemExit(f"error: --package {package!r} is not a Python identifier")
    if not weights.is_file():
        raise SystemExit(f"error: {weights}: no such weights file (train one: docs/training.md)")
    target = out / package
    if target.exists():
        raise SystemExit(f"error: {target} exists: remove it or pick another --out/--package")
    (target / "maple" / "config").mkdir(parents=True)
    for source, dest in COPIED:
        text = (ROOT / source).read_text(encoding="utf-8")
        for pattern, replacement in REWRITES:
            text = pattern.sub(replacement, text)
        (target / dest).write_text(text, encoding="utf-8")
    (target / "maple" / "__init__.py").write_text('"""A copy of maple-sep\'s MapleAgent."""\n')
    (target / "__init__.py").write_text(INIT.format(weights=weights.name), encoding="utf-8")
    shutil.copyfile(weights, target / "weights.npz")
    conditions = weights.with_suffix(".json")
    if conditions.is_file():
        shutil.copyfile(conditions, target / "weights.json")
    left = [
        str(p.relative_to(out))
        for p in target.rglob("*.py")
        if PROJECT_IMPORT.search(p.read_text())
    ]
    if left:
        shutil.rmtree(target)
        raise SystemExit(
            f"error: the copies still import this project ({', '.join(left)}): not exported"
        )
    candidates = out / "candidates.json"
    doc = json.loads(candidates.read_text(encoding="utf-8")) if candidates.exists() else {}
    doc[model_id] = {"userModuleID": package, "args": {}, "logName": model_id}
    candidates.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("weights", type=Path, help="the .npz written by train_maskable_ppo.py")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write into")
    parser.add_argument("--package", default="learned_standalone", help="the package's name")
    parser.add_argument(
        "--model-id", default=None, help="its candidates.json id (default: PACKAGE)"
    )
    options = parser.parse_args(argv)
    target = export(
        options.weights, options.out, options.package, options.model_id or options.package
    )
    print(f"wrote {target} and its entry in {options.out / 'candidates.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
