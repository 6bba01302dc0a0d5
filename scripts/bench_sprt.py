"""Measure what the SPRT saves: battles to a decision against the fixed -n with the same error rates.

    python scripts/bench_sprt.py --battles 200 --simulations 2000
    python scripts/bench_sprt.py --quick        # a few battles and simulations, to see it works

How (real battles, tilted distributions, the fixed -n, the simulated SPRT): docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from center.evaluation.judging.sprt import (  # noqa: E402
    SprtSettings,
    elo_to_score,
    llr_logistic_batch,
)

SEP_EVAL = [sys.executable, "-c", "from center.commands.run import sep_eval; sep_eval()"]
PAIRINGS = (("heuristic", "maxpower"), ("learned", "heuristic"), ("random", "random_b"))
#: the sample random agent again, with another seed: "the same agent" for the false-positive rate
EXTRA_CANDIDATES = {
    "random_b": {"userModuleID": "agents.random_agent", "args": {"seed": 1}, "logName": "Random B"}
}
SCORES = np.array([0.0, 0.25, 0.5, 0.75, 1.0])  # a pair's score over 2 battles, on [0, 1]
QUICK_BATTLES, QUICK_SIMULATIONS = 8, 40


def write_candidates(root: Path) -> Path:
    """The sample candidates plus :data:`EXTRA_CANDIDATES` (imported from the repository, the
    subprocess's working directory)."""
    entries = json.loads((REPO / "candidates.json").read_text(encoding="utf-8"))
    entries.update(EXTRA_CANDIDATES)
    path = root / "candidates.json"
    path.write_text(json.dumps(entries, indent=2), encoding="utf-8")
    return path


def same_agent(candidates: Path, a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` run the same module (the same agent, perhaps another seed)."""
    entries = json.loads(candidates.read_text(encoding="utf-8"))
    return bool(entries[a]["userModuleID"] == entries[b]["userModuleID"])


def record_pairs(
    a: str, b: str, battles: int, seed: int, log_dir: Path, candidates: Path
) -> list[int]:
    """Play ``a`` vs ``b`` paired (real sep_eval) and return ``a``'s pentanomial from battles.csv."""
    command = [*SEP_EVAL, a, b, "-n", str(battles), "--paired", "--seed", str(seed)]
    command += ["--backend", "sim", "--candidates", str(candidates)]
    command += ["-l", str(log_dir), "-q"]
    limit = 300 + 10 * battles  # seconds: a battle takes about one; a hung run must end
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=limit)
    except subprocess.TimeoutExpired:
        sys.exit(f"sep_eval {a} {b} did not finish within {limit} s")
    if done.returncode != 0:
        sys.exit(f"sep_eval failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    with (log_dir / "battles.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    # Twins share a seed; a mirror match names the same agent on both sides, so the first battle
    # of each pair (its blue) stands for "a".
    first: dict[str, dict[str, str]] = {}
    pentanomial = [0, 0, 0, 0, 0]
    for r in sorted(rows, key=lambda r: r["battle_id"].rsplit("-", 1)[-1]):
        if r["winner"] == "none":
            continue
        twin = first.pop(r["seed"], None)
        if twin is None:
            first[r["seed"]] = r
            continue
        points = 0.0
        for battle, side_of_a in ((twin, "blue"), (r, "red")):
            points += {"tie": 0.5}.get(battle["winner"], float(battle["winner"] == side_of_a))
        pentanomial[round(2 * points)] += 1
    return pentanomial


def tilt(p: NDArray[np.float64], mean: float) -> NDArray[np.float64]:
    """The distribution on SCORES closest (max likelihood) to ``p`` with the given mean."""
    a = SCORES - mean
    lo, hi = -1 / a[-1] * (1 - 1e-12), -1 / a[0] * (1 - 1e-12)
    for _ in range(200):
        mid = (lo + hi) / 2
        if float((p * a / (1 + mid * a)).sum()) > 0:
            lo = mid
        else:
            hi = mid
    q = p / (1 + (lo + hi) / 2 * a)
    return np.asarray(q / q.sum(), dtype=np.float64)


def _mean_sd(p: NDArray[np.float64]) -> tuple[float, float]:
    mean = float((p * SCORES).sum())
    return mean, math.sqrt(float((p * (SCORES - mean) ** 2).sum()))


def fixed_pairs(p0: NDArray[np.float64], p1: NDArray[np.float64], alpha: float, beta: float) -> int:
    """Pairs a fixed-length test needs for error rates alpha at ``p0`` and beta at ``p1``."""
    z_a, z_b = statistics.NormalDist().inv_cdf(1 - alpha), statistics.NormalDist().inv_cdf(1 - beta)
    (s0, sd0), (s1, sd1) = _mean_sd(p0), _mean_sd(p1)
    return max(1, math.ceil(((z_a * sd0 + z_b * sd1) / (s1 - s0)) ** 2))


def fixed_errors(
    p0: NDArray[np.float64], p1: NDArray[np.float64], n: int, alpha: float, runs: int, rng: Any
) -> tuple[float, float]:
    """The fixed test's measured error rates: accept H1 when the mean pair score passes the
    threshold ``s0 + z_a sd0 / sqrt(n)``."""
    s0, sd0 = _mean_sd(p0)
    threshold = s0 + statistics.NormalDist().inv_cdf(1 - alpha) * sd0 / math.sqrt(n)
    false_h1 = (rng.multinomial(n, p0, size=runs) @ SCORES / n > threshold).mean()
    false_h0 = (rng.multinomial(n, p1, size=runs) @ SCORES / n <= threshold).mean()
    return float(false_h1), float(false_h0)


@dataclass
class SprtRuns:
    """Simulated SPRTs on one distribution: decisions and pairs used."""

    h1: float
    h0: float
    capped: float
    mean_pairs: float


def simulate_sprt(
    p: NDArray[np.float64], settings: SprtSettings, runs: int, cap: int, rng: Any
) -> SprtRuns:
    """``runs`` SPRTs drawing pairs from ``p``, each stopped at a bound or at ``cap`` pairs."""
    lower, upper = settings.bounds
    counts = np.zeros((runs, 5))
    active = np.ones(runs, dtype=bool)
    pairs_used = np.full(runs, cap)
    decision = np.zeros(runs, dtype=int)  # 1: H1, -1: H0, 0: none (capped)
    for k in range(1, cap + 1):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        counts[idx, rng.choice(5, size=len(idx), p=p)] += 1
        llr = llr_logistic_batch(counts[idx], settings.elo0, settings.elo1)
        up, down = llr >= upper, llr <= lower
        decision[idx[up]], decision[idx[down]] = 1, -1
        done = idx[up | down]
        pairs_used[done] = k
        active[done] = False
    return SprtRuns(
        h1=float((decision == 1).mean()),
        h0=float((decision == -1).mean()),
        capped=float((decision == 0).mean()),
        mean_pairs=float(pairs_used.mean()),
    )


def elo_of(score: float) -> float:
    score = min(max(score, 1e-6), 1 - 1e-6)
    return -400 * math.log10(1 / score - 1)


def conditions() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {load:.1f} at the end"
    )


def bench_pairing(
    a: str,
    b: str,
    pentanomial: list[int],
    same: bool,
    settings: SprtSettings,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Every measure of one pairing, from its recorded pentanomial."""
    rng = np.random.default_rng(args.seed)
    counts = np.asarray(pentanomial, dtype=float) + 0.5  # no empty cell: tilting needs every one
    empirical = counts / counts.sum()
    if same:  # the same agent: its true difference is 0, whatever the sample says
        empirical = (empirical + empirical[::-1]) / 2
    p0 = tilt(empirical, elo_to_score(settings.elo0))
    p1 = tilt(empirical, elo_to_score(settings.elo1))
    n = fixed_pairs(p0, p1, settings.alpha, settings.beta)
    alpha_fixed, beta_fixed = fixed_errors(p0, p1, n, settings.alpha, args.simulations, rng)
    cap = args.cap * n
    at_h0 = simulate_sprt(p0, settings, args.simulations, cap, rng)
    at_h1 = simulate_sprt(p1, settings, args.simulations, cap, rng)
    real = simulate_sprt(empirical, settings, args.simulations, cap, rng)
    fixed_battles = 2 * n
    return {
        "pairing": f"{a} vs {b}",
        "same_agent": same,
        "recorded_pairs": sum(pentanomial),
        "pentanomial": pentanomial,
        "real_elo": round(elo_of(_mean_sd(empirical)[0]), 1),
        "fixed_battles": fixed_battles,
        "fixed_alpha": alpha_fixed,
        "fixed_beta": beta_fixed,
        "sprt_at_h0": vars(at_h0),
        "sprt_at_h1": vars(at_h1),
        "sprt_at_real": vars(real),
        "ratio_at_h0": 2 * at_h0.mean_pairs / fixed_battles,
        "ratio_at_h1": 2 * at_h1.mean_pairs / fixed_battles,
        "ratio_at_real": 2 * real.mean_pairs / fixed_battles,
    }


def table(results: list[dict[str, Any]], settings: SprtSettings) -> str:
    lines = [
        f"{settings.describe()}; SPRT capped at the fixed -n times the --cap",
        f"{'pairing':<22} {'pairs':>5} {'Elo':>6} {'fixed -n':>8} {'its a/b':>11}  "
        f"{'SPRT at H0: battles a':>22}  {'at H1: battles b':>17}  {'at real Elo: battles H1/H0/cap':>31}  "
        f"{'ratio H0/H1/real':>17}",
    ]
    for r in results:
        h0, h1, real = r["sprt_at_h0"], r["sprt_at_h1"], r["sprt_at_real"]
        lines.append(
            f"{r['pairing']:<22} {r['recorded_pairs']:>5} {r['real_elo']:>6.0f} "
            f"{r['fixed_battles']:>8} {r['fixed_alpha']:>5.3f}/{r['fixed_beta']:<5.3f}  "
            f"{2 * h0['mean_pairs']:>14.0f} {h0['h1']:>7.3f}  {2 * h1['mean_pairs']:>9.0f} "
            f"{h1['h0']:>7.3f}  {2 * real['mean_pairs']:>12.0f} "
            f"{real['h1']:.2f}/{real['h0']:.2f}/{real['capped']:.2f}  "
            f"{r['ratio_at_h0']:>5.2f}/{r['ratio_at_h1']:.2f}/{r['ratio_at_real']:.2f}"
        )
    for r in (r for r in results if r["same_agent"]):
        lines.append(
            f"same agent ({r['pairing']}): SPRT false-positive rate (H1 accepted at 0 Elo) "
            f"{r['sprt_at_real']['h1']:.3f} (alpha {settings.alpha})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--battles", type=int, default=200, help="recorded battles per pairing")
    parser.add_argument("--simulations", type=int, default=2000, help="SPRTs per distribution")
    parser.add_argument("--elo0", type=float, default=0.0)
    parser.add_argument("--elo1", type=float, default=50.0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--beta", type=float, default=0.05)
    parser.add_argument("--cap", type=int, default=5, help="the SPRT's maximum, in fixed -n's")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="a few battles and simulations")
    parser.add_argument("--keep", type=Path, default=None, help="keep the LOG_DIRs here")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    parser.add_argument(
        "--pairing", nargs=2, action="append", metavar=("A", "B"), help="instead of the defaults"
    )
    args = parser.parse_args()
    if args.quick:
        args.battles, args.simulations = QUICK_BATTLES, QUICK_SIMULATIONS
    if args.battles < 2 or args.battles % 2:
        parser.error(f"--battles must be even and at least 2 (pairs), got {args.battles}")
    settings = SprtSettings(args.elo0, args.elo1, args.alpha, args.beta)
    pairings = [tuple(p) for p in args.pairing] if args.pairing else list(PAIRINGS)
    start = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        candidates = write_candidates(root)
        for a, b in pairings:
            print(f"recording {args.battles} battles of {a} vs {b} ...", flush=True)
            log_dir = root / f"{a}-vs-{b}"
            pentanomial = record_pairs(a, b, args.battles, args.seed, log_dir, candidates)
            same = same_agent(candidates, a, b)
            results.append(bench_pairing(a, b, pentanomial, same, settings, args))
    print(table(results, settings))
    print(f"{time.perf_counter() - start:.0f} s; {conditions()}")
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
