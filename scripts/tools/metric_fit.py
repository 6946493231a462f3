"""How well a NUTS run's adapted metric fits the posterior it sampled.

A run folder holds the inverse mass matrix its chains adapted (``adaptation.npz``: a dense
block over the global sites, a diagonal for the rest) and its draws (``posterior.nc``).
For a metric that fits, the generalised eigenvalues of (the draws' covariance, the adapted
dense block) are all near 1, and so is each diagonal site's posterior variance over its
metric entry. This prints both, per run, in the unconstrained coordinates NUTS samples.

The draws are stored constrained. Each site's transform (identity, log or logit) is the one
that maps its draws to within half a posterior standard deviation of the unconstrained mean
the run stored beside its metric (``mean/<site>``); a site that none maps is reported and
left out.

``--from-draws OUT`` copies one run to ``OUT`` with its dense block replaced by the
covariance of its draws, for ``bayes-dualeval fit DATA --warm-start OUT`` (which keeps the
stored metric and tunes the step size only): the probe of docs/performance.md, "Paper
scale, MAP and AlpacaEval under code M".

Usage::

    python scripts/tools/metric_fit.py RUN [RUN ...]
    python scripts/tools/metric_fit.py RUN --from-draws OUT
"""

from __future__ import annotations

import argparse
import shutil
import warnings
from pathlib import Path

import numpy as np

TRANSFORMS = {
    "identity": lambda x: x,
    "log": lambda x: np.log(x),
    "logit": lambda x: np.log(x) - np.log1p(-x),
}


def unconstrained(draws: np.ndarray, stored_mean: np.ndarray) -> np.ndarray | None:
    """``draws`` (n, k) in the coordinates whose mean the run stored, or None."""
    for transform in TRANSFORMS.values():
        with np.errstate(divide="ignore", invalid="ignore"):
            x = transform(draws)
        if not np.isfinite(x).all():
            continue
        # the stored mean may come from other kept draws: within half a posterior sd
        gap = np.abs(x.mean(0) - np.ravel(stored_mean))
        if (gap <= 0.5 * np.maximum(x.std(0), 1e-6)).all():
            return x
    return None


def read(run: Path):
    """The adaptation file, and per site its unconstrained draws (n, k), of one run."""
    import arviz as az

    with np.load(run / "adaptation.npz", allow_pickle=False) as data:
        stored = {key: data[key] for key in data.files}
    posterior = az.from_netcdf(run / "posterior.nc").posterior
    draws, skipped = {}, []
    for key in stored:
        if not key.startswith("mean/"):
            continue
        site = key[len("mean/") :]
        if site not in posterior:
            continue
        x = np.asarray(posterior[site], np.float64)
        x = x.reshape(x.shape[0] * x.shape[1], -1)
        if x.shape[1] != np.size(stored[key]):
            continue
        u = unconstrained(x, stored[key])
        if u is None:
            skipped.append(site)
        else:
            draws[site] = u
    return stored, draws, skipped


def dense_draws(stored: dict, draws: dict) -> np.ndarray:
    """The draws of the dense block's sites, in the block's order: (n, d)."""
    sites = [str(s) for s in stored["dense_sites"]]
    missing = [s for s in sites if s not in draws]
    if missing:
        raise SystemExit(f"the dense block's sites {missing} have no usable draws")
    return np.concatenate([draws[s] for s in sites], axis=1)


def fit_row(run: Path) -> str:
    """One table row: the dense block's eigenvalues and the diagonal's variance ratios."""
    from scipy.linalg import eigh

    stored, draws, skipped = read(run)
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


def from_draws(run: Path, out: Path) -> None:
    """Copy ``run`` to ``out`` with the dense block replaced by its draws' covariance."""
    stored, draws, _ = read(run)
    stored["dense"] = np.cov(dense_draws(stored, draws).T)
    shutil.copytree(run, out)
    np.savez(out / "adaptation.npz", **stored)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="NUTS run folders")
    parser.add_argument("--from-draws", type=Path, default=None, metavar="OUT")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.from_draws is not None:
        if len(args.runs) != 1:
            parser.error("--from-draws takes one run")
        from_draws(args.runs[0], args.from_draws)
        print(f"wrote {args.from_draws}")
        return 0
    print(
        "| run | dense block | eigenvalues, max / min | ratio "
        "| diagonal: posterior var / metric, median (1-99%) |"
    )
    print("|---|---|---|---|---|")
    for run in args.runs:
        print(fit_row(run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
