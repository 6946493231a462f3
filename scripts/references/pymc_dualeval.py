"""The default model (``dualeval-2pl``) written plainly in PyMC and sampled with nutpie.

What a user who knows PyMC would write for the same data and the same priors, as the
baseline of ``scripts/benchmarks/end_to_end.py``: the data are read and distilled by bayes-dualeval
(the same cells, decisive pairs, soft targets, weights and prompt means), the model is
written here with PyMC's own distributions, non-centred (every item standard normal,
scaled by its group's spread), and sampled by nutpie (numba backend). It is a benchmark,
not part of the package: ``pip install pymc nutpie`` in the environment that runs it.

The density is the package's, term by term (docs/model.md):

* abilities ``theta_i ~ Normal(0, 1)``;
* per item group ``mu_b ~ Normal(0, 2)``, ``sigma_b ~ HalfNormal(1.5)``, ``mu_log_a ~
  Normal(0, 0.5)``, ``sigma_log_a ~ LogNormal(log 0.3, 0.5)``; per item ``b_q =
  mean(theta) + mu_b + sigma_b u_q`` and ``log a_q = mu_log_a + sigma_log_a v_q`` with
  ``u_q, v_q ~ Normal(0, 1)`` (the package's prior locates difficulties relative to the
  models' mean ability);
* ``gamma ~ LogNormal(log 4, 0.5)``, the arena level intercept ``level_c ~ Normal(0, 1)``
  per arena source;
* static labels Bernoulli with ``p = sigmoid(a (theta - b))``; each decisive pair ``w [t
  log s + (1 - t) log(1 - s)]`` with ``s = sigmoid(gamma (p_i - p_j))``; each prompt's mean
  reward ``Normal(level_c + gamma mean(p), se)``.

The priors are read from the specification, so a changed default shows up as a mismatch
in :func:`check_priors` rather than a silent difference.

Usage::

    python scripts/references/pymc_dualeval.py data/ --tune 1000 --draws 1000 --json out.json
    python scripts/references/pymc_dualeval.py data/ --low-rank
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np


def check_priors(config) -> None:
    """Fail loudly when the specification has moved away from what is transcribed here."""
    expected = {
        "mode": "both", "irt": "2pl", "item_prior": "hierarchical", "arena_likelihood": "pairs",
        "arena_level": "mean", "lambda_static": 1.0, "lambda_arena": 1.0, "lambda_bb": 0.0,
    }  # fmt: skip
    wrong = {k: getattr(config, k) for k, v in expected.items() if getattr(config, k) != v}
    if wrong:
        raise SystemExit(f"the PyMC transcription covers the default model only; got {wrong}")


def build_model(inputs, config):
    """The PyMC model of unpadded :class:`~bayes_dualeval.model.inputs.ModelInputs`."""
    import pymc as pm
    import pytensor.tensor as pt

    arr = {k: np.asarray(getattr(inputs, k)) for k in (
        "item_group", "static_model", "static_item", "static_y", "arena_model", "arena_item",
        "pair_i", "pair_j", "pair_w", "pair_t", "prompt_n", "prompt_zbar", "prompt_se",
        "level_group",
    )}  # fmt: skip
    g = arr["item_group"]
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, config.theta_scale, shape=inputs.n_models)
        mu_b = pm.Normal("mu_b", 0.0, config.b_loc_scale, shape=inputs.n_groups)
        sigma_b = pm.HalfNormal("sigma_b", config.b_scale_scale, shape=inputs.n_groups)
        mu_la = pm.Normal("mu_log_a", 0.0, config.loga_loc_scale, shape=inputs.n_groups)
        sigma_la = pm.LogNormal(
            "sigma_log_a", math.log(config.loga_scale_scale), 0.5, shape=inputs.n_groups
        )
        u = pm.Normal("b_raw", 0.0, 1.0, shape=inputs.n_items)
        v = pm.Normal("log_a_raw", 0.0, 1.0, shape=inputs.n_items)
        b = pm.Deterministic("b", pt.mean(theta) + mu_b[g] + sigma_b[g] * u)
        a = pm.Deterministic("a", pt.exp(mu_la[g] + sigma_la[g] * v))
        sm, si = arr["static_model"], arr["static_item"]
        pm.Bernoulli(
            "static_y", logit_p=a[si] * (theta[sm] - b[si]), observed=arr["static_y"].astype(int)
        )
        gamma = pm.LogNormal("gamma", config.gamma_loc, config.gamma_scale)
        am, ai = arr["arena_model"], arr["arena_item"]
        p = pm.math.sigmoid(a[ai] * (theta[am] - b[ai]))
        x = gamma * (p[arr["pair_i"]] - p[arr["pair_j"]])
        t, w = arr["pair_t"], arr["pair_w"]
        # log sigmoid(x) = -softplus(-x)
        loglik = -(t * pt.softplus(-x) + (1 - t) * pt.softplus(x))
        pm.Potential("pairs", pt.sum(w * loglik))
        prompts = np.flatnonzero(arr["prompt_n"] > 0)
        level_c = pm.Normal("level_c", 0.0, config.level_loc_scale, shape=inputs.n_level_groups)
        pbar = pt.zeros(inputs.n_items)
        pbar = pt.inc_subtensor(pbar[ai], p) / np.maximum(arr["prompt_n"], 1.0)
        pm.Normal(
            "prompt_zbar",
            level_c[arr["level_group"][prompts]] + gamma * pbar[prompts],
            arr["prompt_se"][prompts],
            observed=arr["prompt_zbar"][prompts],
        )
    return model


def run(data: str, tune: int, draws: int, chains: int, seed: int, low_rank: bool = False) -> dict:
    """Load, build, compile and sample; times and convergence over every posterior variable.

    ``low_rank``: nutpie's low-rank mass matrix, adapted from draws and gradients (Fisher
    divergence; ``low_rank_modified_mass_matrix=True``), instead of its diagonal one.
    """
    start = time.perf_counter()
    import arviz as az
    import nutpie

    from bayes_dualeval import load
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.spec import DualEvalModel
    from bayes_dualeval.posterior.diagnostics import per_parameter

    config = load_spec("dualeval-2pl")
    check_priors(config)
    dataset = DualEvalModel(config).fitted_data(load(data))
    inputs, _ = build_inputs(dataset, config, centred="none")
    model = build_model(inputs, config)
    ready = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    compiled_at = time.perf_counter()
    idata = nutpie.sample(
        compiled, draws=draws, tune=tune, chains=chains, seed=seed, progress_bar=False,
        cores=min(chains, os.cpu_count() or 1), low_rank_modified_mass_matrix=low_rank,
    )  # fmt: skip
    sampled = time.perf_counter()
    table = per_parameter(idata)
    stats = idata.sample_stats
    steps = np.asarray(stats["n_steps"].values)
    return {
        "data": data,
        "tune": tune,
        "mass_matrix": "low rank" if low_rank else "diagonal",
        "draws": draws,
        "chains": chains,
        "build_s": round(ready - start, 2),
        "compile_s": round(compiled_at - ready, 2),
        "sample_s": round(sampled - compiled_at, 2),
        "max_rhat": round(float(table["rhat"].max()), 4),
        "min_ess_bulk": round(float(table["ess_bulk"].min()), 1),
        "min_ess_tail": round(float(table["ess_tail"].min()), 1),
        "divergences": int(np.asarray(stats["diverging"].values).sum()),
        "mean_steps": round(float(steps.mean()), 1),
        "n_parameters": len(table),
        "theta_mean": dict(
            zip(
                map(str, dataset.models),
                idata.posterior["theta"].mean(("chain", "draw")).values.tolist(),
                strict=True,
            )
        ),
        "arviz": az.__version__,
        "nutpie": nutpie.__version__,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument(
        "--low-rank", action="store_true", help="nutpie's low-rank mass matrix adaptation"
    )
    args = parser.parse_args(argv)
    out = run(args.data, args.tune, args.draws, args.chains, args.seed, args.low_rank)
    ok = out["max_rhat"] <= 1.01 and min(out["min_ess_bulk"], out["min_ess_tail"]) >= 400
    out["converged"] = bool(ok and out["divergences"] == 0)
    print(json.dumps(out), file=sys.stdout)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
