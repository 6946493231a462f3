"""Validation of `compress` and `adaptive`: short forms and adaptive tests of held-out models.

A bank is fitted (NUTS) on some models; the others are held out and measured three ways
against it, always with `score` or `adaptive` (the bank is never refitted):

* full: every question the held-out model answered (the reference);
* short form: only the items `compress` chose (``--share`` of the bank's items, or
  ``--items``), for ranking (informative items) and for accuracy (representative items),
  and, for comparison, random subsets of the same size (``--random`` of them);
* adaptive: `adaptive` with ``fisher`` and with ``random`` to the same target sd.

Reported: Spearman correlation of the held-out models' abilities with the full-data ones
(short form and random subsets), mean absolute error of the predicted full-benchmark
accuracy (short form: `accuracy.csv`'s ``all`` row and per benchmark, against the observed
full accuracy), the mean number of questions fisher and random need to reach the target,
and the coverage of the adaptive 95% intervals of the truth (simulations) or of the
full-data posterior mean (real data).

Cases (held out from every choice of defaults: none of them was looked at before the
rules of `compress` and `adaptive` were fixed):

* ``sim``: 30 bank + 30 held-out simulated models, 1,000 questions in 3 benchmarks (2PL);
* ``chembench``: ChemBench (22 models x 2,854 questions), 16 bank models, 6 held out;
* ``helm``: HELM AIR-Bench static (65 models x 433 questions), 50 bank, 15 held out;
* ``sim-varied``: as ``sim`` with discriminations as varied as HELM's (sd of log a 0.7, the
  simulator's default 0.3; HELM's bank has 0.79): a pool where the best question is much
  better than a random one;
* ``sim-joint``: 30 bank + 30 held-out simulated models, 300 questions and 100 arena
  prompts (adaptive tests draw from one pool of both);
* ``mtbench``: MT-Bench grades as arena rewards (34 models x 160 prompts), 24 bank, 10
  held out (adaptive tests of prompts only; no short form: no static accuracy).

Usage::

    python scripts/studies/design_study.py --case sim --out /tmp/design_sim.json
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from measure_common import REAL, centred_truth, finish, fit_quietly, progress


def _split(case: str, seed: int, root: Path):
    from bayes_dualeval.model.simulate import simulate, write

    truth = None
    rng = np.random.default_rng(seed)
    empty = pd.DataFrame(columns=["model_label", "item_id", "reward"])
    if case in ("sim", "sim-varied"):
        spread = {"sim": {}, "sim-varied": {"log_a_sd": 0.7}}[case]
        static, arena, truth = simulate(n_models=60, n_static=1000, n_arena=0, seed=seed,
                                        **spread)  # fmt: skip
        n_new = 30
    elif case == "sim-joint":
        static, arena, truth = simulate(n_models=60, n_static=300, n_arena=100, seed=seed)
        n_new = 30
    elif case == "mtbench":
        static = pd.DataFrame(columns=["model_label", "dataset", "sample_index", "correct"])
        arena = pd.read_json(REAL / "mtbench" / "arena.jsonl", lines=True)
        n_new = 10
    else:
        folder = {"chembench": "chembench", "helm": "helm_airbench"}[case]
        static, arena = pd.read_json(REAL / folder / "static.jsonl", lines=True), empty
        n_new = 6 if case == "chembench" else 15
    names = sorted(set(static["model_label"]) | set(arena["model_label"]))
    new = sorted(rng.choice(names, n_new, replace=False))
    bank = [m for m in names if m not in new]
    for name, models in (("bank_data", bank), ("new_data", new)):
        write(root / name, static[static["model_label"].isin(models)],
              arena[arena["model_label"].isin(models)], {})  # fmt: skip
    return bank, new, truth


def _short_dir(root: Path, items, name: str) -> Path:
    """The held-out data restricted to ``items``, as files (what a user would run)."""
    from bayes_dualeval.core.item_ids import arena_id, static_ids

    out, keep = root / name, set(items)
    for path in sorted((root / "new_data").glob("*/*.jsonl")):
        frame = pd.read_json(path, lines=True)
        source = path.parent.name
        if "item_id" in frame:
            ids = pd.Series([arena_id(source, q) for q in frame["item_id"].astype(str)])
        else:
            ids = pd.Series(static_ids(source, frame["dataset"], frame["sample_index"]))
        chosen = frame[ids.isin(keep).to_numpy()]
        if len(chosen):
            (out / source).mkdir(parents=True, exist_ok=True)
            chosen.to_json(out / source / path.name, orient="records", lines=True)
    return out


def _oracle_ratio(bank, theta, target: float) -> float:
    """Items an oracle needs to reach sd ``target`` against a random order's, averaged.

    The oracle knows each held-out model's ability (``theta``, its full-data posterior mean
    on the leaderboard's scale) and asks the bank's items in decreasing order of their
    Fisher information there (static questions and arena prompts, at every bank draw,
    averaged; the prior ignored); a random order gains the pool's mean information per
    item. No selection rule can beat the oracle, so its ratio bounds what ``fisher`` can
    reach on the pool.
    """
    from bayes_dualeval.core.thinning import evenly_spaced
    from bayes_dualeval.measure import information
    from bayes_dualeval.measure.bank import shift

    rows = evenly_spaced(bank.n_draws, 100)
    arena = (bank.items["kind"] == "arena").to_numpy()
    par = bank.parameters(rows, np.nonzero(~arena)[0])
    table = information.prompts(bank) if arena.any() else None
    info = np.zeros((len(theta), len(arena)))
    for k, value in enumerate(np.asarray(theta)):
        raw = value + shift(bank, rows)
        if (~arena).any():
            info[k, ~arena] = information.fisher_information(
                raw[:, None], par["b"], par["a"], par["c"], par["d"]
            ).mean(axis=0)
        if arena.any():
            info[k, arena] = information.arena_information(
                bank, table, raw, np.nonzero(arena)[0], rows
            ).mean(axis=0)
    need = 1.0 / target**2
    best = [np.searchsorted(np.cumsum(np.sort(row)[::-1]), need) + 1 for row in info]
    return float(np.mean(np.array(best) / (need / info.mean(axis=1))))


def _short_forms(bank, root, k, seed, n_random, measure) -> dict:
    """Short forms for ranking and for accuracy, and random subsets of the same size."""
    from bayes_dualeval.measure.compress import compress

    out = {}
    start = time.perf_counter()
    short = compress(bank, k, seed=seed)
    out["compress_seconds"] = round(time.perf_counter() - start, 2)
    rho, mae_all, mae_bench = measure(short["item"], "short")
    out["short_spearman"], out["short_mae_all"] = round(rho, 3), round(mae_all, 4)
    out["short_mae_per_benchmark"] = round(mae_bench, 4)
    anchors = compress(bank, k, seed=seed, purpose="accuracy")
    rho, mae_all, mae_bench = measure(anchors["item"], "anchors")
    out["accuracy_form_spearman"] = round(rho, 3)
    out["accuracy_form_mae_all"] = round(mae_all, 4)
    out["accuracy_form_mae_per_benchmark"] = round(mae_bench, 4)
    rng = np.random.default_rng(seed + 1)
    ids = bank.items["item"].to_numpy()
    randoms = [measure(rng.choice(ids, len(short), replace=False), f"random{r}")
               for r in range(n_random)]  # fmt: skip
    out["random_spearman_mean"] = round(float(np.mean([r[0] for r in randoms])), 3)
    out["random_mae_all_mean"] = round(float(np.mean([r[1] for r in randoms])), 4)
    out["random_mae_per_benchmark_mean"] = round(float(np.mean([r[2] for r in randoms])), 4)
    return out


def run_case(case: str, seed: int, draws: int, share: float, n_random: int, target: float,
             selects=("fisher", "random")):  # fmt: skip
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.measure.adaptive import adaptive
    from bayes_dualeval.measure.bank import Bank
    from bayes_dualeval.measure.responses import responses
    from bayes_dualeval.measure.score import score
    from bayes_dualeval.runs.fit import write_run

    root = Path(tempfile.mkdtemp(prefix=f"design-{case}-"))
    bank_models, new_models, truth = _split(case, seed, root)
    settings = SamplerSettings(sampler="nuts", chains=4, warmup=draws, draws=draws, seed=seed)
    start = time.perf_counter()
    result = fit_quietly(root / "bank_data", settings)
    out = {"case": case, "seed": seed, "bank_models": len(bank_models),
           "held_out": len(new_models), "bank_fit_seconds": round(time.perf_counter() - start),
           "bank_converged": bool(result.converged)}  # fmt: skip
    progress(f"bank fitted in {out['bank_fit_seconds']} s")
    write_run(result, root / "bank")
    bank = Bank.from_run(root / "bank")
    n_items, n_static = len(bank.items), int((bank.items["kind"] == "static").sum())
    k = max(1, int(round(share * n_items)))
    out["bank_items"], out["bank_static_items"], out["short_items"] = n_items, n_static, k
    full = score(bank, root / "new_data", seed=seed)
    ref = full.scores[full.scores["new"]].set_index("model")["theta_mean"]
    # the sd with every answer: the floor an adaptive test's sd cannot go below
    sd = full.scores.loc[full.scores["new"], "theta_sd"]
    out["full_theta_sd_mean"] = round(float(sd.mean()), 3)
    out["oracle_over_random"] = round(_oracle_ratio(bank, ref.to_numpy(), target), 3)
    ref = ref.reindex(sorted(ref.index))
    observed = full.accuracy.set_index(["model", "dataset"])["observed_accuracy"]

    def measure(items, name):
        res = score(bank, _short_dir(root, items, name), seed=seed)
        theta = res.scores[res.scores["new"]].set_index("model")["theta_mean"]
        acc = res.accuracy.set_index(["model", "dataset"])["predicted_accuracy"]
        err = (acc - observed.reindex(acc.index)).abs()
        is_all = err.index.get_level_values("dataset") == "all"
        return (float(theta.corr(ref.reindex(theta.index), "spearman")),
                float(err[is_all].mean()), float(err[~is_all].mean()))  # fmt: skip

    if n_static:  # short forms are judged by their static accuracy
        out.update(_short_forms(bank, root, k, seed, n_random, measure))
    oracle = responses(root / "new_data", bank)
    runs = {}
    for select in selects:
        start = time.perf_counter()
        res = adaptive(bank, oracle, select=select, target_se=target, max_items=n_items,
                       seed=seed)  # fmt: skip
        runs[select] = res.summary.set_index("model")
        out[f"adaptive_{select}_seconds"] = round(time.perf_counter() - start, 1)
        out[f"adaptive_{select}_items_mean"] = round(float(res.summary["n_items"].mean()), 1)
        out[f"adaptive_{select}_reached"] = int((res.summary["stopped_by"] == "se").sum())
        arena = float((res.trace["kind"] == "arena").mean())
        out[f"adaptive_{select}_arena_share"] = round(arena, 3)
    out["target_se"] = target
    for select in selects[:1] + selects[2:]:
        out[f"{select}_over_random"] = round(
            out[f"adaptive_{select}_items_mean"] / out["adaptive_random_items_mean"], 3
        )
        # a model that never reaches the target asks its whole pool under every rule, which
        # pulls the ratio towards 1: the same ratio over the models both rules brought there
        both = (runs[select]["stopped_by"] == "se") & (runs["random"]["stopped_by"] == "se")
        mine, theirs = runs[select].loc[both, "n_items"], runs["random"].loc[both, "n_items"]
        out[f"{select}_over_random_reached"] = round(mine.mean() / theirs.mean(), 3)
        out[f"reached_by_{select}_and_random"] = int(both.sum())
    fish = runs["fisher"]
    if truth is not None:
        goal = centred_truth(truth, bank_models, new_models, fish.index)
    else:
        goal = ref.reindex(fish.index)
    inside = (fish["theta_lo"] <= goal) & (goal <= fish["theta_hi"])
    out["adaptive_coverage_95"] = round(float(inside.mean()), 3)
    shutil.rmtree(root, ignore_errors=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cases = ["sim", "sim-varied", "sim-joint", "mtbench", "chembench", "helm"]
    parser.add_argument("--case", default="sim", choices=cases)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=500, help="NUTS warm-up and draws")
    parser.add_argument("--share", type=float, default=0.1, help="short form's share")
    parser.add_argument("--random", type=int, default=10, help="random subsets to compare")
    parser.add_argument("--target-se", type=float, default=0.3)
    parser.add_argument("--kl", action="store_true", help="also run the kl criterion")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from bayes_dualeval.inference.device import configure

    configure("cpu", 4)
    selects = ("fisher", "random") + (("kl",) if args.kl else ())
    result = run_case(args.case, args.seed, args.draws, args.share, args.random,
                      args.target_se, selects)  # fmt: skip
    finish(result, args.out)


if __name__ == "__main__":
    main()
