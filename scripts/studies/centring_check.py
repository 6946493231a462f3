"""The pilot's centring weights against those a converged posterior implies.

NUTS samples each item's ``b`` and ``log a`` partially centred, by a weight the pilot
estimates before sampling (``bayes_dualeval.model.pilot.centring``): the share of the
prior's variance that the item's data remove. A converged fit shows that share directly:
``1 - Var(x_q) / E[s^2]`` over the draws, with ``s`` the item's group scale (``sigma_b``,
``sigma_log_a``). This script prints both, per data set and parameter, as quartiles over
the static items with the correlation between them, for run folders given as
``NAME=RUN`` (``NAME`` a shared real set's folder or a name of
``convergence_study.py``'s lists, ``RUN`` a NUTS run folder of those data). With no run
folders it prints what the pilot reads on simulated static matrices of known spread of
``log a``: the group spread and the median weight of ``log a`` (fast, no fit).

Usage::

    python scripts/studies/centring_check.py [--seeds 3]
    python scripts/studies/centring_check.py chembench=runs/chem paper=runs/paper
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.load import load
from bayes_dualeval.model import pilot
from bayes_dualeval.model.simulate import simulate

HERE = Path(__file__).resolve().parent
REAL = HERE.parents[2] / "shared" / "data" / "real"
#: (models, static questions, true spread of log a)
DESIGNS = [
    (12, 300, 0.3),
    (18, 300, 0.3),
    (22, 2854, 0.3),
    (22, 2854, 0.6),
    (40, 1000, 0.5),
    (80, 1000, 0.7),
    (153, 1140, 0.7),
]


def dataset_named(name: str) -> Dataset:
    """A shared real set by folder name, or a data set of convergence_study.py's lists."""
    if (REAL / name).exists():
        return load(REAL / name)
    sys.path.insert(0, str(HERE))
    import convergence_study as cs

    loader, _ = {**cs.TUNING, **cs.HELD_OUT}[name]
    return loader()


def posterior_weights(dataset: Dataset, run: Path) -> dict[str, np.ndarray]:
    """``1 - Var(x_q) / E[s_g^2]`` per item for ``b`` and ``log a``, from a run's draws."""
    import arviz as az

    post = az.from_netcdf(run / "posterior.nc").posterior
    n = post.sizes["chain"] * post.sizes["draw"]
    group = np.asarray(dataset.item_group)
    out = {}
    for name, values, scale in (
        ("b", post["b"].values, "sigma_b"),
        ("log a", np.log(post["a"].values), "sigma_log_a"),
    ):
        s2 = (post[scale].values.reshape(n, -1) ** 2).mean(axis=0)[group]
        out[name] = np.clip(1.0 - values.reshape(n, -1).var(axis=0) / s2, 0.0, 1.0)
    return out


def compare(name: str, run: Path) -> None:
    ds = dataset_named(name)
    static = np.asarray(ds.item_kind != "arena")
    rows = pilot.centring(ds, True)
    ideal = posterior_weights(ds, run)
    for k, parameter in enumerate(("b", "log a")):
        mine, theirs = rows[k][static], ideal[parameter][static]
        q = lambda x: " / ".join(f"{v:.2f}" for v in np.quantile(x, [0.25, 0.5, 0.75]))  # noqa: E731
        corr = np.corrcoef(mine, theirs)[0, 1] if mine.std() and theirs.std() else float("nan")
        print(f"| {name} | {parameter} | {q(mine)} | {q(theirs)} | {corr:.2f} |", flush=True)


def simulated(seeds: int) -> None:
    print("| data | true spread | seed | spread read | median weight of log a | seconds |")
    print("|---|---|---|---|---|---|")
    for models, questions, sd in DESIGNS:
        for seed in range(seeds):
            static, _, _ = simulate(models, questions, 0, log_a_sd=sd, seed=seed)
            ds = Dataset.from_frames(static=static)
            start = time.perf_counter()
            weights, spread = pilot.log_a_weights(ds, spreads=True)
            seconds = time.perf_counter() - start
            print(
                f"| simulated {models} x {questions} | {sd} | {seed} | {spread[0]:.3f} | "
                f"{np.median(weights):.2f} | {seconds:.2f} |",
                flush=True,
            )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", help="NAME=RUN pairs")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.runs:
        simulated(args.seeds)
        return 0
    print("| data | parameter | pilot's weight (quartiles) | posterior's | correlation |")
    print("|---|---|---|---|---|")
    for pair in args.runs:
        name, _, run = pair.partition("=")
        compare(name, Path(run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
