"""Coverage of predicted accuracy (short forms) and of adaptive tests, against held-out truth.

A NUTS bank is fitted on some models; the others are held out. Each held-out model:

* answers a 40-item short form of the bank (`compress`, ``ranking`` and ``accuracy``),
  is scored against the bank (`score`'s own code) and its predicted accuracy on all the
  bank's questions of each benchmark (and ``all``) is compared with the accuracy it
  really has on them (its observed answers to every bank question): the share of
  (model, benchmark) rows whose 90% and 50% intervals hold it. Each interval is computed
  with the model x benchmark deviation (`measure/deviation.py`, its spread estimated from
  the bank) and without it (``tau = 0``), on the same ability draws. For the ``accuracy``
  short form also the anchor-weighted estimate (``sum w y / sum w``, ``w`` the size of the
  cluster an item stands for: the `weight` column `compress --for accuracy` wrote until
  this study dropped it) against the IRT prediction and the plain mean: mean
  absolute error against the truth;
* (simulations) takes an adaptive test (`adaptive`, ``fisher``, to sd 0.3 or 50 items)
  on the whole bank with its full answers as the oracle: the share whose 90% and 50%
  intervals hold its true ability, centred on the bank models' true mean (the
  leaderboard's zero).

Cases:

* ``sim``: 40 bank + 100 held-out simulated models, 240 questions in 4 benchmarks,
  a model x benchmark deviation of sd ``--domain-sd`` (0.4) in the truth (the
  simulator's ``domain_sd``: each benchmark is one domain), 2PL;
* ``sim-1d``: as ``sim`` with no deviation (the bank's model is the truth);
* ``bigcodebench``: the real BigCodeBench matrix (../shared/data/real), 300 of its
  1,140 tasks (seeded), 50 bank models and the other 103 held out; one benchmark, so no
  deviation; the truth is each held-out model's accuracy on the 300 tasks.

Usage::

    python scripts/studies/accuracy_coverage.py --case sim --seed 1 --out /tmp/acc_sim_1.json
    python scripts/studies/accuracy_coverage.py --table /tmp/acc_*.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from measure_common import REAL, centred_truth, finish, fit_quietly, progress

SHORT = 40
LEVELS = (0.9, 0.5)


def _split(case: str, seed: int, root: Path, domain_sd: float):
    from bayes_dualeval.model.simulate import simulate, write

    rng = np.random.default_rng(seed)
    truth = None
    empty = pd.DataFrame(columns=["model_label", "item_id", "reward"])
    if case in ("sim", "sim-1d"):
        sd = domain_sd if case == "sim" else 0.0
        static, _, truth = simulate(n_models=140, n_static=240, n_arena=0, n_domains=4,
                                    domain_sd=sd, seed=seed)  # fmt: skip
        n_bank = 40
    elif case == "bigcodebench":
        wide = pd.read_csv(REAL / "bigcodebench" / "bigcodebench.csv")
        tasks = sorted(rng.choice(wide.columns[1:], 300, replace=False), key=int)
        long = wide.melt("model_label", tasks, "sample_index", "correct")
        static = long.assign(dataset="bigcodebench", sample_index=long["sample_index"].astype(int))
        n_bank = 50
    else:
        raise SystemExit(f"unknown case {case}")
    names = sorted(static["model_label"].unique())
    bank = sorted(rng.choice(names, n_bank, replace=False))
    new = [m for m in names if m not in bank]
    for name, models in (("bank_data", bank), ("new_data", new)):
        write(root / name, static[static["model_label"].isin(models)], empty, {})
    return bank, new, truth


def _draws(bank, resp, seed):
    """The held-out models' raw ability draws as `score` makes them, on the bank it thins to."""
    from bayes_dualeval.measure.bank import shift
    from bayes_dualeval.measure.grid import arena_pairs, posterior
    from bayes_dualeval.measure.score import PER_DRAW, draws_affordable

    pairs = arena_pairs(bank, resp)
    bank = bank.thin(draws_affordable(bank, resp, pairs))
    centred = posterior(bank, resp, pairs).sample(np.random.default_rng(seed), PER_DRAW)
    return bank, centred[:, :, 0] + shift(bank)[None, :]


def _truth(bank, full) -> pd.DataFrame:
    """Each held-out model's accuracy on all the bank's questions of each benchmark."""
    bench = bank.items["dataset"].to_numpy(dtype=str)[full.static_item]
    frame = pd.DataFrame({"model": np.asarray(full.models)[full.static_model],
                          "dataset": bench, "y": full.static_y, "n": full.static_n})  # fmt: skip
    both = pd.concat([frame, frame.assign(dataset="all")])
    sums = both.groupby(["model", "dataset"])[["y", "n"]].sum()
    return sums["y"] / sums["n"]


def _coverage(bank, short_resp, full_truth, seed, tau_hat) -> dict:
    from bayes_dualeval.measure.score import accuracy_table

    thinned, raw = _draws(bank, short_resp, seed)
    out, tables = {}, {}
    for label, tau in (("deviation", tau_hat), ("no_deviation", 0.0)):
        for level in LEVELS:
            rng = np.random.default_rng(seed)
            table = accuracy_table(thinned, short_resp, raw, level, rng, tau=tau)
            table = table.set_index(["model", "dataset"])
            true = full_truth.reindex(table.index)
            inside = (table["predicted_lo"] <= true) & (true <= table["predicted_hi"])
            bench = table.index.get_level_values("dataset") != "all"
            key = f"{label}_{int(level * 100)}"
            out[f"coverage_{key}_benchmarks"] = round(float(inside[bench].mean()), 3)
            out[f"coverage_{key}_all"] = round(float(inside[~bench].mean()), 3)
            out[f"rows_{key}_benchmarks"] = int(bench.sum())
            out[f"width_{key}_benchmarks"] = round(
                float((table["predicted_hi"] - table["predicted_lo"])[bench].mean()), 4
            )
            tables[key] = table.assign(truth=true)
    table = tables["deviation_90"]
    out["mae_predicted"] = round(
        float((table["predicted_accuracy"] - table["truth"]).abs().mean()), 4
    )
    return out, table


def _cluster_sizes(bank, short, seed) -> pd.Series:
    """The size of the cluster each item of an ``accuracy`` short form stands for.

    The weight `compress --for accuracy` wrote until it was dropped: the same clustering
    (`measure/anchors.py`, same seed) per source, its clusters' sizes.
    """
    from bayes_dualeval.measure import anchors

    ids = bank.items["item"].to_numpy(dtype=str)
    source = bank.items["source"].to_numpy(dtype=str)
    sizes = {}
    for name, k in short["source"].value_counts().items():
        members = np.flatnonzero(source == name)
        rows, size = anchors.representatives(anchors.success_profiles(bank, members), k, seed)
        sizes.update(zip(ids[members[rows]], size.astype(float), strict=True))
    weight = pd.Series(sizes)
    assert set(weight.index) == set(short["item"])  # the short form's own items
    return weight


def _anchor_errors(short, short_resp, table, bank, seed) -> dict:
    """MAE of the weighted anchors, the plain mean and the IRT prediction (``accuracy`` form)."""
    ids = bank.items["item"].to_numpy(dtype=str)
    bench = bank.items["dataset"].to_numpy(dtype=str)
    weight = _cluster_sizes(bank, short, seed)
    frame = pd.DataFrame({
        "model": np.asarray(short_resp.models)[short_resp.static_model],
        "dataset": bench[short_resp.static_item],
        "w": weight.reindex(ids[short_resp.static_item]).to_numpy(),
        "y": short_resp.static_share,
    })  # fmt: skip
    frame = pd.concat([frame, frame.assign(dataset="all")])
    frame["wy"] = frame["w"] * frame["y"]
    g = frame.groupby(["model", "dataset"])
    weighted = g["wy"].sum() / g["w"].sum()
    plain = g["y"].mean()
    truth = table["truth"]
    out = {}
    for name, est in (("weighted", weighted), ("plain", plain),
                      ("irt", table["predicted_accuracy"])):  # fmt: skip
        err = (est.reindex(truth.index) - truth).abs()
        bench = truth.index.get_level_values("dataset") != "all"
        out[f"mae_{name}_benchmarks"] = round(float(err[bench].mean()), 4)
        out[f"mae_{name}_all"] = round(float(err[~bench].mean()), 4)
    return out


def _adaptive(bank, full, truth, bank_models, seed) -> dict:
    from bayes_dualeval.measure.adaptive import adaptive

    true = None
    out = {}
    for level in LEVELS:
        result = adaptive(bank, full, select="fisher", target_se=0.3, max_items=50,
                          seed=seed, ci=level).summary.set_index("model")  # fmt: skip
        true = centred_truth(truth, bank_models, result.index, result.index)
        inside = (result["theta_lo"] <= true) & (true <= result["theta_hi"])
        out[f"adaptive_coverage_{int(level * 100)}"] = round(float(inside.mean()), 3)
    out["adaptive_models"] = len(result)
    out["adaptive_mean_items"] = round(float(result["n_items"].mean()), 1)
    out["adaptive_mean_sd"] = round(float(result["theta_sd"].mean()), 3)
    z = (result["theta_mean"] - true) / result["theta_sd"]
    out["adaptive_z_mean"], out["adaptive_z_sd"] = (
        round(float(z.mean()), 3),
        round(float(z.std()), 3),
    )
    return out


def run_case(case: str, seed: int, draws: int, domain_sd: float, adaptive: bool = True) -> dict:
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.measure import deviation
    from bayes_dualeval.measure.bank import Bank
    from bayes_dualeval.measure.compress import compress
    from bayes_dualeval.measure.responses import responses
    from bayes_dualeval.runs.fit import write_run

    root = Path(tempfile.mkdtemp(prefix=f"accuracy-{case}-"))
    bank_models, new_models, truth = _split(case, seed, root, domain_sd)
    settings = SamplerSettings(sampler="nuts", chains=4, warmup=draws, draws=draws, seed=seed)
    start = time.perf_counter()
    fitted = fit_quietly(root / "bank_data", settings)
    out = {"case": case, "seed": seed, "bank_models": len(bank_models),
           "held_out_models": len(new_models),
           "domain_sd": domain_sd if case == "sim" else 0.0,
           "bank_fit_seconds": round(time.perf_counter() - start, 1),
           "bank_converged": bool(fitted.converged)}  # fmt: skip
    progress(f"{case} seed {seed}: bank fitted in {out['bank_fit_seconds']:.0f} s")
    write_run(fitted, root / "bank")
    bank = Bank.from_run(root / "bank", allow_approximate=True)
    out["bank_items"] = int(len(bank.items))
    out["tau_hat"] = round(deviation.spread(bank), 4)
    full = responses(root / "new_data", bank)
    full_truth = _truth(bank, full)
    for purpose in ("ranking", "accuracy"):
        short = compress(bank, SHORT, seed=seed, purpose=purpose)
        resp = responses(root / "new_data", bank, items=short["item"])
        cov, table = _coverage(bank, resp, full_truth, seed, out["tau_hat"])
        out.update({f"{purpose}_{k}": v for k, v in cov.items()})
        if purpose == "accuracy":
            errors = _anchor_errors(short, resp, table, bank, seed)
            out.update({f"anchors_{k}": v for k, v in errors.items()})
        progress(f"{case} seed {seed}: {purpose} short form scored")
    if truth is not None and adaptive:
        out.update(_adaptive(bank, full, truth, bank_models, seed))
        progress(f"{case} seed {seed}: adaptive tests done")
    return out


def table(paths) -> str:
    """The results of several runs (their JSON files) pooled per case, as Markdown.

    Coverage is pooled over the runs' rows (each run's share times its rows), with its
    binomial standard error ``sqrt(c (1 - c) / n)`` (rows of one model are not independent
    across benchmarks, so the error is a lower bound).
    """
    import json

    runs = [json.loads(Path(p).read_text()) for p in paths]
    lines = []
    for case in sorted({r["case"] for r in runs}):
        mine = [r for r in runs if r["case"] == case]
        seeds = ", ".join(str(r["seed"]) for r in mine)
        conv = sum(r["bank_converged"] for r in mine)
        lines.append(f"**{case}** (seeds {seeds}; {conv} of {len(mine)} banks converged; "
                     f"tau_hat {', '.join(str(r['tau_hat']) for r in mine)})\n")  # fmt: skip
        lines.append("| short form | deviation | rows | 90%: benchmarks | 90%: all | "
                     "50%: benchmarks | 50%: all | mean 90% width |")  # fmt: skip
        lines.append("|---|---|---|---|---|---|---|---|")
        for form in ("ranking", "accuracy"):
            for dev in ("deviation", "no_deviation"):
                cells = []
                n = sum(r[f"{form}_rows_{dev}_90_benchmarks"] for r in mine)
                n_all = sum(r["held_out_models"] for r in mine)
                for level in (90, 50):
                    for part, rows in (("benchmarks", n), ("all", n_all)):
                        key = f"{form}_coverage_{dev}_{level}_{part}"
                        if part == "benchmarks":
                            weights = [r[f"{form}_rows_{dev}_90_benchmarks"] for r in mine]
                        else:
                            weights = [r["held_out_models"] for r in mine]
                        c = sum(r[key] * w for r, w in zip(mine, weights, strict=True)) / rows
                        cells.append(f"{c:.3f} +- {np.sqrt(c * (1 - c) / rows):.3f}")
                width = np.mean([r[f"{form}_width_{dev}_90_benchmarks"] for r in mine])
                label = "with" if dev == "deviation" else "without"
                lines.append(f"| {form} | {label} | {n} | " + " | ".join(cells)
                             + f" | {width:.3f} |")  # fmt: skip
        lines.append("")
        keys = [k for k in mine[0] if k.startswith("anchors_mae")]
        lines.append("| " + " | ".join(k.removeprefix("anchors_mae_") for k in keys) + " |")
        lines.append("|" + "---|" * len(keys))
        lines.append("| " + " | ".join(f"{np.mean([r[k] for r in mine]):.4f}" for k in keys)
                     + " |")  # fmt: skip
        if "adaptive_models" in mine[0]:
            n = sum(r["adaptive_models"] for r in mine)
            lines.append("")
            lines.append(
                "| adaptive | models | 90% | 50% | mean items | mean sd | z mean | z sd |"
            )
            lines.append("|---|---|---|---|---|---|---|---|")
            cov = {lv: sum(r[f"adaptive_coverage_{lv}"] * r["adaptive_models"] for r in mine) / n
                   for lv in (90, 50)}  # fmt: skip
            avg = {
                k: np.mean([r[k] for r in mine])
                for k in (
                    "adaptive_mean_items",
                    "adaptive_mean_sd",
                    "adaptive_z_mean",
                    "adaptive_z_sd",
                )
            }
            lines.append(
                f"| fisher, sd 0.3 or 50 items | {n} | "
                + " | ".join(f"{c:.3f} +- {np.sqrt(c * (1 - c) / n):.3f}" for c in cov.values())
                + " | " + " | ".join(f"{v:.3f}" for v in avg.values()) + " |"
            )  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", default="sim", choices=["sim", "sim-1d", "bigcodebench"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=500, help="NUTS warm-up and draws")
    parser.add_argument("--domain-sd", type=float, default=0.4)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", nargs="+", type=Path, help="pool these results instead")
    parser.add_argument("--no-adaptive", action="store_true", help="skip the adaptive tests")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    from bayes_dualeval.inference.device import configure

    configure("cpu", 4)
    result = run_case(args.case, args.seed, args.draws, args.domain_sd, not args.no_adaptive)
    finish(result, args.out)


if __name__ == "__main__":
    main()
