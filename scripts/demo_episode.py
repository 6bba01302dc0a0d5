"""Play one PokemonEnv episode between two random MapleAgents and show it turn by turn."""

from __future__ import annotations

import argparse

from center.pokemon_env import PokemonEnv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--format", default="gen9bssfactory")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with PokemonEnv(args.format) as env:  # finds or starts the local Showdown server
        _, infos = env.reset(seed=args.seed)
        for p in env.agents:
            env.action_space(p).seed(args.seed)
        while env.agents:
            # a random legal action; a player that is waiting has an all-zero mask (sample gives 0)
            actions = {p: env.action_space(p).sample(mask=infos[p]["action_mask"]) for p in env.agents}
            _, rewards, _, _, infos = env.step(actions)
            print(env.render("ansi"), end="\n\n")
        print(f"end: {env.end_reason}; rewards {({p: float(r) for p, r in rewards.items()})}")


if __name__ == "__main__":
    main()
