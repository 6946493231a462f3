"""Contamination study: AUROC of the anomaly ranking for injected successes, over seeds.

For each seed, a static-only benchmark is simulated (``--models`` x ``--items``), ``--share``
of its cells are flipped from failure to success among those that the true model predicts
as failures (true p below ``--max-p``), the model is fitted (short NUTS by default) and the
cells are scored by :func:`bayes_dualeval.checks.anomalies`. Printed per seed: the AUROC of
our score (the anomaly table's order: smallest one-sided p-value first), of the signed
standardised residual, of the baseline ``y (1 - acc_model * acc_item)`` from empirical
accuracies, and of the oracle ``y (1 - p_true)``; the ratio ours / baseline; and how many
cells have q < 0.05 (Benjamini-Yekutieli). ``scripts/studies/cell_audit_study.py`` is the fuller
study (AUPRC, precision@k, other data).

Usage::

    python scripts/studies/contamination_study.py --seeds 5
    python scripts/studies/contamination_study.py --seeds 3 --sampler map
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0, 1, ...)")
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--items", type=int, default=150)
    parser.add_argument("--share", type=float, default=0.03)
    parser.add_argument("--max-p", type=float, default=0.2)
    parser.add_argument("--sampler", choices=("nuts", "svi", "map"), default="nuts")
    parser.add_argument("--warmup", type=int, default=150)
    parser.add_argument("--draws", type=int, default=150)
    parser.add_argument("--chains", type=int, default=2)
    args = parser.parse_args(argv)

    from bayes_dualeval.inference.sampling import SamplerSettings
    from bayes_dualeval.validation.contamination import contamination_study

    head = (
        f"{'seed':>4}  {'ours':>6}  {'resid':>6}  {'base':>6}  {'oracle':>6}  {'ratio':>6}  "
        f"{'q<.05 inj/clean':>15}  {'secs':>5}"
    )
    print(head)
    print("-" * len(head))
    rows = []
    for seed in range(args.seeds):
        settings = SamplerSettings(
            sampler=args.sampler,
            chains=args.chains,
            warmup=args.warmup,
            draws=args.draws,
            seed=seed,
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = contamination_study(
                n_models=args.models,
                n_static=args.items,
                share=args.share,
                max_p=args.max_p,
                seed=seed,
                settings=settings,
            )
        secs = time.perf_counter() - start
        ratio = r["auroc"] / r["auroc_baseline"]
        names = ("auroc", "auroc_residual", "auroc_baseline", "auroc_oracle")
        rows.append([*(r[name] for name in names), ratio])
        flagged = f"{r['flagged_injected']}/{r['flagged_clean']}"
        print(
            f"{seed:>4}  {r['auroc']:6.3f}  {r['auroc_residual']:6.3f}  "
            f"{r['auroc_baseline']:6.3f}  {r['auroc_oracle']:6.3f}  {ratio:6.3f}  "
            f"{flagged:>15}  {secs:5.1f}",
            flush=True,
        )
    mean = np.mean(rows, axis=0)
    print("-" * len(head))
    print(
        f"{'mean':>4}  {mean[0]:6.3f}  {mean[1]:6.3f}  {mean[2]:6.3f}  {mean[3]:6.3f}  "
        f"{mean[4]:6.3f}"
    )
    print(
        f"{r['injected']} injected of {r['cells']} cells per seed; ours = table order, "
        "resid = signed residual, base = y (1 - acc_model acc_item), oracle = y (1 - true p)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
