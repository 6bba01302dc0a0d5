"""Train MaskablePPO on MaplePokemonSim-v0 and export its policy to a numpy-only user module.

    python scripts/train_maskable_ppo.py --timesteps 200000 --out agents/learned_policy/mine.npz

Against random legal play on the seeded simulator, with the environment's masks; the network is
written as a pickle-free ``.npz`` (checked against torch's logits) that ``agents.learned_policy``
runs with numpy alone. Needs the ``train`` extra. The whole path: docs/training.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.torch_layers import FlattenExtractor

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    # User modules are imported with the folder of candidates.json on sys.path.
    sys.path.insert(0, str(ROOT))

import center  # noqa: E402  (registers MaplePokemonSim-v0)
from agents.learned_policy.policy import MLPWeights  # noqa: E402
from edge.contract.user_module import load_user_model  # noqa: E402
from edge.errors import EdgeError  # noqa: E402
from edge.maple.state_observer import StateObserver  # noqa: E402

ACTIVATION_NAMES = {torch.nn.Tanh: "tanh", torch.nn.ReLU: "relu"}


class OutcomeCounter(BaseCallback):
    """Counts the learner's results (``info["won"]``) over the whole run and the last 200 episodes."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[bool | None] = []

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done:
                self.outcomes.append(info.get("won"))
        return True

    def summary(self, last: int = 200) -> dict[str, Any]:
        """Episodes, and wins/losses/no result of all of them and of the last ``last``."""

        def count(outcomes: list[bool | None]) -> dict[str, int]:
            c = Counter(outcomes)
            return {"won": c[True], "lost": c[False], "no_result": c[None]}

        return {
            "episodes": len(self.outcomes),
            "all": count(self.outcomes),
            f"last_{last}": count(self.outcomes[-last:]),
        }


def export_policy(model: MaskablePPO, feature_names: list[str]) -> MLPWeights:
    """The policy network of ``model`` (flatten, MLP, action head) as numpy arrays."""
    policy = model.policy
    if not isinstance(policy.pi_features_extractor, FlattenExtractor):
        raise ValueError("only MlpPolicy's FlattenExtractor is exported")
    activation = ACTIVATION_NAMES.get(policy.activation_fn)
    if activation is None:
        raise ValueError(f"activation {policy.activation_fn.__name__} is not exported")
    layers = [m for m in policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    head = policy.action_net
    if not isinstance(head, torch.nn.Linear):
        raise ValueError("the action head is not a linear layer")
    layers.append(head)
    return MLPWeights(
        weights=[layer.weight.detach().cpu().numpy().T.copy() for layer in layers],
        biases=[layer.bias.detach().cpu().numpy().copy() for layer in layers],
        activation=activation,
        feature_names=feature_names,
    )


def check_export(model: MaskablePPO, weights: MLPWeights, observations: np.ndarray) -> float:
    """Largest difference between torch's and numpy's logits on ``observations``; raises if big."""
    with torch.no_grad():
        obs = torch.as_tensor(observations, dtype=torch.float32)
        distribution = model.policy.get_distribution(obs).distribution
        if not isinstance(distribution, torch.distributions.Categorical):
            raise ValueError("only a Discrete action space is exported")
        expected = distribution.logits.cpu().numpy()
    got = weights.logits(observations.astype(np.float32))
    # torch's Categorical keeps log-softmax(logits): compare both shifted to a maximum of 0.
    got = got - got.max(axis=1, keepdims=True)
    expected = expected - expected.max(axis=1, keepdims=True)
    difference = float(np.max(np.abs(got - expected)))
    if difference > 1e-3:
        raise RuntimeError(f"the exported network differs from torch's by {difference:.2e}")
    return difference


def write_module_weights(
    model: MaskablePPO, out: Path, conditions: dict[str, Any], outcomes: OutcomeCounter
) -> None:
    """Export ``model``'s policy to ``out`` (checked against torch) and its conditions beside it."""
    weights = export_policy(model, StateObserver().feature_names())
    seen = model.rollout_buffer.observations.reshape(-1, weights.n_inputs)
    difference = check_export(model, weights, np.asarray(seen[:256], dtype=np.float32))
    out.parent.mkdir(parents=True, exist_ok=True)
    weights.save(out)
    record = {
        **conditions,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "timesteps": int(model.num_timesteps),
        "training_outcomes": outcomes.summary(),
        "layers": [list(w.shape) for w in weights.weights],
        "activation": weights.activation,
        "export_max_logit_difference": difference,
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


class TrainingProgress(BaseCallback):
    """A progress bar of this run's steps (steps/s), with the mean reward of the last episodes."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        self.start = 0
        self.bar: Any = None

    def _on_training_start(self) -> None:
        from tqdm import tqdm

        self.start = self.num_timesteps  # a continued run (--init-from) counts from where it was
        self.bar = tqdm(
            total=self.steps, unit=" steps", desc="training", file=sys.stderr, dynamic_ncols=True
        )

    def _on_step(self) -> bool:
        self.bar.update(self.num_timesteps - self.start - self.bar.n)
        return True

    def _on_rollout_end(self) -> None:
        episodes = list(self.model.ep_info_buffer or [])
        if episodes:
            mean = float(np.mean([episode["r"] for episode in episodes]))
            self.bar.set_postfix_str(f"mean episode reward {mean:+.2f} (last {len(episodes)})")

    def _on_training_end(self) -> None:
        self.bar.close()


def export_path(out: Path, steps: int) -> Path:
    """Where ``--export-every`` writes the export after ``steps`` steps: beside ``out``, never it."""
    return out.with_name(f"{out.stem}-{steps}{out.suffix}")


class PeriodicExport(BaseCallback):
    """Exports the policy (and saves the model zip, given one) every ``every`` steps, after a
    rollout, so that a long run leaves results and can be continued (``--init-from``). Each export
    goes to its own file beside ``--out`` (:func:`export_path`); ``--out`` is written at the end."""

    def __init__(
        self,
        every: int,
        out: Path,
        conditions: dict[str, Any],
        outcomes: OutcomeCounter,
        save_model: Path | None,
    ) -> None:
        super().__init__()
        self.every, self.out, self.conditions, self.outcomes = every, out, conditions, outcomes
        self.save_model = save_model
        self.last = 0

    def _on_training_start(self) -> None:
        self.last = self.num_timesteps  # a continued run (--init-from) counts from where it was

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.num_timesteps - self.last >= self.every:
            self.last = self.num_timesteps
            assert isinstance(self.model, MaskablePPO)
            path = export_path(self.out, self.num_timesteps)
            write_module_weights(self.model, path, self.conditions, self.outcomes)
            if self.save_model is not None:
                self.model.save(self.save_model)
            from tqdm import tqdm

            tqdm.write(f"exported after {self.num_timesteps} steps: {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=200_000, help="environment steps")
    parser.add_argument("--format", default="gen9bssfactory", help="battle format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-steps", type=int, default=512, help="PPO rollout length")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the weights file to write (its training conditions go beside it, as .json)",
    )
    parser.add_argument(
        "--export-every",
        type=int,
        default=0,
        metavar="N",
        help="also export every N steps, each to OUT-STEPS.npz beside --out",
    )
    parser.add_argument(
        "--tensorboard", type=Path, metavar="DIR", help="write SB3's TensorBoard log to DIR"
    )
    parser.add_argument("--save-model", type=Path, help="also save SB3's own model zip here")
    parser.add_argument(
        "--init-from", type=Path, help="continue training a model zip saved with --save-model"
    )
    parser.add_argument(
        "--opponent",
        metavar="ID",
        help="train against this candidate of --candidates, in-process (default: random legal)",
    )
    parser.add_argument(
        "--candidates",
        type=Path,
        default=Path("candidates.json"),
        help="the candidates file of --opponent (default: ./candidates.json)",
    )
    args = parser.parse_args(argv)
    if args.timesteps < 1:
        parser.error("--timesteps must be at least 1")
    if args.tensorboard is not None and importlib.util.find_spec("tensorboard") is None:
        parser.error("--tensorboard needs the tensorboard package: pip install -e '.[train]'")

    torch.set_num_threads(1)  # small networks: more threads only contend with the simulator
    env_kwargs: dict[str, Any] = {"battle_format": args.format, "render_mode": None}
    opponent = "random legal actions (RandomLegalPolicy)"
    if args.opponent:
        try:
            user_model = load_user_model(args.candidates, args.opponent).load()
        except EdgeError as exc:
            parser.error(str(exc))
        instance = {"side": "red", "player": "player_1", "battle_format": args.format}
        env_kwargs["opponent"] = user_model.new_policy()
        env_kwargs["opponent_agent"] = user_model.make_agent({**instance, "seed": args.seed})
        opponent = f"{args.opponent} ({user_model.module_id}, in-process)"
    vec = make_vec_env(
        f"center:{center.SIM_SINGLE_ENV_ID}", n_envs=1, seed=args.seed, env_kwargs=env_kwargs
    )
    n_steps = min(args.n_steps, args.timesteps)
    conditions: dict[str, Any] = {
        "command": " ".join(["scripts/train_maskable_ppo.py", *(argv or sys.argv[1:])]),
        "algorithm": "MaskablePPO (sb3-contrib), MlpPolicy",
        "environment": f"{center.SIM_SINGLE_ENV_ID} (seeded simulator)",
        "opponent": opponent,
        "initialised_from": str(args.init_from) if args.init_from else None,
        "format": args.format,
        "seed": args.seed,
        "n_steps": n_steps,
        "batch_size": min(args.batch_size, n_steps),
        "versions": {
            name: version(name)
            for name in ("stable-baselines3", "sb3-contrib", "torch", "gymnasium")
        },
    }
    outcomes = OutcomeCounter()
    callbacks: list[BaseCallback] = [outcomes, TrainingProgress(args.timesteps)]
    if args.export_every > 0:
        callbacks.append(
            PeriodicExport(args.export_every, args.out, conditions, outcomes, args.save_model)
        )
    log = str(args.tensorboard) if args.tensorboard is not None else None
    started = time.perf_counter()
    try:
        if args.init_from is not None:
            model = MaskablePPO.load(args.init_from, env=vec, seed=args.seed, tensorboard_log=log)
        else:
            model = MaskablePPO(
                "MlpPolicy",
                vec,
                n_steps=n_steps,
                batch_size=conditions["batch_size"],
                seed=args.seed,
                verbose=0,
                tensorboard_log=log,
            )
        conditions["n_steps"], conditions["batch_size"] = model.n_steps, model.batch_size
        first = model.num_timesteps
        model.learn(
            total_timesteps=args.timesteps,
            callback=callbacks,
            reset_num_timesteps=args.init_from is None,
        )
        seconds = time.perf_counter() - started
        steps = model.num_timesteps - first
        conditions["training_seconds"] = round(seconds, 1)
        conditions["timesteps_this_run"] = steps
        write_module_weights(model, args.out, conditions, outcomes)
    finally:
        vec.close()
    if args.save_model is not None:
        model.save(args.save_model)
    so_far = f"; {model.num_timesteps} in all with {args.init_from}'s" if args.init_from else ""
    print(
        f"trained {steps} steps in {seconds:.0f} s ({steps / max(seconds, 1e-9):.0f} steps/s, "
        f"{len(outcomes.outcomes)} episodes){so_far}; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
