"""Repeated samples count: three answers per (model, question) against one, on the same data.

Issue 53's first target. For each seed, the package's simulator draws a joint data set
(12 models, 150 static questions with ``--samples 3``, 80 arena prompts; shapes nobody
tuned on) and the same data keeping sample 0 only, which is exactly the single-sample data
of that seed (docs/simulator.md). Both are fitted with default NUTS through
:func:`bayes_dualeval.runs.fit.fit`, as the command line fits them (draw-more rounds
included), and the script reports per seed and fit:

* ``theta_sd``: the mean posterior sd of the centred abilities, and the ratio of the
  three-sample fit's to the one-sample fit's (below 1: the extra answers count);
* ``cover90``: the share of the 12 true centred abilities inside their 90% intervals;
* ``spearman``: the leaderboard's rank correlation with the true abilities;
* the convergence verdict (R-hat, bulk / tail ESS over every site, divergences).

Usage::

    python scripts/studies/repeated_samples_study.py --seeds 0 1 2 3 4 5 > repeated.json

Takes about 45 s per fit on two cores (two fits per seed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np


def one_seed(seed: int) -> list[dict]:
    """The two fits of one seed: every sample, and sample 0 alone."""
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import ModelConfig
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.runs.fit import fit

    static, arena, truth = simulate(12, 150, 80, samples=3, seed=seed)
    static["source"], arena["source"] = "bench", "arena"
    rows = []
    for label, part in (("3 samples", static), ("1 sample", static[static["sample"] == 0])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = Dataset.from_frames(static=part, arena=arena)
        start = time.perf_counter()
        result = fit(ds, ModelConfig(), SamplerSettings(sampler="nuts", chains=4, seed=seed))
        theta = result.idata.posterior["theta"].values.reshape(-1, ds.n_models)
        theta = theta - theta.mean(axis=1, keepdims=True)
        true = np.array([truth["theta"][m] for m in ds.models])
        true = true - true.mean()
        lo, hi = np.quantile(theta, [0.05, 0.95], axis=0)
        est = theta.mean(axis=0)
        rank = np.argsort(np.argsort(est)), np.argsort(np.argsort(true))
        conv = result.convergence
        rows.append(
            {
                "seed": seed,
                "fit": label,
                "answers": ds.static_answers,
                "theta_sd": float(theta.std(axis=0).mean()),
                "cover90": float(((true >= lo) & (true <= hi)).mean()),
                "spearman": float(np.corrcoef(*rank)[0, 1]),
                "converged": bool(result.converged),
                "max_rhat": float(conv.max_rhat),
                "min_ess_bulk": float(conv.min_ess_bulk),
                "min_ess_tail": float(conv.min_ess_tail),
                "divergences": int(result.diagnostics["divergences"] or 0),
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    rows[0]["theta_sd_ratio"] = rows[0]["theta_sd"] / rows[1]["theta_sd"]
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpyro

    numpyro.set_host_device_count(4)
    rows = []
    for seed in args.seeds:
        for row in one_seed(seed):
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    ratios = [r["theta_sd_ratio"] for r in rows if "theta_sd_ratio" in r]
    summary = {
        "seeds": args.seeds,
        "theta_sd_ratio_mean": float(np.mean(ratios)),
        "theta_sd_ratio_range": [float(min(ratios)), float(max(ratios))],
        "rows": rows,
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
