"""poke-env's learnsets in the zygote (edge.service.forking.learnsets): the warming fills poke-env's
generation-9 cache in steps, for every species whose moves that generation gives (forms
included), without loading the data of any other generation (which would grow the zygote, and
every fork's page-table copy); an edge's zygote warms, the checker's does not; the zygote holds
the raw learnsets equal but shared, and the supervisor none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from poke_env.data import GenData

from edge.checker.sandboxed import CheckerEdge
from edge.contract.user_module import load_user_model
from edge.service.forking.learnsets import WARM_GEN, LearnsetWarmer
from edge.service.sandbox.limits import Limits
from edge.service.supervision.supervisor import SandboxedEdge

CANDIDATES = Path(__file__).resolve().parent.parent / "agents" / "candidates.json"


def test_warming_fills_the_learnset_cache_without_loading_other_generations():
    generations_before = set(GenData._gen_data_per_gen)
    warmer = LearnsetWarmer()
    steps = 0
    while warmer.left:
        warmer.step()
        steps += 1
    data = GenData.from_gen(WARM_GEN)
    own = [s for s in data.pokedex if data._learnset_for_generation(s, WARM_GEN)]
    assert steps == -(-len(data.pokedex) // LearnsetWarmer.CHUNK)  # in steps, not all at once
    assert len(own) > 1000
    assert all(species in data._learnset_cache for species in own)
    # Forms with no moves of their own take their base form's (met in the recorded battles).
    assert {"ogerponhearthflame", "giratinaorigin"} <= set(data._learnset_cache)
    assert set(GenData._gen_data_per_gen) <= generations_before | {WARM_GEN}
    # What a worker would have computed itself (poke-env's own code): the same moves, species by
    # species (forms, base forms and evolution lines included).
    warmed = dict(data._learnset_cache)
    data._learnset_cache.clear()
    assert {s: GenData.obtain_learnset(s, WARM_GEN) for s in warmed} == warmed
    assert set(GenData._gen_data_per_gen) <= generations_before | {WARM_GEN}


def _own_zygotes() -> list[str]:
    """The last argument (warm or cold) of each zygote this process started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and "edge.service.forking.zygote" in argv:
            found.append(argv[-2])  # cmdline ends with a NUL: the last field is empty
    return found


def test_an_edges_zygote_warms_and_the_checkers_does_not():
    # A check plays a few sample battles: warming every species would cost it more than it saves.
    candidate = load_user_model(CANDIDATES, "good_random").candidate
    with SandboxedEdge("blue", "127.0.0.1", 0, {"good_random": candidate}, insecure=True):
        assert _own_zygotes() == ["warm"]
    with CheckerEdge(candidate, Limits()):
        assert _own_zygotes() == ["cold"]


PRELOADED = textwrap.dedent(
    """
    import json, os, pathlib, orjson
    from poke_env.data import GenData
    from edge.service.forking.learnsets import WARM_GEN
    from edge.service.forking.zygote import _preload

    _preload()
    data = GenData.from_gen(WARM_GEN)
    plain = orjson.loads(pathlib.Path(data._static_files_root, "learnset.json").read_bytes())
    sources = [s for entry in data.learnset.values() for s in entry.get("learnset", {}).values()]
    print(json.dumps({
        "kind": type(data).__name__,
        "equal": data.learnset == plain and data.raw_learnset is data.learnset,
        "lists": len(sources),
        "distinct_lists": len({id(s) for s in sources}),
        "strings": sum(map(len, sources)),
        "distinct_strings": len({id(s) for sources_ in sources for s in sources_}),
    }), flush=True)
    os._exit(0)  # as the zygote ends: poke-env's loop, stopped by _preload, is not waited for
    """
)


def test_the_zygote_holds_poke_envs_learnsets_equal_and_shared():
    # A fresh process: this one may have loaded the data its own way already.
    out = subprocess.run(
        [sys.executable, "-c", PRELOADED], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["kind"] == "_SharedLearnsets"
    assert found["equal"]
    assert found["lists"] > 80_000 and found["distinct_lists"] < found["lists"] / 4
    assert found["strings"] > 300_000 and found["distinct_strings"] < 2_000


def test_the_supervisor_imports_no_poke_env():
    # poke-env (and its data) is the zygote's and the workers': an edge's supervisor, which
    # only routes bytes, would pay its import at every edge start.
    code = (
        "import sys, edge.cli, edge.service.supervision.supervisor\n"
        "print(sorted(m for m in ('poke_env', 'edge.contract.user_module', 'edge.service.worker.process')"
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"
