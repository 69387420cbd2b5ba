"""Statistical efficiency: how many more iterations a policy needs to reach the target accuracy
when its updates sum fewer samples (DPAR, k-of-n, Partial-Reduce) or stale gradients
(Partial-Reduce), measured on the testbed's training and fitted to a two-parameter model.

Measurement: the testbed's job (digits MLP, global batch 256, SGD with momentum; in-process,
sim.gradients.DigitsTraining) trained with every update summing only the first ``f`` of the
batch, or with a share of its samples computed on a model several updates old and discounted
as Partial-Reduce discounts them; iterations until 95 % test accuracy, per seed. (Updates
that are *all* stale do not converge at this learning rate and momentum: no policy makes
them.)

Model: iterations to the target, relative to full fresh batches,

    I(f, tau) / I(1, 0) = (1 + rho / f) / (1 + rho) * (1 + sigma * tau)

— the large-batch model of McCandlish et al. (2018), steps ~ 1 + B_noise / B, with
rho = B_noise / B, times a linear penalty in the update's mean staleness tau (weighted as its
normaliser weights the samples). An update's *efficiency* is the inverse
ratio; a run's time to accuracy is its mean iteration time over its mean efficiency, times the
iterations full fresh batches need. Using it beyond the testbed assumes a job's batch sits at
the same point of its own noise scale (rho) as the testbed's does.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from experiments import result_files
from sim.gradients import DigitsTraining

TARGET = 0.95
MAX_ITERATIONS = 600
FRACTIONS = (1.0, 0.75, 0.5, 0.25)
STALE_SHARES = (0.25, 0.5)
STALENESS = (1, 2, 4)


@dataclass(frozen=True)
class Efficiency:
    rho: float
    sigma: float

    def iterations(self, fraction, staleness=0.0):
        """I(f, tau) / I(1, 0)."""
        f = np.maximum(np.asarray(fraction, np.float64), 1e-6)
        return (1 + self.rho / f) / (1 + self.rho) * (1 + self.sigma * np.asarray(staleness))

    def of(self, fraction, staleness=0.0) -> float:
        """Mean efficiency of a run's updates (per update: fraction summed, mean staleness)."""
        return float(np.mean(1.0 / self.iterations(fraction, staleness)))


def iterations_to_target(fraction: float, stale: float, staleness: int, seed: int,
                         target: float = TARGET) -> int:
    """Train until ``target`` test accuracy, each update summing the first ``fraction`` of the
    batch, a share ``stale`` of those samples on the model ``staleness`` updates old and scaled
    by 1 / (1 + staleness) as Partial-Reduce does; MAX_ITERATIONS if never."""
    run = DigitsTraining(256, seed)
    old = DigitsTraining(256, seed)
    models = deque(maxlen=staleness + 1)
    discount = 1.0 / (1 + staleness)
    kept = max(1, round(fraction * 256))
    late = round(stale * kept)
    shares = (kept - late, late, 256 - kept)
    for it in range(MAX_ITERATIONS):
        models.append({k: v.clone() for k, v in run.net.state_dict().items()})
        grads, weights = [run.gradient(it, shares, 0)], [kept - late]
        if late:
            old.net.load_state_dict(models[0])
            grads.append(old.gradient(it, shares, 1) * discount)
            weights.append(late * discount)
        run.apply(grads, weights)
        if run.accuracy() >= target:
            return it + 1
    return MAX_ITERATIONS


def mean_staleness(stale: float, staleness: int) -> float:
    """An update's staleness, weighted as its normaliser weights the samples."""
    late = stale / (1 + staleness)
    return late * staleness / (1 - stale + late)


def measure(seeds=range(4), progress: bool = True) -> list[dict]:
    torch.manual_seed(0)
    grid = [(f, 0.0, 0) for f in FRACTIONS] + [(1.0, s, t) for s in STALE_SHARES
                                               for t in STALENESS]
    cells = [(f, s, t, seed) for f, s, t in grid for seed in seeds]
    return [{"fraction": f, "stale": s, "staleness": t, "seed": seed,
             "mean_staleness": round(mean_staleness(s, t), 4),
             "iterations": iterations_to_target(f, s, t, seed)}
            for f, s, t, seed in tqdm(cells, desc="efficiency", disable=not progress)]


def fit(points: list[dict]) -> Efficiency:
    """Least squares of log I(f, tau) / I(1, 0) per seed, over a grid then refined."""
    from scipy.optimize import minimize

    base = {p["seed"]: p["iterations"] for p in points if p["fraction"] == 1
            and p["stale"] == 0}
    ratio = np.array([p["iterations"] / base[p["seed"]] for p in points])
    f = np.array([p["fraction"] for p in points])
    t = np.array([p["mean_staleness"] for p in points])

    def loss(x):
        model = Efficiency(abs(x[0]), abs(x[1])).iterations(f, t)
        return float(np.sum((np.log(model) - np.log(ratio)) ** 2))

    best = minimize(loss, [0.3, 0.1], method="Nelder-Mead")
    return Efficiency(round(abs(best.x[0]), 4), round(abs(best.x[1]), 4))


def write(points: list[dict], eff: Efficiency, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "efficiency.json"
    result_files.write_text(path, json.dumps({"target_accuracy": TARGET,
                                              "model": __doc__.split("\n\n")[2],
                                              "fit": {"rho": eff.rho, "sigma": eff.sigma},
                                              "points": points}, indent=1) + "\n")
    return path
