"""Validation of `bayes-dualeval calibrate`: new questions' b against the truth, drift found.

Each seed simulates one static benchmark of 300 questions answered by the same models
(:func:`bayes_dualeval.validation.versions.linked_versions`): v1 holds questions 0-199,
v2 questions 100-299 (100 common, 100 new), with v2's answers drawn afresh and 5 common
questions moved by ``--shift`` logits (sign at random; with ``--toward-centre`` the five
whose ``|b|`` is nearest ``shift / 2``, each to ``-b``, through the models' mean ability).
A bank is fitted on v1 with the default NUTS settings (4 chains, 400 warm-up, 1000
draws), v2 is calibrated against it (90% intervals, drift threshold 0.5, false discovery
level 0.1), and per seed:

* ``spearman``: Spearman correlation of the new questions' ``b_mean`` with their true b;
* ``coverage_90``: share of new questions whose 90% interval holds the true b (the
  bank's scale is the simulation's up to the posterior's uncertainty, which the
  intervals carry: the abilities are integrated over the bank's draws);
* ``found`` / ``false_flags``: drifted common questions flagged, and flagged ones that
  did not drift.

Usage::

    python scripts/studies/calibrate_study.py --seeds 1 2 3 4 5 --out /tmp/calibrate.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from measure_common import finish, fit_quietly, progress


def run_seed(seed: int, n_models: int, shift: float, toward_centre: bool) -> dict:
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.measure.bank import Bank
    from bayes_dualeval.measure.calibrate import calibrate
    from bayes_dualeval.runs.fit import write_run
    from bayes_dualeval.validation.versions import linked_versions, truth_table

    root = Path(tempfile.mkdtemp(prefix=f"calibrate-{seed}-"))
    truth = linked_versions(
        root, n_models=n_models, shift=shift, toward_centre=toward_centre, seed=seed
    )
    start = time.perf_counter()
    bank_fit = fit_quietly(root / "v1", SamplerSettings(sampler="nuts", seed=seed))
    write_run(bank_fit, root / "bank")
    fitted = time.perf_counter() - start
    bank = Bank.from_run(root / "bank", allow_approximate=True)
    result = calibrate(bank, root / "v2", ci=0.9, seed=seed)
    items = result.items.set_index("item")
    true = truth_table(truth, items.index)["b"]
    inside = (items["b_lo"] <= true) & (true <= items["b_hi"])
    drift = result.drift
    flagged = set(drift.loc[drift["flagged"], "item"])
    drifted = set(truth["drifted"])
    moved = drift.set_index("item").loc[sorted(drifted)]
    out = {
        "seed": seed,
        "bank_converged": bool(bank_fit.converged),
        "bank_fit_seconds": round(fitted, 1),
        "new_items": len(items),
        "spearman": round(float(items["b_mean"].corr(true, method="spearman")), 3),
        "coverage_90": round(float(inside.mean()), 3),
        "found": len(flagged & drifted),
        "false_flags": len(flagged - drifted),
        "drifted": {
            q: {
                "true": round(truth["drift"][q], 2),
                "shift_mean": round(float(moved.loc[q, "shift_mean"]), 2),
                "q_drift": round(float(moved.loc[q, "q_drift"]), 4),
            }
            for q in moved.index
        },
        "common_shift_mean": round(result.summary.get("common_shift_mean", np.nan), 3),
    }
    shutil.rmtree(root, ignore_errors=True)
    progress(json.dumps({k: v for k, v in out.items() if k != "drifted"}))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--models", type=int, default=80, help="bank models")
    parser.add_argument("--shift", type=float, default=2.0, help="planted drift (logits)")
    parser.add_argument(
        "--toward-centre", action="store_true",
        help="drift the common questions with |b| nearest shift/2, each to -b",
    )  # fmt: skip
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from bayes_dualeval.inference.device import configure

    configure("cpu", 4)
    runs = [run_seed(seed, args.models, args.shift, args.toward_centre) for seed in args.seeds]
    result = {
        "models": args.models,
        "shift": args.shift,
        "toward_centre": args.toward_centre,
        "seeds": args.seeds,
        "runs": runs,
        "spearman_min": min(r["spearman"] for r in runs),
        "coverage_range": [
            min(r["coverage_90"] for r in runs),
            max(r["coverage_90"] for r in runs),
        ],  # fmt: skip
        "seeds_spearman_below_0.9": sum(r["spearman"] < 0.9 for r in runs),
        "seeds_coverage_outside_0.85_0.95": sum(
            not 0.85 <= r["coverage_90"] <= 0.95 for r in runs
        ),
        "found": f"{sum(r['found'] for r in runs)}/{5 * len(runs)}",
        "seeds_all_five_found": sum(r["found"] == 5 for r in runs),
        "false_flags": sum(r["false_flags"] for r in runs),
    }
    finish(result, args.out)


if __name__ == "__main__":
    main()
