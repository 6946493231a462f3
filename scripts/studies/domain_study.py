"""Abilities per domain (``--abilities domain``) against one ability, on many data sets.

For each data set, NUTS with the package's defaults fits one ability per model and an
ability per domain, both with ``--holdout 0.1`` (the same cells left out), and one row per
fit reports: convergence over every sampled site (max R-hat, min bulk and tail ESS,
divergences), the fit's wall time, and the held-out log score and AUC of static labels
and of arena pairs. Then, per data set:

* simulated sets (truth known): each domain's order against the true domain abilities
  (Spearman, mean over domains), and the coverage of the 90% intervals of the centred
  domain abilities over every model and domain;
* real sets (no truth): the item split-half check of issue 24, "does the per-domain
  leaderboard order models within a domain better than the domain's raw mean score?".
  Each domain's items are split at random into halves A and B; the domain model and the
  one-ability model are fitted on A only, and three orders of the models in each domain
  are compared with the raw mean score on B (Spearman): the domain abilities, the
  one-ability leaderboard, and the raw mean on A. Repeated over ``--splits`` splits.

Data sets (``--only`` picks some): ``sim-specialist`` (12 models, 300 questions and 100
prompts in 3 domains, deviations of sd 0.5 and one model +2 in one domain), ``sim-flat``
(the same sizes, no domain effects: does the richer model lose anything?), ``bundled``
(data/, no domain effects), ``mtbench`` (the shared MT-Bench grades, 34 models x 160 turns,
8 categories), ``alpaca`` (AlpacaEval, 56 models x 805 prompts, its 5 subsets as domains;
MAP only, NUTS at this size belongs to the scale issue). The coverage study adds
``--coverage-seeds`` simulated sets of 10 models x 240 questions x 60 prompts, deviations
of sd 0.5; ``flat-coverage`` the same sets without domain effects, fitted with one ability
and with domain abilities, for the coverage of the overall abilities under both.

Usage::

    python scripts/studies/domain_study.py                    # everything (~40 min on 2 cores)
    python scripts/studies/domain_study.py --only mtbench --splits 2
    python scripts/studies/domain_study.py --only coverage --coverage-seeds 6
    python scripts/studies/domain_study.py --only flat-coverage --coverage-seeds 4
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
SETS = ("sim-specialist", "sim-flat", "bundled", "mtbench", "alpaca", "coverage")


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def simulated(seed: int, *, n_models=12, n_static=300, n_arena=100, sd=0.5, specialist=True):
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.simulate import simulate

    rng = np.random.default_rng(1000 + seed)
    deviation = rng.normal(0.0, sd, (n_models, 3)) if sd else np.zeros((n_models, 3))
    if specialist:
        deviation[n_models // 2] = [0.0, 2.0, 0.0]
    deviation -= deviation.mean(axis=0)
    static, arena, truth = simulate(
        n_models, n_static, n_arena, seed=seed, domain_deviation=deviation, missing=0.1,
        prompt_offset_sd=0.0,
    )  # fmt: skip
    ds = Dataset.from_frames(static=static, arena=arena, source="sim")
    return ds, truth


def real(name: str):
    from bayes_dualeval import load

    if name == "bundled":
        return load(str(REPO / "data"))
    folder = {"mtbench": "mtbench", "alpaca": "alpaca_eval"}[name]
    path = REAL / folder / "arena.jsonl"
    if not path.exists():
        return None
    if name == "alpaca":  # its subsets as domains: the loader reads "domain" or "category"
        rows = pd.read_json(path, lines=True).rename(columns={"subset": "domain"})
        from bayes_dualeval.data.dataset import Dataset

        return Dataset.from_frames(arena=rows, source="alpaca_eval")
    return load(str(path))


def fit_one(ds, abilities: str, sampler: str, *, holdout: float = 0.1, seed: int = 0):
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs.fit import fit

    config = load_spec("dualeval-2pl").replace(abilities=abilities)
    settings = SamplerSettings(sampler=sampler, seed=seed, progress=False)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit(ds, config, settings, holdout=holdout)
    return result, time.perf_counter() - start


def row(name: str, abilities: str, sampler: str, result, seconds: float) -> dict:
    d = result.diagnostics
    held = d.get("holdout") or {}
    out = {
        "data": name,
        "abilities": abilities,
        "sampler": sampler,
        "seconds": round(seconds, 1),
        "converged": d["convergence"].get("converged"),
        "max_rhat": d.get("max_rhat"),
        "min_ess_bulk": d.get("min_ess_bulk"),
        "min_ess_tail": d.get("min_ess_tail"),
        "divergences": d.get("divergences"),
        "rounds": d["sampler_info"].get("rounds"),
    }
    for kind in ("static", "arena"):
        if kind in held:
            out[f"{kind}_log_score"] = round(held[kind]["log_score"], 4)
            out[f"{kind}_auc"] = round(held[kind]["auc"], 4)
    return out


def domain_table(result, ci: float = 0.9) -> pd.DataFrame:
    from bayes_dualeval.posterior.summaries import leaderboard_by_domain

    return leaderboard_by_domain(result.idata, result.dataset, ci=ci)


def truth_figures(result, truth) -> dict:
    """Spearman of each domain's order with the truth, and 90% coverage (centred)."""
    from scipy.stats import spearmanr

    table = domain_table(result, 0.9)
    true = truth["theta_domain"]
    rhos, inside = [], []
    for domain, rows in table.groupby("domain"):
        values = np.array([true[m][domain] for m in rows["model"]])
        centre = np.mean([true[m][domain] for m in true])
        values = values - centre
        rhos.append(spearmanr(rows["theta_mean"], values).statistic)
        inside.extend((rows["theta_lo"] <= values) & (values <= rows["theta_hi"]))
    return {"spearman_mean": float(np.mean(rhos)), "spearman_min": float(np.min(rhos)),
            "coverage90": float(np.mean(inside)), "cells": len(inside)}  # fmt: skip


def overall_coverage(result, truth, ci: float = 0.9) -> float:
    """Coverage of the ``ci`` intervals of the centred overall abilities ``theta``."""
    from bayes_dualeval.posterior.summaries import draws_of, interval

    theta = draws_of(result.idata, "theta")
    theta = theta - theta.mean(axis=1, keepdims=True)
    models = result.idata.posterior["model"].values
    true = np.array([truth["theta"][m] for m in models])
    lo, hi = interval(theta, ci)
    true = true - true.mean()
    return float(np.mean((lo <= true) & (true <= hi)))


def split_items(ds, seed: int):
    """Two datasets holding each domain's items A and B (random halves), and their masks."""
    from bayes_dualeval.data.dataset import Dataset

    rng = np.random.default_rng(seed)
    half = np.zeros(ds.n_items, bool)
    for domain in np.unique(ds.item_domain):
        items = np.flatnonzero(ds.item_domain == domain)
        half[rng.permutation(items)[: len(items) // 2]] = True

    def restrict(mask):
        static = ds.static_frame()
        arena = ds.arena_frame()
        keep_s = mask[ds.static_item]
        keep_r = mask[ds.arena_item]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Dataset.from_tables(
                static[keep_s] if len(static) else None,
                arena[keep_r].drop(columns="z") if len(arena) else None,
                reward_norm=ds.reward_norm,
            )

    return restrict(half), restrict(~half)


def raw_means(ds) -> pd.DataFrame:
    """Raw mean score per model (rows) and domain: static accuracy and reward z together."""
    frames = []
    if len(ds.static_y):
        s = ds.static_frame().rename(columns={"correct": "score"})
        frames.append(s[["model", "domain", "score"]])
    if len(ds.arena_z):
        a = ds.arena_frame().rename(columns={"z": "score"})
        frames.append(a[["model", "domain", "score"]])
    cells = pd.concat(frames)
    return cells.groupby(["model", "domain"])["score"].mean().unstack()


def order_check(ds, sampler: str, splits: int) -> list[dict]:
    """Spearman with the raw mean on unseen items B, for three orders fitted on items A."""
    from scipy.stats import spearmanr

    from bayes_dualeval.posterior.summaries import leaderboard

    out = []
    for split in range(splits):
        a, b = split_items(ds, split)
        target = raw_means(b)
        observed = raw_means(a)
        dom, _ = fit_one(a, "domain", sampler, holdout=0.0)
        one, _ = fit_one(a, "single", sampler, holdout=0.0)
        by_domain = domain_table(dom, 0.9)
        overall = leaderboard(one.idata, one.dataset).set_index("model")["theta_mean"]
        for domain, rows in by_domain.groupby("domain"):
            models = rows["model"].to_numpy()
            truth = target.reindex(models)[domain].to_numpy()
            ok = np.isfinite(truth)
            if ok.sum() < 4:
                continue

            def rho(values, ok=ok, truth=truth):
                return float(spearmanr(np.asarray(values)[ok], truth[ok]).statistic)

            out.append({
                "split": split, "domain": domain, "models": int(ok.sum()),
                "domain_abilities": rho(rows["theta_mean"]),
                "one_ability": rho(overall.reindex(models)),
                "raw_mean_A": rho(observed.reindex(models)[domain]),
            })  # fmt: skip
        progress(f"  split {split}: {len(out)} domain rows so far")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SETS))
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--coverage-seeds", type=int, default=4)
    parser.add_argument("--first-seed", type=int, default=0, help="first coverage seed")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)
    from bayes_dualeval.inference.device import configure

    configure(chains=4)
    chosen = args.only.split(",")
    rows, truth_rows, orders = [], [], []
    for name in chosen:
        if name in ("coverage", "flat-coverage"):
            continue
        sampler = "map" if name == "alpaca" else "nuts"
        if name.startswith("sim-"):
            ds, truth = simulated(7, sd=0.5 if name == "sim-specialist" else 0.0,
                                  specialist=name == "sim-specialist")  # fmt: skip
        else:
            ds, truth = real(name), None
            if ds is None:
                progress(f"{name}: data not found, skipped")
                continue
        for abilities in ("single", "domain"):
            progress(f"{name}: {abilities} ({sampler})")
            result, seconds = fit_one(ds, abilities, sampler)
            rows.append(row(name, abilities, sampler, result, seconds))
            if truth is not None and abilities == "domain":
                truth_rows.append({"data": name, **truth_figures(result, truth)})
            progress(f"  {rows[-1]}")
        if truth is None and name != "bundled":
            orders.extend({"data": name, **r} for r in order_check(ds, sampler, args.splits))
    if "coverage" in chosen:
        for seed in range(args.first_seed, args.first_seed + args.coverage_seeds):
            ds, truth = simulated(seed, n_models=10, n_static=240, n_arena=60, specialist=False)
            result, seconds = fit_one(ds, "domain", "nuts", holdout=0.0, seed=seed)
            fitted = row(f"coverage-{seed}", "domain", "nuts", result, seconds)
            truth_rows.append({**truth_figures(result, truth), **fitted})
            progress(f"  {truth_rows[-1]}")
    if "flat-coverage" in chosen:
        # is the shortfall the domain part? Panels without domain effects (sd 0), where one
        # ability is the true model: coverage of the overall abilities under both fits, and
        # of the domain abilities (truth: the overall ability) under the domain fit
        for seed in range(args.first_seed, args.first_seed + args.coverage_seeds):
            ds, truth = simulated(seed, n_models=10, n_static=240, n_arena=60, sd=0.0,
                                  specialist=False)  # fmt: skip
            for abilities in ("single", "domain"):
                result, seconds = fit_one(ds, abilities, "nuts", holdout=0.0, seed=seed)
                figures = {"overall_coverage90": overall_coverage(result, truth)}
                if abilities == "domain":
                    figures |= truth_figures(result, truth)
                fitted = row(f"flat-{seed}", abilities, "nuts", result, seconds)
                truth_rows.append({**figures, **fitted})
                progress(f"  {truth_rows[-1]}")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(pd.DataFrame(rows).to_string(index=False))
        if truth_rows:
            print()
            print(pd.DataFrame(truth_rows).to_string(index=False))
        if orders:
            table = pd.DataFrame(orders)
            print()
            print(table.to_string(index=False))
            print()
            print(table.groupby("data")[["domain_abilities", "one_ability", "raw_mean_A"]].mean())
    if args.out:
        args.out.write_text(json.dumps({"fits": rows, "truth": truth_rows, "orders": orders},
                                       indent=1, default=float))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
