"""Classic calibration: posterior means against marginal maximum likelihood (MML).

A thousand simulated examinees answer the same five items. Fits the static 2PL with
independent item priors (``calibration-2pl``) and with the hierarchical default, and prints
each item's a and b next to the MML estimate and its standard error: the independent prior
should agree within a fraction of a standard error; the table shows how much pooling five
items shrinks them.

Usage::

    python scripts/studies/calibration_check.py [--seed 2024]
"""

from __future__ import annotations

import argparse

import numpy as np

from bayes_dualeval.inference.sampling import SamplerSettings
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.runs.fit import fit
from bayes_dualeval.validation.reference import A_TRUE, B_TRUE, calibration_data, mml_2pl


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    y, ds = calibration_data(np.random.default_rng(args.seed))
    order = [int(q.rsplit("_", 1)[1]) for q in ds.items]
    a_mml, b_mml, se_a, se_b = (v[order] for v in mml_2pl(y))
    settings = SamplerSettings(chains=4, warmup=1000, draws=1000, seed=1)
    fits = {}
    for prior in ("independent", "hierarchical"):
        config = load_spec("calibration-2pl").replace(item_prior=prior)
        post = fit(ds, config, settings).idata.posterior
        fits[prior] = (
            post["a"].values.reshape(-1, len(order)).mean(0),
            post["b"].values.reshape(-1, len(order)).mean(0),
        )
    print(
        "| item | true a | MML a (se) | indep. a | hier. a | true b | MML b (se) "
        "| indep. b | hier. b |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for k, q in enumerate(order):
        print(
            f"| {k} | {A_TRUE[q]:.2f} | {a_mml[k]:.3f} ({se_a[k]:.3f}) "
            f"| {fits['independent'][0][k]:.3f} | {fits['hierarchical'][0][k]:.3f} "
            f"| {B_TRUE[q]:.2f} | {b_mml[k]:.3f} ({se_b[k]:.3f}) "
            f"| {fits['independent'][1][k]:.3f} | {fits['hierarchical'][1][k]:.3f} |"
        )
    for prior, (a, b) in fits.items():
        print(
            f"{prior}: max |a - MML| / se = {np.max(np.abs(a - a_mml) / se_a):.2f}, "
            f"max |b - MML| / se = {np.max(np.abs(b - b_mml) / se_b):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
