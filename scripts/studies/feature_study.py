"""Item features (``fit --item-features``): items known only by their features, on held-out items.

For each data set a fifth of the static questions and of the arena prompts (seeded) lose all
their responses; their feature rows stay. NUTS with the package's defaults then fits

* ``features``: the remaining responses with the feature file (the held-out items enter the
  fit without responses and are calibrated from their features alone);
* ``permuted``: the same with the feature rows' numbers shuffled over the items, ids and
  domains left in place (features that carry nothing,
  the "without features" baseline: a held-out item then gets its group's prior);
* ``responses``: every response, no features (each item's ``b`` fitted from its own
  responses, which the held-out items' predictions are compared with);
* ``all+features`` (where asked with ``--full``): every response and the features, the
  convergence check of the issue's "done when".

One row per fit: convergence over every sampled site (R-hat, bulk and tail ESS,
divergences), seconds, the features' explained share (``tau_beta_b``, mean and 90%
interval). For the held-out items (``features`` and ``permuted`` fits): the correlation of
their predicted ``b`` (posterior mean) with the ``responses`` fit's ``b`` and, on
simulations, with the true ``b``; the share of their 90% intervals covering the true ``b``
(on the fit's scale: the abilities' mean zero in every draw, the truth mapped onto it by
the line of the fitted on the true abilities, :func:`matched_truth`; the ``responses`` row
gives the same coverage over every item, answered), and covering the ``responses`` fit's
posterior mean; the AUC and mean log score of their static cells against the labels that
were removed; routing of the held-out static questions (the model with the highest
predicted success per question, :func:`bayes_dualeval.runs.predict.route`) scored by the
true success probability of the chosen model, against the best single model and the oracle
(the best model per question) on simulations, and against the single model the fit ranks
best on those questions (``fit_single``: what a user without routing would pick).

Data sets (``--only`` picks some): ``sim-64`` (12 models x 300 questions + 100 prompts,
64 correlated feature columns carrying 60% of the difficulty's variance, seed 3: the
issue's simulation), ``sim-8`` (20 x 200 + 50, 8 columns, 30%, seed 8), ``sim-null`` (12 x
300 + 100, 64 columns carrying nothing, seed 5), ``sim-route`` (12 x 300 + 100, models'
abilities differ by domain with sd 0.8, 16 columns carrying 50%, seed 13; fitted with
``--model dualeval-domains``, the feature file giving the held-out items' domains: where
routing can beat the best single model), ``bundled`` (data/ with
data/items.features.csv: a simulated rater's difficulty score and domain dummies),
``mtbench`` (the shared MT-Bench grades, 34 models x 160 turns; features from its metadata
only: 8 category dummies and a second-turn dummy). None of them was used to choose a
default of the feature prior, which was set before any was run (HalfNormal(1) on the
explained sd of ``b``, HalfNormal(0.3) on that of ``log a``, 90% of the variance, whitened).

Usage::

    python scripts/studies/feature_study.py                    # everything (~60 min, 2 cores)
    python scripts/studies/feature_study.py --only sim-64 --full
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
SETS = ("sim-64", "sim-8", "sim-null", "sim-route", "bundled", "mtbench")
SIMULATED = {
    "sim-64": {"n": (12, 300, 100), "features": 64, "share": 0.6, "seed": 3},
    "sim-8": {"n": (20, 200, 50), "features": 8, "share": 0.3, "seed": 8},
    "sim-null": {"n": (12, 300, 100), "features": 64, "share": 0.0, "seed": 5},
    "sim-route": {"n": (12, 300, 100), "features": 16, "share": 0.5, "seed": 13, "domain_sd": 0.8},
}
HELD = 0.2
CI = 0.9


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def data_set(name: str):
    """``(static, arena, truth or None, features)``: frames in the input formats."""
    from bayes_dualeval.model.simulate import simulate

    if name in SIMULATED:
        s = SIMULATED[name]
        static, arena, truth = simulate(
            *s["n"], missing=0.1, item_features=s["features"], feature_share=s["share"],
            domain_sd=s.get("domain_sd", 0.0), seed=s["seed"],
        )  # fmt: skip
        static["source"], arena["source"] = "bench", "arena"
        features = truth.pop("features")
        if "domain_sd" in s:  # new items need their domain to see their domain ability
            features.insert(1, "domain", [truth["items"][q]["domain"] for q in features["item"]])
        return static, arena, truth, features
    if name == "bundled":
        static = pd.read_json(REPO / "data" / "bench" / "static.jsonl", lines=True)
        arena = pd.read_json(REPO / "data" / "arena" / "arena.jsonl", lines=True)
        static["source"], arena["source"] = "bench", "arena"
        truth = json.loads((REPO / "data" / "truth.json").read_text())
        return static, arena, truth, pd.read_csv(REPO / "data" / "items.features.csv")
    if name == "mtbench":
        arena = pd.read_json(REAL / "mtbench" / "arena.jsonl", lines=True)
        arena = arena[["model_label", "item_id", "reward", "category"]].assign(source="mtbench")
        meta = arena.drop_duplicates("item_id")
        features = pd.get_dummies(meta["category"], prefix="category", dtype=float)
        features = features.drop(columns=features.columns[0])  # the first is the baseline
        features.insert(0, "item", "mtbench::" + meta["item_id"].to_numpy())
        features["second_turn"] = meta["item_id"].str.endswith("_t2").astype(float).to_numpy()
        return None, arena, None, features.reset_index(drop=True)
    raise SystemExit(f"unknown data set {name!r}; choose from {', '.join(SETS)}")


def item_id(frame: pd.DataFrame) -> pd.Series:
    from bayes_dualeval.core import item_ids

    if "dataset" in frame:
        return pd.Series(
            item_ids.static_ids(frame["source"], frame["dataset"], frame["sample_index"]),
            index=frame.index,
        )
    return frame["source"] + "::" + frame["item_id"].astype(str)


def dataset(static, arena):
    from bayes_dualeval.data.dataset import Dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static, arena)


def one_fit(ds, features, label, config=None):
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.runs.fit import fit

    progress(f"  fitting {label} ...")
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit(ds, config, SamplerSettings(progress=False), features=features)
    seconds = time.perf_counter() - start
    conv = result.diagnostics["convergence"]
    row = {
        "fit": label,
        "converged": conv["converged"],
        "max_rhat": conv["max_rhat"],
        "min_ess_bulk": conv["min_ess_bulk"],
        "min_ess_tail": conv["min_ess_tail"],
        "divergences": conv["divergences"],
        "seconds": round(seconds),
    }
    post = result.idata.posterior
    if "tau_beta_b" in post:
        tau = post["tau_beta_b"].values.ravel()
        lo, hi = np.quantile(tau, [0.05, 0.95])
        row["tau_b"] = f"{tau.mean():.2f} [{lo:.2f}, {hi:.2f}]"
        row["components"] = result.diagnostics["features"]["components"]
    return result, row


def centred_b(result) -> pd.DataFrame:
    """Draws of every item's ``b`` minus the draw's mean ability, (draws, items) by id."""
    post = result.idata.posterior
    b = post["b"].values.reshape(-1, post.sizes["item"])
    theta = post["theta"].values.reshape(-1, post.sizes["model"])
    return pd.DataFrame(b - theta.mean(axis=1, keepdims=True), columns=post["item"].values)


def held_out_scores(result, reference, held, held_static, truth):
    """Scores of one fit on the held-out items (see the module docstring)."""
    from bayes_dualeval.checks.holdout import auc
    from bayes_dualeval.runs.predict import fitted_run, indices, route, success_probability

    b = centred_b(result)[held]
    lo, hi = b.quantile((1 - CI) / 2).to_numpy(), b.quantile((1 + CI) / 2).to_numpy()
    mean = b.mean().to_numpy()
    ref = centred_b(reference)[held].mean().to_numpy()
    out = {
        "held_items": len(held),
        "r_b_responses": np.corrcoef(mean, ref)[0, 1],
        "cover_b_responses": np.mean((lo <= ref) & (ref <= hi)),
    }
    if truth is not None:
        true = matched_truth(result, truth, held)
        out["r_b_truth"] = np.corrcoef(mean, true)[0, 1]
        out["cover_b_truth"] = np.mean((lo <= true) & (true <= hi))
    if len(held_static):
        run = fitted_run(result)
        ds = result.dataset
        m = indices(held_static["model_label"], ds.models, "model")
        q = indices(item_id(held_static), ds.items, "item")
        p = success_probability(run, m, q).mean(axis=0, dtype=np.float64)
        y = held_static["correct"].to_numpy()
        out["auc"] = auc(p, y == 1)
        out["log_score"] = float(np.mean(np.log(np.where(y == 1, p, 1 - p))))
        if truth is not None:
            questions = np.unique(q)
            table, summary = route(run, np.arange(ds.n_models), questions, ci=CI)
            true_p = true_success(truth, ds.models, ds.items[questions])  # (models, items)
            chosen = pd.Index(ds.models).get_indexer(table["model"])
            out["routed"] = float(true_p[chosen, np.arange(len(questions))].mean())
            top = pd.Index(ds.models).get_loc(summary["best_single_model"])
            out["fit_single"] = float(true_p[top].mean())
            out["best_single"] = float(true_p.mean(axis=1).max())
            out["oracle"] = float(true_p.max(axis=0).mean())
    return out


def matched_truth(result, truth, items) -> np.ndarray:
    """The true ``b`` of ``items`` on the fit's scale.

    The ability prior fixes the scale only in distribution: a panel of 12 true abilities
    has a sample spread of its own, which the fit's scale follows. The truth is mapped by
    the least-squares line of the fit's centred abilities (posterior means) on the true
    centred ones, ``b -> s (b - mean theta)``, as the 2PL's invariance allows.
    """
    post = result.idata.posterior
    fitted = post["theta"].values.reshape(-1, post.sizes["model"]).mean(axis=0)
    true_theta = np.array([truth["theta"][m] for m in post["model"].values])
    fitted, true_theta = fitted - fitted.mean(), true_theta - true_theta.mean()
    slope = float(fitted @ true_theta / (true_theta @ true_theta))
    theta_mean = np.mean(list(truth["theta"].values()))
    return slope * (np.array([truth["items"][q]["b"] for q in items]) - theta_mean)


def true_success(truth, models, items) -> np.ndarray:
    if "theta_domain" in truth:  # the ability each item sees
        domain = [truth["items"][q]["domain"] for q in items]
        theta = np.array([[truth["theta_domain"][m][d] for d in domain] for m in models])
    else:
        theta = np.array([truth["theta"][m] for m in models])[:, None]
    a = np.array([truth["items"][q]["a"] for q in items])[None, :]
    b = np.array([truth["items"][q]["b"] for q in items])[None, :]
    return 1.0 / (1.0 + np.exp(-a * (theta - b)))


def study(name: str, full: bool, seed: int = 0) -> list[dict]:
    from bayes_dualeval.data.features import check_features

    progress(f"{name}:")
    static, arena, truth, features = data_set(name)
    features = check_features(features)
    rng = np.random.default_rng(seed)
    held = []
    for frame in (static, arena):
        if frame is None or not len(frame):
            continue
        ids = item_id(frame).unique()
        held.extend(rng.choice(ids, int(round(HELD * len(ids))), replace=False).tolist())
    keep = [None if f is None else f.loc[~item_id(f).isin(held)] for f in (static, arena)]
    held_static = static.loc[item_id(static).isin(held)] if static is not None else []
    permuted = features.copy()  # the numbers move to other items; ids, kinds, domains stay
    numbers = [c for c in permuted.columns if c not in ("item", "kind", "domain")]
    permuted[numbers] = permuted[numbers].to_numpy()[rng.permutation(len(permuted))]
    rows = []
    config = None
    if "domain_sd" in SIMULATED.get(name, {}):
        from bayes_dualeval.model.config import load_spec

        config = load_spec("dualeval-domains")
    reference, row = one_fit(dataset(static, arena), None, "responses", config)
    if truth is not None:  # the same coverage for every item, all answered here
        b = centred_b(reference)
        true = matched_truth(reference, truth, b.columns)
        inside = (b.quantile((1 - CI) / 2) <= true) & (true <= b.quantile((1 + CI) / 2))
        row["cover_b_truth"] = float(np.mean(inside))
    rows.append(row)
    for label, table in (("features", features), ("permuted", permuted)):
        result, row = one_fit(dataset(*keep), table, label, config)
        row.update(held_out_scores(result, reference, np.asarray(held), held_static, truth))
        rows.append(row)
    if full:
        rows.append(one_fit(dataset(static, arena), features, "all+features", config)[1])
    for row in rows:
        row["data"] = name
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(SETS), help="comma-separated data sets")
    parser.add_argument("--full", action="store_true", help="also fit everything + features")
    parser.add_argument("--out", type=Path, default=None, help="write the table as CSV too")
    args = parser.parse_args(argv)
    import numpyro

    numpyro.set_host_device_count(4)
    rows = []
    for name in args.only.split(","):
        rows.extend(study(name.strip(), args.full))
        table = pd.DataFrame(rows)
        if args.out:
            table.to_csv(args.out, index=False)
    first = ["data", "fit"]
    table = table[first + [c for c in table.columns if c not in first]]
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(table.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
