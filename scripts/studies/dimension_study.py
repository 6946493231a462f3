"""Ability dimensions (``--dims K``) against one ability, on simulated and real data.

For each data set, NUTS with the package's defaults fits ``dims`` 1, 2 (and 3 where asked),
each with ``--holdout 0.1`` (the same cells left out of every fit), and one row per fit
reports: convergence over every sampled site (max R-hat, min bulk and tail ESS,
divergences, rounds), the fit's wall time, the support check (how many of the fitted
dimensions the data support; the smallest direction's share and its 95% quantile), the
held-out log score and AUC of static labels and arena pairs, and the PSIS-LOO comparison of
the fits (``compare``: elpd difference to the best and its standard error, and which one
``compare`` prefers; differences within 2 dse are ties). On simulated sets (truth known) it
adds the recovery of the abilities per dimension after an orthogonal Procrustes rotation
onto the truth (centred; correlation per dimension), the coverage of their 90% intervals
(each fitted dimension matched to the true one it correlates with most; no rotation), the
Spearman of the overall ability, and the recovered loading of each domain on its own
dimension.

Data sets (``--only`` picks some): ``sim-2d`` (12 models, 300 questions and 100 prompts in
2 domains, two dimensions correlated 0.3, each domain loading 0.8 + 0.1 on its own),
``sim-2d-static`` (the same, static questions only), ``sim-2d-nodomain`` (the same data
without the items' domains: the loadings then share one profile), ``sim-1d`` (the same sizes, one
dimension), ``bundled`` (data/, one dimension), ``mtbench`` (the shared MT-Bench grades,
34 models x 160 turns, 8 categories).

Usage::

    python scripts/studies/dimension_study.py                       # everything (~40 min, 2 cores)
    python scripts/studies/dimension_study.py --only sim-2d --dims 1,2,3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
REAL = REPO.parent / "shared" / "data" / "real"
SETS = ("sim-2d", "sim-2d-static", "sim-2d-nodomain", "sim-1d", "bundled", "mtbench")


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def simulated(name: str, seed: int = 11):
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.simulate import simulate

    dims = 1 if name == "sim-1d" else 2
    n_arena = 0 if name.endswith("static") else 100
    static, arena, truth = simulate(
        12, 300, n_arena, n_domains=2, dims=dims, dim_correlation=0.3, dim_loading=0.8,
        missing=0.1, prompt_offset_sd=0.0, seed=seed,
    )  # fmt: skip
    if name.endswith("nodomain"):  # the same data, the items' domains not given
        static, arena = static.drop(columns="domain"), arena.drop(columns="domain")
    frames = {"static": static, "arena": arena} if n_arena else {"static": static}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(**frames, source="sim"), truth


def real(name: str):
    from bayes_dualeval import load

    if name == "bundled":
        return load(str(REPO / "data"))
    path = REAL / "mtbench" / "arena.jsonl"
    return load(str(path)) if path.exists() else None


def fit_one(ds, dims: int, *, holdout: float = 0.1, seed: int = 0):
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs.fit import fit

    config = load_spec("dualeval-2pl").replace(dims=dims)
    settings = SamplerSettings(sampler="nuts", seed=seed, progress=False)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit(ds, config, settings, holdout=holdout)
    return result, time.perf_counter() - start


def row(name: str, dims: int, result, seconds: float) -> dict:
    d = result.diagnostics
    held = d.get("holdout") or {}
    out = {
        "data": name, "dims": dims, "seconds": round(seconds, 1),
        "converged": d["convergence"].get("converged"), "max_rhat": d.get("max_rhat"),
        "min_ess_bulk": d.get("min_ess_bulk"), "min_ess_tail": d.get("min_ess_tail"),
        "divergences": d.get("divergences"), "rounds": d["sampler_info"].get("rounds"),
    }  # fmt: skip
    support = d.get("dimensions")
    if support:
        out["supported"] = f"{support['supported']} of {support['fitted']}"
        out["last_share"] = support["share_mean"][-1]
        out["last_share_hi"] = support["share_hi"][-1]
    for kind in ("static", "arena"):
        if kind in held:
            out[f"{kind}_log_score"] = round(held[kind]["log_score"], 4)
            out[f"{kind}_auc"] = round(held[kind]["auc"], 4)
    return out


def recovery(result, truth) -> dict:
    """Procrustes-aligned correlation per dimension, overall Spearman, own-domain loading."""
    from scipy.linalg import orthogonal_procrustes
    from scipy.stats import spearmanr

    post = result.idata.posterior
    models = post["model"].values
    overall = np.array([truth["theta"][m] for m in models])
    out = {"overall_spearman": float(
        spearmanr(post["theta"].mean(("chain", "draw")).values, overall).statistic
    )}  # fmt: skip
    if "theta_dims" not in post or "theta_dims" not in truth:
        return out
    true = np.array([truth["theta_dims"][m] for m in models])
    est = post["theta_dims"].mean(("chain", "draw")).values
    est, true = est - est.mean(0), true - true.mean(0)
    # with more fitted dimensions than true ones, the truth gets zero columns to match
    padded = np.pad(true, ((0, 0), (0, max(est.shape[1] - true.shape[1], 0))))
    rotation, _ = orthogonal_procrustes(est, padded)
    aligned = est @ rotation
    for k in range(true.shape[1]):
        out[f"procrustes_r{k + 1}"] = float(np.corrcoef(aligned[:, k], true[:, k])[0, 1])
    # coverage of the 90% intervals, each fitted dimension matched to the true one it
    # correlates with most (labels only: no rotation, the prior fixes the scale)
    draws = post["theta_dims"].values.reshape(-1, *est.shape)
    draws = draws - draws.mean(axis=1, keepdims=True)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    k_fit = est.shape[1]
    corr = np.corrcoef(est.T, true.T)[:k_fit, k_fit:]
    covered = [
        (lo[:, k] <= true[:, corr[k].argmax()]) & (true[:, corr[k].argmax()] <= hi[:, k])
        for k in range(min(k_fit, true.shape[1]))
    ]
    out["coverage90"] = float(np.mean(covered))
    w = post["loading"].mean(("chain", "draw")).values
    domain = result.idata.constant_data["item_domain"].values
    profile = pd.DataFrame(w).groupby(domain).mean()
    out["own_loading"] = float(profile.max(axis=1).mean())
    return out


def comparison(results: dict) -> pd.DataFrame:
    from bayes_dualeval.posterior.loo import compare

    return compare({f"dims={k}": r.idata for k, r in results.items()})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SETS))
    parser.add_argument("--dims", default="1,2", help="comma-separated K values to fit")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("--keep", type=Path, default=None, help="save each fit's posterior here")
    args = parser.parse_args(argv)
    from bayes_dualeval.inference.device import configure

    configure(chains=4)
    rows, compared = [], []
    for name in args.only.split(","):
        if name.startswith("sim-"):
            ds, truth = simulated(name)
        else:
            ds, truth = real(name), None
            if ds is None:
                progress(f"{name}: data not found, skipped")
                continue
        results = {}
        for k in (int(x) for x in args.dims.split(",")):
            progress(f"{name}: dims {k}")
            result, seconds = fit_one(ds, k)
            results[k] = result
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                result.idata.to_netcdf(args.keep / f"{name}-dims{k}.nc")
            rows.append({**row(name, k, result, seconds),
                         **(recovery(result, truth) if truth else {})})  # fmt: skip
            progress(f"  {rows[-1]}")
        table = comparison(results)
        table.insert(0, "data", name)
        compared.append(table.drop(columns=["warning"]))
        progress(table.to_string(index=False))
    with pd.option_context("display.width", 220, "display.max_columns", 40):
        print(pd.DataFrame(rows).to_string(index=False))
        print()
        print(pd.concat(compared).to_string(index=False))
    if args.out:
        payload = {"fits": rows, "compare": pd.concat(compared).to_dict("records")}
        args.out.write_text(json.dumps(payload, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
