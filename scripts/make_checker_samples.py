"""Make the checker's sample battles (edge/checker/samples/*.json.gz), byte-identical on every run.

    .venv/bin/python scripts/make_checker_samples.py                            # singles
    .venv/bin/python scripts/make_checker_samples.py --format gen9vgc2025regi   # doubles

Singles come from the recordings in tests/fixtures/battles; doubles are played on the seeded
simulator with random legal pairs and the brought team of tests/data.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "battles"
TEAMS = ROOT / "tests" / "data"
TARGET = ROOT / "edge" / "checker" / "samples"

# (sample name, recording file, index of the player in the recording)
SAMPLES = [
    ("gen9bssfactory", "gen9bssfactory-2.json.gz", 0),
    ("gen9bssregi", "gen9bssregi-1.json.gz", 0),
    ("gen9randombattle", "gen9randombattle-1.json.gz", 0),
]

# Doubles format -> (team file in tests/data, episode seed). The seeds were chosen for battles with
# forced switches and tera, a dozen turns or so (small files).
DOUBLES = {
    "gen9vgc2025regi": ("vgc_regi_team.txt", 3),
    "gen9doublesou": ("doubles_ou_team.txt", 3),
}
#: The run secret's seed: the simulator's seeds and the Agents' derive from it.
SECRET_SEED = 2028


def _write(out: Path, name: str, sample: dict[str, Any]) -> None:
    data = json.dumps(sample, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    target = out / f"{name}.json.gz"
    # mtime=0: the same input gives byte-identical files.
    target.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    (frames,) = sample["frames"].values()
    print(f"{target}: {len(frames)} frames, {target.stat().st_size} bytes")


def singles(out: Path) -> None:
    """Every singles sample, from the test recordings."""
    for name, source, player in SAMPLES:
        document = json.loads(gzip.decompress((SOURCE / source).read_bytes()))
        username = list(document["frames"])[player]
        _write(
            out,
            name,
            {
                "format": document["format"],
                "battle_tag": document["battle_tag"],
                "source": f"tests/fixtures/battles/{source}",
                "frames": {username: document["frames"][username]},
            },
        )


def _untimed(frame: str) -> str:
    return "\n".join(line for line in frame.split("\n") if not line.startswith("|t:|"))


def doubles(battle_format: str, out: Path) -> None:
    """One seeded battle of random legal pairs on the simulator; player_0's frames."""
    from center.env.pokemon_env import PokemonEnv
    from center.showdown.sim_host import SimHost
    from center.showdown.sim_seeds import RunSecret

    team_file, seed = DOUBLES[battle_format]
    team = (TEAMS / team_file).read_text(encoding="utf-8")
    with (
        SimHost() as host,
        PokemonEnv(
            battle_format,
            backend="sim",
            server=host,
            teams={"player_0": team, "player_1": team},
            run_secret=RunSecret.from_seed(SECRET_SEED),
        ) as env,
    ):
        _, infos = env.reset(seed=seed)
        while env.agents:
            actions = {}
            for p in env.agents:
                if not infos[p]["needs_action"]:
                    continue
                battle = env.battle(p)
                helper = env.agent_objects[p].doubles  # type: ignore[attr-defined]
                actions[p] = helper.random_legal_action(battle)
            _, _, _, _, infos = env.step(actions)
        battle = env.battle("player_0")
        assert battle is not None
        recorded = env.session.seats["player_0"].frames
        _write(
            out,
            battle_format,
            {
                "format": battle_format,
                "battle_tag": battle.battle_tag,
                "source": f"scripts/make_checker_samples.py --format {battle_format} "
                f"(simulator, run secret of seed {SECRET_SEED}, episode seed {seed}, "
                f"team tests/data/{team_file})",
                "frames": {battle.player_username: [_untimed(f) for f in recorded]},
            },
        )


def main(argv: list[str] | None = None) -> int:
    """Write the samples the command line asks for; print what was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--format",
        choices=["singles", *DOUBLES],
        default="singles",
        help="singles (the samples from tests/fixtures/battles) or a doubles format to record",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=TARGET,
        help="the folder to write to (default: edge/checker/samples)",
    )
    options = parser.parse_args(argv)
    if options.format == "singles":
        singles(options.out)
    else:
        doubles(options.format, options.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
