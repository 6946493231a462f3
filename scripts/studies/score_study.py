"""Validation of `bayes-dualeval score`: coverage, agreement with a full refit, person fit.

Each case simulates evaluations with known truth, fits a bank (NUTS) on some models,
scores the held-out models against it, and compares:

* coverage: the share of held-out models whose 90% interval holds the true ability
  (centred on the bank models' true mean, the leaderboard's zero);
* agreement: a full NUTS refit on bank and held-out models together; each held-out
  model's refit posterior mean (re-centred on the bank models) inside its score
  interval, and the Spearman correlation of the two;
* time: the whole score (bank read, grid posterior, tables) against the bank's fit;
* person fit: copies of the held-out models with a share of their static answers flipped
  (a shifted harness) against the clean ones: the share flagged (fit_p below the
  threshold) of each.

Cases (none of them used to choose the grid, the draws or the person-fit statistic,
which were set on the 10-model bank of tests/test_score.py):

* ``joint``: 20 bank + 40 held-out models, 300 questions + 100 prompts (2PL);
* ``static``: 30 bank + 40 held-out models, 200 questions, static only;
* ``chembench``: the real ChemBench matrix (22 models x 2,854 questions, from
  ../shared/data/real), 16 bank models and 6 held out (no truth: agreement with the full
  fit only).

Usage::

    python scripts/studies/score_study.py --case joint --out /tmp/score_joint.json
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

FLIP = 0.15


def _write_split(root: Path, static, arena, bank_models, new_models):
    from bayes_dualeval.model.simulate import write

    for name, models in (("bank_data", bank_models), ("new_data", new_models)):
        write(
            root / name,
            static[static["model_label"].isin(models)],
            arena[arena["model_label"].isin(models)] if len(arena) else arena,
            {},
        )


def _flipped(root: Path, seed: int) -> Path:
    """A copy of the new models' data with FLIP of every model's static answers flipped."""
    out = root / "flipped_data"
    shutil.copytree(root / "new_data", out)
    path = out / "bench" / "static.jsonl"
    frame = pd.read_json(path, lines=True)
    rng = np.random.default_rng(seed)
    flip = rng.random(len(frame)) < FLIP
    frame.loc[flip, "correct"] = 1 - frame.loc[flip, "correct"]
    frame["model_label"] = frame["model_label"] + "-flipped"
    frame.to_json(path, orient="records", lines=True)
    arena = out / "arena" / "arena.jsonl"
    if arena.exists():
        arena.unlink()
    return out


def run_case(case: str, seed: int, draws: int) -> dict:
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.measure.bank import Bank
    from bayes_dualeval.measure.score import MISFIT_P, score
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.runs.fit import write_run

    root = Path(tempfile.mkdtemp(prefix=f"score-{case}-"))
    truth = None
    if case in ("joint", "static"):
        n_bank, n_new = (20, 40) if case == "joint" else (30, 40)
        static, arena, truth = simulate(
            n_models=n_bank + n_new,
            n_static=300 if case == "joint" else 200,
            n_arena=100 if case == "joint" else 0,
            seed=seed,
        )
        names = sorted(static["model_label"].unique())
        rng = np.random.default_rng(seed)
        new_models = sorted(rng.choice(names, n_new, replace=False))
        bank_models = [m for m in names if m not in new_models]
        _write_split(root, static, arena, bank_models, new_models)
    elif case == "chembench":
        frame = pd.concat(
            pd.read_json(p, lines=True) for p in sorted((REAL / "chembench").rglob("*.jsonl"))
        )
        names = sorted(frame["model_label"].unique())
        rng = np.random.default_rng(seed)
        new_models = sorted(rng.choice(names, 6, replace=False))
        bank_models = [m for m in names if m not in new_models]
        _write_split(root, frame, pd.DataFrame(), bank_models, new_models)
    else:
        raise SystemExit(f"unknown case {case}")
    settings = SamplerSettings(sampler="nuts", chains=4, warmup=draws, draws=draws, seed=seed)
    start = time.perf_counter()
    bank_fit = fit_quietly(root / "bank_data", settings)
    bank_seconds = time.perf_counter() - start
    progress(f"bank fitted in {bank_seconds:.0f} s")
    write_run(bank_fit, root / "bank")
    start = time.perf_counter()
    bank = Bank.from_run(root / "bank")
    result = score(bank, root / "new_data", ci=0.9, seed=seed)
    score_seconds = time.perf_counter() - start
    table = result.scores[result.scores["new"]].set_index("model")
    out = {
        "case": case,
        "seed": seed,
        "bank_models": len(bank_models),
        "new_models": len(new_models),
        "bank_fit_seconds": round(bank_seconds, 1),
        "bank_converged": bool(bank_fit.converged),
        "score_seconds": round(score_seconds, 2),
        "score_share_of_fit": round(score_seconds / bank_seconds, 3),
    }
    if truth is not None:
        true = centred_truth(truth, bank_models, new_models, table.index)
        inside = (table["theta_lo"] <= true) & (true <= table["theta_hi"])
        out["coverage_90"] = round(float(inside.mean()), 3)
        out["spearman_truth"] = round(float(table["theta_mean"].corr(true, "spearman")), 3)
    start = time.perf_counter()
    full = fit_quietly([root / "bank_data", root / "new_data"], settings)
    out["full_fit_seconds"] = round(time.perf_counter() - start, 1)
    progress(f"full refit in {out['full_fit_seconds']:.0f} s")
    out["full_converged"] = bool(full.converged)
    post = full.idata.posterior["theta"].values.reshape(-1, len(full.dataset.models))
    labels = list(full.dataset.models)
    bank_idx = [labels.index(m) for m in bank_models]
    refit = pd.Series(
        (post - post[:, bank_idx].mean(axis=1, keepdims=True)).mean(axis=0), index=labels
    )[new_models].reindex(table.index)
    agree = (table["theta_lo"] <= refit) & (refit <= table["theta_hi"])
    out["refit_inside"] = f"{int(agree.sum())}/{len(agree)}"
    out["spearman_refit"] = round(float(table["theta_mean"].corr(refit, "spearman")), 3)
    out["max_abs_diff_refit"] = round(float((table["theta_mean"] - refit).abs().max()), 3)
    flipped = score(bank, [root / "new_data", _flipped(root, seed)], seed=seed).scores
    fp = flipped.set_index("model")["fit_p"].dropna()
    bad = fp[fp.index.str.endswith("-flipped")]
    clean = fp[~fp.index.str.endswith("-flipped")]
    out["misfit_threshold"] = MISFIT_P
    out["flagged_flipped"] = round(float((bad < MISFIT_P).mean()), 3)
    out["flagged_clean"] = round(float((clean < MISFIT_P).mean()), 3)
    for level in (0.01, 0.05, 0.1):
        out[f"flagged_at_{level:g}"] = [
            round(float((bad < level).mean()), 3),
            round(float((clean < level).mean()), 3),
        ]
    shutil.rmtree(root, ignore_errors=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", default="joint", choices=["joint", "static", "chembench"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=500, help="NUTS warm-up and draws")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from bayes_dualeval.inference.device import configure

    configure("cpu", 4)
    result = run_case(args.case, args.seed, args.draws)
    finish(result, args.out)


if __name__ == "__main__":
    main()
