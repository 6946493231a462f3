"""The psychometric audits on planted truths: saturation, item fit, model fit, Q3.

Each seed (simulation seeds 5000+, not used by ``tests/test_audits.py``) draws static data
with one planted fault from :mod:`bayes_dualeval.validation.psychometrics`, fits the 2PL
by MAP (``--sampler svi`` for SVI) and reads the audit's table:

* ``saturation``: an easy and a matched benchmark answered by the same models
  (``benchmarks.csv``): the ratio of their ``info_at_top`` and their ``ceiling_share``;
* ``item_fit``: 10 of 200 questions with a 3PL floor of 0.4: the planted questions' ranks
  by ``fit_ppp`` (and by outfit and the deviance ``ppp``), the share in the top decile,
  overall and for those harder than the median model;
* ``model_fit``: one model's answers inverted: its rank by ``fit_p`` (1 = lowest), whether
  it is named, and the share of clean models with ``fit_p < 0.01``;
* ``dependence``: a testlet of 5 questions (a shared per-model effect of sd ``--effect``)
  and, with ``--effect 0``, independent data: the clusters found, the planted questions
  among them and the others.

Usage::

    python scripts/studies/audit_study.py --seeds 5 --study saturation item_fit model_fit
    python scripts/studies/audit_study.py --seeds 5 --study dependence --models 100 --effect 2
    python scripts/studies/audit_study.py --seeds 5 --study dependence --models 100 --effect 0

``--first-seed K`` starts at seed K (simulation seed 5000 + K).
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
import pandas as pd


def _fit(frame, sampler: str, seed: int):
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs.fit import fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=frame)
        config = load_spec("dualeval-2pl").replace(mode="static")
        return fit(ds, config, SamplerSettings(sampler=sampler, seed=seed, progress=False))


def _broken(result) -> str:
    """How a fit failed: ``non-finite``, ``collapsed`` or ``""`` (it did not).

    Non-finite item parameters, or abilities with an sd below 0.5 where the truth's is 1
    (a MAP failure seen on a few seeds).
    """
    post = result.idata.posterior
    if not all(np.isfinite(post[name].values).all() for name in ("b", "a", "theta")):
        return "non-finite"
    return "collapsed" if float(post["theta"].values.std()) < 0.5 else ""


def saturation(seed: int, args) -> dict:
    from bayes_dualeval.checks import CheckOptions
    from bayes_dualeval.checks.saturation import benchmarks
    from bayes_dualeval.validation.psychometrics import two_benchmarks

    frame, _ = two_benchmarks(args.models, args.items, 5000 + seed)
    result = _fit(frame, args.sampler, seed)
    table = benchmarks(result.idata, result.dataset, options=CheckOptions(seed=seed))
    rows = table.set_index("source")
    easy, matched = rows.loc["easy"], rows.loc["matched"]
    return {
        "seed": seed,
        "info_top_easy": easy["info_at_top"],
        "info_top_matched": matched["info_at_top"],
        "ratio": easy["info_at_top"] / matched["info_at_top"],
        "ceiling_easy": easy["ceiling_share"],
        "ceiling_matched": matched["ceiling_share"],
        "separated_easy": easy["top_separated"],
        "separated_matched": matched["top_separated"],
        "verdict_easy": easy["verdict"].split(":")[0],
        "verdict_matched": matched["verdict"].split(":")[0],
        "met": bool(
            easy["info_at_top"] < 0.25 * matched["info_at_top"] and easy["ceiling_share"] > 0.5
        ),
    }


def item_fit(seed: int, args) -> dict:
    from bayes_dualeval.checks import CheckOptions, item_table
    from bayes_dualeval.validation.psychometrics import floor_items

    frame, floored = floor_items(args.models, args.items, 10, 5000 + seed)
    result = _fit(frame, args.sampler, seed)
    items = item_table(result.idata, result.dataset, options=CheckOptions(seed=seed))
    truth = items["item"].map(floored)
    planted = truth.notna().to_numpy()
    hard = (truth > 0).to_numpy()  # above the median model (abilities ~ Normal(0, 1))
    row = {"seed": seed, "fit_failure": _broken(result), "planted": int(planted.sum())}
    row["hard"] = int(hard.sum())
    decile = int(np.ceil(0.1 * len(items)))
    for name, score in (
        ("fit_ppp", items["fit_ppp"]),
        ("outfit", -items["outfit_mean"]),
        ("deviance_ppp", items["ppp"].where(items["ppp"] <= 0.5, 1.0)),
    ):
        rank = score.rank(method="average", na_option="bottom").to_numpy()
        row[f"{name}_top_decile"] = int((rank[planted] <= decile).sum())
        row[f"{name}_hard_top_decile"] = int((rank[hard] <= decile).sum())
        row[f"{name}_median_rank"] = float(np.median(rank[planted]))
    row["fit_q_flagged_planted"] = int((items["fit_q"][planted] < 0.05).sum())
    row["fit_q_flagged_clean"] = int((items["fit_q"][~planted] < 0.05).sum())
    return row


def model_fit(seed: int, args) -> dict:
    from bayes_dualeval.checks import CheckOptions
    from bayes_dualeval.checks.model_fit import model_fit_table
    from bayes_dualeval.core.errors import DataWarning
    from bayes_dualeval.validation.psychometrics import inverted_model

    frame, bad = inverted_model(args.models, args.items, 5000 + seed)
    result = _fit(frame, args.sampler, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = model_fit_table(result.idata, result.dataset, options=CheckOptions(seed=seed))
    named = [str(w.message) for w in caught if issubclass(w.category, DataWarning)]
    clean = table[table["model"] != bad]
    order = table.sort_values("fit_p", kind="stable")["model"].tolist()
    return {
        "seed": seed,
        "inverted_rank": order.index(bad) + 1,
        "inverted_fit_p": float(table.set_index("model").loc[bad, "fit_p"]),
        "named": any(bad in m for m in named),
        "clean_named": sum(m in text for text in named for m in clean["model"]),
        "clean_fit_p_below_0.01": float((clean["fit_p"] < 0.01).mean()),
        "clean_fit_p_below_0.05": float((clean["fit_p"] < 0.05).mean()),
    }


def dependence(seed: int, args) -> dict:
    from bayes_dualeval.checks import CheckOptions
    from bayes_dualeval.checks.dependence import clusters, dependence_table
    from bayes_dualeval.validation.psychometrics import dependent_cluster

    frame, testlet = dependent_cluster(args.models, args.items, 5000 + seed, effect=args.effect)
    result = _fit(frame, args.sampler, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = dependence_table(result.idata, result.dataset, options=CheckOptions(seed=seed))
    found = clusters(table)
    members = set().union(*found.values()) if found else set()
    return {
        "seed": seed,
        "effect": args.effect,
        "fit_failure": _broken(result),
        "clusters": len(found),
        "planted_found": len(members & testlet),
        "others_in_clusters": len(members - testlet),
        "found": bool(testlet) and len(members & testlet) >= 4,
    }


STUDIES = {
    "saturation": saturation,
    "item_fit": item_fit,
    "model_fit": model_fit,
    "dependence": dependence,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--study", nargs="+", choices=list(STUDIES), default=list(STUDIES))
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--effect", type=float, default=2.0)
    parser.add_argument("--sampler", default="map", choices=("map", "svi"))
    args = parser.parse_args(argv)
    pd.set_option("display.width", 200)
    for name in args.study:
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        rows = [STUDIES[name](seed, args) for seed in seeds]
        table = pd.DataFrame(rows)
        print(f"\n## {name}: {args.models} models x {args.items} items, {args.sampler}")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
