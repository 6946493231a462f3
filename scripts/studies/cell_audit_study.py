"""Cell audit study: how well anomalies.csv ranks planted faults, against simple baselines.

Each scenario plants faults in data whose truth is known, fits the model, writes the run
with ``--anomalies all`` (through :func:`bayes_dualeval.runs.output.write`) and scores
every cell by its position in ``anomalies.csv``. Static scenarios turn 2% of the cells
into successes among failures the model should not pass (reference success probability
below ``--max-p``):

* ``2pl``: 30 models x 200 items from the model's own family (2PL);
* ``3pl``: the same with a guessing floor ``c = 0.25`` (3PL truth, fitted by the 2PL;
  candidates: true ``p < c + --max-p / 2``, since no cell is below ``c``), plus an SVI
  fit of the 3PL specification;
* ``wide-a``: 2PL with widely spread discriminations (``log a ~ Normal(0, 0.8)``);
* ``helm``: the real static set ``../shared/data/real/helm_airbench/static.jsonl`` (65 x
  433), planted among failures whose success probability under a MAP fit of the clean
  data is below ``--max-p`` (a choice that favours the model's own score);
* ``helm-any``: the same data planted among *all* failures (a choice that favours no
  score; many planted cells are then unremarkable for every method).

The real-data scenarios are skipped when their file is absent. The arena scenarios follow
DualEval's protocol: 2.0 added to the z-score of 3% of the cells, chosen among the lowest
third of z-scores; ``arena`` in 20 models x 100 simulated prompts with noisy rewards
(``reward_noise`` 1.0), ``mtbench`` in the real MT-Bench grades
(``../shared/data/real/mtbench/arena.jsonl``, 34 models x 160 question turns, sparse).

Scores compared (AUROC, AUPRC, precision at k = number planted): the package's
``anomalies.csv`` order from an SVI fit and from a MAP fit; DualEval's point residual
``(y - p) / sqrt(p (1 - p))`` from the MAP fit; the empirical baseline
``y (1 - acc_model * acc_item)``; and, on simulations, the oracle ``y (1 - p_true)``.
Arena: the order from MAP fits with the pairs and the reward likelihoods, against the
two-way residual ``z - mean_model - mean_prompt + mean``. Also printed: how many planted
and clean cells have ``q_value < 0.05``, and the share of clean cells with
``p_value <= 0.05`` (at most 0.05 when the p-values are valid).

Usage::

    python scripts/studies/cell_audit_study.py --seeds 3
    python scripts/studies/cell_audit_study.py --seeds 2 --scenarios 2pl arena
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / ".." / "shared" / "data" / "real"
HELM = REAL / "helm_airbench" / "static.jsonl"
MTBENCH = REAL / "mtbench" / "arena.jsonl"
SCENARIOS = ("2pl", "3pl", "wide-a", "helm", "helm-any", "arena", "mtbench")
METRICS = ("auroc", "auprc", "precision_at_k")


def fit_run(dataset, spec: str, sampler: str, seed: int, folder: Path, **overrides):
    """Fit, write the run with every cell in anomalies.csv; the file and the result."""
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs import output
    from bayes_dualeval.runs.fit import fit

    config = load_spec(spec).replace(**overrides)
    settings = SamplerSettings(sampler=sampler, seed=seed, progress=False)
    result = fit(dataset, config, settings)
    post = result.idata.posterior
    broken = [name for name in post.data_vars if not np.isfinite(post[name].values).all()]
    if broken:
        print(f"note: {spec} {sampler} seed {seed}: non-finite {', '.join(broken)}; skipped")
        return None, result
    name = f"{spec}-{sampler}-{time.time_ns()}"
    run = output.write(result, folder / name, anomalies="all", report=False)
    return pd.read_csv(run / "anomalies.csv"), result


def flagged(table: pd.DataFrame, key, planted) -> tuple[int, int, float]:
    """Planted and clean cells with q < 0.05, and the clean share with p_value <= 0.05."""
    row = table.set_index(["model", "item"]).reindex(key)
    q = row["q_value"].to_numpy(dtype=np.float64) < 0.05
    p = row["p_value"].to_numpy(dtype=np.float64) <= 0.05
    return int((q & planted).sum()), int((q & ~planted).sum()), float(p[~planted].mean())


def point_residual(table: pd.DataFrame, key) -> np.ndarray:
    """DualEval's ``(y - p) / sqrt(p (1 - p))`` from a MAP run's cell table."""
    row = table.set_index(["model", "item"]).reindex(key)
    y = row["observed"].to_numpy(dtype=np.float64)
    p = np.clip(row["expected"].to_numpy(dtype=np.float64), 1e-12, 1 - 1e-12)
    return (y - p) / np.sqrt(p * (1.0 - p))


def loo_score(result, dataset) -> np.ndarray:
    """Surprise of each static success left out: ``1 - exp(loo_i)`` (PSIS-LOO), 0 for a failure.

    ``exp(loo_i)`` is the leave-one-out predictive probability of the observed label, so
    for a success it is the one-sided LOO p-value ``P(y_rep >= 1 | other data)``.
    """
    from bayes_dualeval.posterior.loo import loo

    elpd = loo(result.idata)
    loo_i = np.asarray(elpd["loo_i"]).ravel()[: len(dataset.static_y)]
    return np.where(dataset.static_y > 0, 1.0 - np.exp(loo_i), 0.0)


def static_rows(dataset, planted, truth_p, seed, folder, *, svi_3pl=False, nuts=False):
    """Score the static cells of one planted data set by every method."""
    from bayes_dualeval.validation.audit import (
        empirical_baseline,
        ranking_metrics,
        static_key,
        table_score,
    )

    key = static_key(dataset)
    rows = []

    def add(method, score, table=None):
        row = {"method": method, **ranking_metrics(score, planted)}
        if table is not None:
            row["q_planted"], row["q_clean"], row["clean_p05"] = flagged(table, key, planted)
        rows.append(row)

    svi, fitted = fit_run(dataset, "dualeval-2pl", "svi", seed, folder, mode="static")
    if svi is not None:
        add("anomalies.csv (2PL, SVI)", table_score(svi, key), svi)
        add("PSIS-LOO p (2PL, SVI)", loo_score(fitted, dataset))
    if nuts:
        table, fitted = fit_run(dataset, "dualeval-2pl", "nuts", seed, folder, mode="static")
        if table is not None:
            add("anomalies.csv (2PL, NUTS)", table_score(table, key), table)
            add("PSIS-LOO p (2PL, NUTS)", loo_score(fitted, dataset))
    if svi_3pl:
        three, _ = fit_run(dataset, "dualeval-3pl", "svi", seed, folder, mode="static")
        if three is not None:
            add("anomalies.csv (3PL, SVI)", table_score(three, key), three)
    point, result = fit_run(dataset, "dualeval-2pl", "map", seed, folder, mode="static")
    if point is not None:
        add("anomalies.csv (2PL, MAP)", table_score(point, key), point)
        add("DualEval point residual (MAP)", point_residual(result.ppc.anomalies, key))
    add("empirical 1 - acc_m acc_i", empirical_baseline(dataset))
    if truth_p is not None:
        add("oracle y (1 - p_true)", dataset.static_y * (1.0 - truth_p))
    return rows


def simulated_static(scenario: str, seed: int, args, folder: Path) -> list[dict]:
    """A planted simulation: 2PL, 3PL (guessing) or widely spread discriminations."""
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.simulate import STATIC_SOURCE, simulate
    from bayes_dualeval.validation.audit import plant_static, static_key
    from bayes_dualeval.validation.contamination import true_probability

    kw = {"guess": 0.25} if scenario == "3pl" else {}
    if scenario == "wide-a":
        kw = {"log_a_sd": 0.8}
    static, _, truth = simulate(args.models, args.items, 0, seed=1000 + seed, **kw)
    static["source"] = STATIC_SOURCE  # item ids as the truth names them
    clean = Dataset.from_frames(static=static)
    key = static_key(clean)
    p_clean = true_probability(truth, key.get_level_values(0), key.get_level_values(1))
    max_p = 0.25 + args.max_p / 2 if scenario == "3pl" else args.max_p
    dataset, planted = plant_static(clean, p_clean, share=args.share, max_p=max_p, seed=seed)
    new_key = static_key(dataset)
    truth_p = true_probability(truth, new_key.get_level_values(0), new_key.get_level_values(1))
    return static_rows(
        dataset, planted, truth_p, seed, folder, svi_3pl=scenario == "3pl", nuts=args.nuts
    )


def helm_static(seed: int, args, folder: Path, cache: dict, max_p: float) -> list[dict] | None:
    """Planted faults in the real HELM AIR-Bench static labels (None when absent)."""
    from bayes_dualeval.data.load import load
    from bayes_dualeval.validation.audit import plant_static, static_key

    if not HELM.is_file():
        return None
    if "clean" not in cache:
        clean = load([str(HELM)])
        with tempfile.TemporaryDirectory() as tmp:
            _, result = fit_run(clean, "dualeval-2pl", "map", 0, Path(tmp), mode="static")
        table = result.ppc.anomalies
        row = table.set_index(["model", "item"]).reindex(static_key(clean))
        cache["clean"] = (clean, row["expected"].to_numpy(dtype=np.float64))
    clean, p_ref = cache["clean"]
    dataset, planted = plant_static(clean, p_ref, share=args.share, max_p=max_p, seed=seed)
    return static_rows(dataset, planted, None, seed, folder, nuts=args.nuts)


def arena_rows(seed: int, folder: Path, real: bool = False) -> list[dict] | None:
    """DualEval's arena protocol (simulated prompts, or MT-Bench), pairs and reward fits."""
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.data.load import load
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.validation.audit import (
        arena_key,
        plant_arena,
        ranking_metrics,
        table_score,
        twoway_residual,
    )

    if real and not MTBENCH.is_file():
        return None
    if real:
        clean = load([str(MTBENCH)])
    else:
        _, arena, _ = simulate(20, 0, 100, reward_noise=1.0, seed=2000 + seed)
        clean = Dataset.from_frames(arena=arena)
    dataset, planted = plant_arena(clean, share=0.03, shift=2.0, seed=seed)
    key = arena_key(dataset)
    rows = []
    for spec, label in (("dualeval-2pl", "pairs"), ("dualeval-reward", "reward")):
        table, _ = fit_run(dataset, spec, "map", seed, folder)
        if table is None:
            continue
        row = {"method": f"anomalies.csv ({label}, MAP)"}
        row.update(ranking_metrics(table_score(table, key), planted))
        row["q_planted"], row["q_clean"], row["clean_p05"] = flagged(table, key, planted)
        rows.append(row)
    baseline = ranking_metrics(twoway_residual(dataset), planted)
    rows.append({"method": "two-way residual of z", **baseline})
    return rows


def summarise(frame: pd.DataFrame) -> str:
    """One Markdown table: per method the mean (min-max) of each metric over seeds."""
    lines = [
        "| method | seeds | AUROC | AUPRC | precision@k | q<0.05 planted / clean "
        "| clean p<=0.05 |",
        "|---|---|---|---|---|---|---|",
    ]
    for method, group in frame.groupby("method", sort=False):
        cells = []
        for m in METRICS:
            v = group[m].to_numpy(dtype=np.float64)
            cells.append(f"{v.mean():.3f} ({v.min():.3f}-{v.max():.3f})")
        if "q_planted" in group and group["q_planted"].notna().all():
            q = f"{group['q_planted'].sum():.0f} / {group['q_clean'].sum():.0f}"
            share = f"{group['clean_p05'].mean():.4f}"
        else:
            q = share = "-"
        cells = [str(len(group)), *cells]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {q} | {share} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0, 1, ...)")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--share", type=float, default=0.02)
    parser.add_argument("--max-p", type=float, default=0.2)
    parser.add_argument(
        "--nuts", action="store_true", help="also fit NUTS (static scenarios; slower)"
    )
    args = parser.parse_args(argv)

    from bayes_dualeval.inference.device import configure

    configure("cpu", 4, compile_cache=False)  # NUTS chains in parallel, as the CLI runs them
    warnings.simplefilter("ignore")
    cache: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for scenario in args.scenarios:
            rows = []
            start = time.perf_counter()
            for seed in range(args.seeds):
                if scenario in ("arena", "mtbench"):
                    got = arena_rows(seed, folder, real=scenario == "mtbench")
                elif scenario.startswith("helm"):
                    max_p = args.max_p if scenario == "helm" else 1.01
                    got = helm_static(seed, args, folder, cache, max_p)
                else:
                    got = simulated_static(scenario, seed, args, folder)
                if got is None:
                    print(f"\n## {scenario}: skipped (its data file is absent)")
                    break
                rows += [{"seed": seed, **r} for r in got]
            if not rows:
                continue
            secs = time.perf_counter() - start
            print(f"\n## {scenario} ({args.seeds} seeds, {secs:.0f} s)\n", flush=True)
            print(summarise(pd.DataFrame(rows)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
