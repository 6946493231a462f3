"""How well a NUTS run's adapted metric fits the posterior it sampled.

A run folder holds the inverse mass matrix its chains adapted (``adaptation.npz``: a dense
block over the global sites, a diagonal for the rest) and its draws (``posterior.nc``).
For a metric that fits, the generalised eigenvalues of (the draws' covariance, the adapted
dense block) are all near 1, and so is each diagonal site's posterior variance over its
metric entry. This prints both, per run, in the unconstrained coordinates NUTS samples.

The draws are stored constrained. Each site is mapped to the coordinates NUTS sampled by the
run's own specification (its transform, as the fit computed the means it stored:
``bayes_dualeval.inference.warm.latent_transforms``), which needs the data the run was
fitted to (``--data``); a site whose draws do not match its stored mean's size is left out.

``--from-draws OUT`` copies one run to ``OUT`` with its dense block replaced by the
covariance of its draws, for ``bayes-dualeval fit DATA --warm-start OUT`` (which keeps the
stored metric and tunes the step size only): the probe of docs/performance.md, "Paper
scale, MAP and AlpacaEval under code M".

Usage::

    python scripts/tools/metric_fit.py --data DATA RUN [RUN ...]
    python scripts/tools/metric_fit.py --data DATA RUN --from-draws OUT
"""

from __future__ import annotations

import argparse
import json
import shutil
import warnings
from pathlib import Path

import numpy as np


def read(run: Path, data: Path):
    """The adaptation file, and per site its unconstrained draws (n, k), of one run."""
    import arviz as az

    import bayes_dualeval as bd
    from bayes_dualeval.inference.warm import latent_transforms
    from bayes_dualeval.model.config import ModelConfig
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.spec import DualEvalModel
    from bayes_dualeval.runs.warm_start import load

    stored = load(run)
    del stored["run"]  # added by load, not part of the file
    config = ModelConfig(**json.loads(str(stored["config"])))
    dataset = DualEvalModel(config).fitted_data(bd.load(data))
    inputs, _ = build_inputs(dataset, config, centred="auto")
    means = {
        key[len("mean/") :]: value for key, value in stored.items() if key.startswith("mean/")
    }
    transforms = latent_transforms(inputs, config, means)
    posterior = az.from_netcdf(run / "posterior.nc").posterior
    draws, skipped = {}, []
    for site, mean in means.items():
        if site not in posterior or site not in transforms:
            continue
        x = np.asarray(posterior[site], np.float64)
        x = np.asarray(transforms[site].inv(x.reshape(-1, *x.shape[2:])), np.float64)
        x = x.reshape(x.shape[0], -1)
        if x.shape[1] != np.size(mean):
            skipped.append(site)
        else:
            draws[site] = x
    return stored, draws, skipped


def dense_draws(stored: dict, draws: dict) -> np.ndarray:
    """The draws of the dense block's sites, in the block's order: (n, d)."""
    sites = [str(s) for s in stored["dense_sites"]]
    missing = [s for s in sites if s not in draws]
    if missing:
        raise SystemExit(f"the dense block's sites {missing} have no usable draws")
    return np.concatenate([draws[s] for s in sites], axis=1)


def fit_row(run: Path, data: Path) -> str:
    """One table row: the dense block's eigenvalues and the diagonal's variance ratios."""
    from scipy.linalg import eigh

    stored, draws, skipped = read(run, data)
    block = dense_draws(stored, draws)
    eig = eigh(np.cov(block.T), stored["dense"], eigvals_only=True)
    dense = {str(s) for s in stored["dense_sites"]}
    ratios = [draws[s].var(0) / np.ravel(stored[f"var/{s}"]) for s in draws if s not in dense]
    if ratios:
        r = np.concatenate(ratios)
        lo, hi = np.quantile(r, [0.01, 0.99])
        diagonal = f"{np.median(r):.2f} ({lo:.2f}-{hi:.2f})"
    else:
        diagonal = "-"
    note = f" (left out: {', '.join(skipped)})" if skipped else ""
    return (
        f"| {run} | {block.shape[1]} | {eig.max():.2f} / {eig.min():.3f} | "
        f"{eig.max() / eig.min():.1f} | {diagonal}{note} |"
    )


def from_draws(run: Path, data: Path, out: Path) -> None:
    """Copy ``run`` to ``out`` with the dense block replaced by its draws' covariance."""
    stored, draws, _ = read(run, data)
    stored["dense"] = np.cov(dense_draws(stored, draws).T)
    shutil.copytree(run, out)
    np.savez(out / "adaptation.npz", **stored)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="NUTS run folders")
    parser.add_argument("--data", type=Path, required=True, help="the data the runs fitted")
    parser.add_argument("--from-draws", type=Path, default=None, metavar="OUT")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.from_draws is not None:
        if len(args.runs) != 1:
            parser.error("--from-draws takes one run")
        from_draws(args.runs[0], args.data, args.from_draws)
        print(f"wrote {args.from_draws}")
        return 0
    print(
        "| run | dense block | eigenvalues, max / min | ratio "
        "| diagonal: posterior var / metric, median (1-99%) |"
    )
    print("|---|---|---|---|---|")
    for run in args.runs:
        print(fit_row(run, args.data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
