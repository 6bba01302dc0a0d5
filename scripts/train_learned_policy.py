"""Train the learned sample policy (agents/learned_policy) by imitating the heuristic agent.

1. Plays ``--battles`` battles in PokemonEnv on a Showdown server with the heuristic sample module
   (agents/heuristic) in both seats: every other battle the second seat plays the random sample
   policy instead (heuristic vs random), the others are heuristic vs heuristic. At every decision
   of either seat (team previews excepted) it records the MapleAgent vector, the action mask and
   the heuristic's suggested action (the label, also for the random seat's states).
2. Splits the battles into training and validation, and trains a one-hidden-layer MLP with numpy
   (masked softmax cross-entropy, Adam, mini-batches).
3. Prints train/validation accuracy and writes the weights (``--out``, a pickle-free .npz) and the
   training conditions next to them (same name, ``.json``).

Example::

    python scripts/train_learned_policy.py --server http://127.0.0.1:8123 --battles 300 \\
        --out agents/learned_policy/weights.npz
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    # User modules are imported with the folder of candidates.json on sys.path.
    sys.path.insert(0, str(ROOT))

from agents.heuristic import HeuristicAgent, HeuristicPolicy  # noqa: E402
from agents.learned_policy.policy import MLPWeights, masked_argmax  # noqa: E402
from agents.random_agent import RandomPolicy  # noqa: E402
from center.env.pokemon_env import PokemonEnv  # noqa: E402
from edge.contract.policy import StandalonePolicy  # noqa: E402

SIDES = {"player_0": "blue", "player_1": "red"}


# --------------------------------------------------------------------------------------------
# Data: decisions of real battles, labelled with the heuristic's choice.
# --------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    """Decision points: inputs, legality masks, heuristic labels and the battle each comes from."""

    x: list[np.ndarray] = field(default_factory=list)
    mask: list[np.ndarray] = field(default_factory=list)
    label: list[int] = field(default_factory=list)
    battle: list[int] = field(default_factory=list)

    def add(self, x: np.ndarray, mask: np.ndarray, label: int, battle: int) -> None:
        """Record one decision."""
        self.x.append(np.asarray(x, dtype=np.float32))
        self.mask.append(np.asarray(mask, dtype=bool))
        self.label.append(int(label))
        self.battle.append(battle)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(x, mask, label, battle) as stacked arrays."""
        return (
            np.stack(self.x),
            np.stack(self.mask),
            np.asarray(self.label, dtype=np.int64),
            np.asarray(self.battle, dtype=np.int64),
        )


def generate(
    server: str | None, battle_format: str, n_battles: int, seed: int
) -> tuple[Dataset, Counter[str], list[str]]:
    """Play the battles (see the module docstring); return the data, end reasons and input names."""
    agents = {
        p: HeuristicAgent(
            {}, {"side": s, "player": p, "battle_format": battle_format, "seed": seed}
        )
        for p, s in SIDES.items()
    }
    heuristic = {p: HeuristicPolicy() for p in SIDES}
    random_policy = RandomPolicy(seed)
    data = Dataset()
    reasons: Counter[str] = Counter()
    start = time.perf_counter()
    with PokemonEnv(battle_format, server=server, agents=dict(agents)) as env:
        for episode in range(n_battles):
            policies: dict[str, StandalonePolicy] = dict(heuristic)
            if episode % 2 == 0:
                policies["player_1"] = random_policy
            observations, infos = env.reset(seed=seed + episode)
            while env.agents:
                actions: dict[str, Any] = {}
                for p in env.agents:
                    info = infos[p]
                    if not info["needs_action"]:
                        continue
                    obs = observations[p]
                    if not info["team_preview"]:
                        data.add(obs["maple"], info["action_mask"], int(obs["suggested"]), episode)
                    actions[p] = policies[p].step(
                        obs,
                        0.0,
                        False,
                        info,
                        f"{SIDES[p]}:train:{type(policies[p]).__name__}",
                        env.observation_space(p),
                        env.action_space(p),
                    )
                observations, _, _, _, infos = env.step(actions)
            reasons[str(env.end_reason)] += 1
            if (episode + 1) % 25 == 0 or episode + 1 == n_battles:
                print(
                    f"  {episode + 1}/{n_battles} battles, {len(data.label)} decisions, "
                    f"{time.perf_counter() - start:.0f}s",
                    flush=True,
                )
    return data, reasons, agents["player_0"].observer.feature_names()


# --------------------------------------------------------------------------------------------
# Model: one hidden layer, masked softmax cross-entropy, Adam.
# --------------------------------------------------------------------------------------------


def init_params(
    n_in: int, n_hidden: int, n_out: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """He-initialised weights, zero biases."""
    return {
        "w1": rng.normal(0.0, np.sqrt(2.0 / n_in), (n_in, n_hidden)),
        "b1": np.zeros(n_hidden),
        "w2": rng.normal(0.0, np.sqrt(2.0 / n_hidden), (n_hidden, n_out)),
        "b2": np.zeros(n_out),
    }


def masked_log_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Log-probabilities over the legal actions (illegal ones: -inf)."""
    z = np.where(mask, logits, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    result: np.ndarray = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return result


def loss_and_grads(
    params: dict[str, np.ndarray], x: np.ndarray, mask: np.ndarray, y: np.ndarray, l2: float
) -> tuple[float, dict[str, np.ndarray]]:
    """Mean masked cross-entropy (+ L2 on the weights) and its gradients."""
    pre = x @ params["w1"] + params["b1"]
    hidden = np.maximum(pre, 0.0)
    logits = hidden @ params["w2"] + params["b2"]
    logp = masked_log_softmax(logits, mask)
    n = len(y)
    loss = -float(logp[np.arange(n), y].mean())
    loss += l2 * float((params["w1"] ** 2).sum() + (params["w2"] ** 2).sum())
    dlogits = np.where(mask, np.exp(logp), 0.0)
    dlogits[np.arange(n), y] -= 1.0
    dlogits /= n
    dhidden = (dlogits @ params["w2"].T) * (pre > 0)
    grads = {
        "w2": hidden.T @ dlogits + 2 * l2 * params["w2"],
        "b2": dlogits.sum(axis=0),
        "w1": x.T @ dhidden + 2 * l2 * params["w1"],
        "b1": dhidden.sum(axis=0),
    }
    return loss, grads


class Adam:
    """Adam (Kingma & Ba) over a dict of arrays."""

    def __init__(self, params: dict[str, np.ndarray], lr: float) -> None:
        self.lr = lr
        self.t = 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def update(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """One step, in place."""
        b1, b2, eps = 0.9, 0.999, 1e-8
        self.t += 1
        for k, g in grads.items():
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            m_hat = self.m[k] / (1 - b1**self.t)
            v_hat = self.v[k] / (1 - b2**self.t)
            params[k] -= self.lr * m_hat / (np.sqrt(v_hat) + eps)


def accuracy(weights: MLPWeights, x: np.ndarray, mask: np.ndarray, y: np.ndarray) -> float:
    """Share of decisions where the legal argmax is the heuristic's action."""
    if len(y) == 0:
        return float("nan")
    logits = weights.logits(x)
    predicted = np.asarray([masked_argmax(row, m) for row, m in zip(logits, mask, strict=True)])
    return float((predicted == y).mean())


def train(
    x: np.ndarray,
    mask: np.ndarray,
    y: np.ndarray,
    names: list[str],
    *,
    hidden: int,
    epochs: int,
    batch_size: int,
    lr: float,
    l2: float,
    rng: np.random.Generator,
) -> MLPWeights:
    """Fit the MLP on standardised inputs; the standardisation is stored with the weights."""
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    scale = np.where(std > 1e-6, std, 1.0)
    xs = (x - mean) / scale
    params = init_params(x.shape[1], hidden, mask.shape[1], rng)
    optimizer = Adam(params, lr)
    for epoch in range(epochs):
        order = rng.permutation(len(y))
        losses = []
        for start in range(0, len(y), batch_size):
            batch = order[start : start + batch_size]
            loss, grads = loss_and_grads(params, xs[batch], mask[batch], y[batch], l2)
            optimizer.update(params, grads)
            losses.append(loss)
        if (epoch + 1) % 10 == 0 or epoch + 1 == epochs:
            print(f"  epoch {epoch + 1}/{epochs}: loss {np.mean(losses):.4f}", flush=True)
    return MLPWeights(
        w1=params["w1"].astype(np.float32),
        b1=params["b1"].astype(np.float32),
        w2=params["w2"].astype(np.float32),
        b2=params["b2"].astype(np.float32),
        mean=mean.astype(np.float32),
        scale=scale.astype(np.float32),
        feature_names=names,
    )


# --------------------------------------------------------------------------------------------
# Command line.
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=None, help="Showdown URL (default: find or start one)")
    parser.add_argument("--battles", type=int, default=300, help="battles to play (default 300)")
    parser.add_argument("--format", default="gen9bssfactory", help="battle format")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "agents" / "learned_policy" / "weights.npz",
        help="weights file to write (.npz); the conditions go next to it as .json",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of battles, split and training")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units (default 64)")
    parser.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--l2", type=float, default=1e-3, help="L2 penalty on the weights")
    parser.add_argument("--val-fraction", type=float, default=0.15, help="battles held out")
    args = parser.parse_args(argv)
    if args.battles < 2:
        parser.error("--battles must be at least 2 (some are held out for validation)")
    if not 0.0 < args.val_fraction < 1.0:
        parser.error("--val-fraction must be between 0 and 1")
    if args.out.suffix != ".npz":
        parser.error("--out must end in .npz")
    return args


def main(argv: list[str] | None = None) -> int:
    """Generate data, train, evaluate, write the weights and the conditions."""
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"playing {args.battles} battles of {args.format} (heuristic vs random / vs heuristic)")
    data, reasons, names = generate(args.server, args.format, args.battles, args.seed)
    generation_s = time.perf_counter() - started
    x, mask, y, battle = data.arrays()

    held_out = rng.permutation(args.battles)[: max(1, round(args.val_fraction * args.battles))]
    is_val = np.isin(battle, held_out)
    print(f"{len(y)} decisions ({int((~is_val).sum())} train, {int(is_val.sum())} validation)")
    weights = train(
        x[~is_val],
        mask[~is_val],
        y[~is_val],
        names,
        hidden=args.hidden,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        l2=args.l2,
        rng=rng,
    )
    nontrivial = mask.sum(axis=1) > 1
    results = {
        "train_accuracy": accuracy(weights, x[~is_val], mask[~is_val], y[~is_val]),
        "val_accuracy": accuracy(weights, x[is_val], mask[is_val], y[is_val]),
        "val_accuracy_nontrivial": accuracy(
            weights, x[is_val & nontrivial], mask[is_val & nontrivial], y[is_val & nontrivial]
        ),
    }
    for key, value in results.items():
        print(f"{key}: {value:.3f}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    weights.save(args.out)
    conditions = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["scripts/train_learned_policy.py", *(argv or sys.argv[1:])]),
        "format": args.format,
        "battles": args.battles,
        "opponents": {
            "heuristic_vs_random": (args.battles + 1) // 2,
            "heuristic_vs_heuristic": args.battles // 2,
        },
        "end_reasons": dict(reasons),
        "decisions": {
            "train": int((~is_val).sum()),
            "validation": int(is_val.sum()),
            "validation_nontrivial": int((is_val & nontrivial).sum()),
        },
        "labels": "SimpleHeuristicsPlayer's action via agents.heuristic (both seats' decisions)",
        **{k: round(v, 4) for k, v in results.items()},
        "seed": args.seed,
        "model": {"inputs": weights.n_inputs, "hidden": args.hidden, "outputs": weights.n_actions},
        "training": {
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "lr": args.lr,
            "l2": args.l2,
            "optimizer": "adam",
            "val_fraction": args.val_fraction,
        },
        "poke_env": version("poke-env"),
        "numpy": np.__version__,
        "generation_s": round(generation_s, 1),
        "total_s": round(time.perf_counter() - started, 1),
    }
    conditions_path = args.out.with_suffix(".json")
    conditions_path.write_text(json.dumps(conditions, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) and {conditions_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
