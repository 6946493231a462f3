"""Does MAP keep the latent scale? MAP abilities against a reference posterior.

The likelihood only fixes abilities up to a common stretch (abilities and difficulties
times ``c``, discriminations over ``c``), so a point estimate can keep the order of the
models and still squeeze them together. This script fits MAP and a reference posterior on
the same data and prints, per case:

* ``spread``: sd of the MAP abilities / sd of the reference posterior means (1 is ideal);
* ``rho``: Spearman correlation between them;
* ``spread_true``: sd of the MAP abilities / sd of the true abilities (simulations);
* MAP's median and maximum discrimination ``a``, the final gradient norm against its
  tolerance, whether MAP says it converged, and its seconds (compilation included).

Cases: ``wide`` (12 models x 20,000 steep items, log a ~ N(1, 0.8), guessing at 0.25 on
half; reference SVI, because NUTS on it takes hours), ``wide-nuts`` (the same design with
2,000 items; reference NUTS with trees up to depth 7), ``paper`` (the package simulator,
18 models x 300 static + 300 arena items) and the real sets in ``../shared/data/real``:
``mtbench`` and ``alpaca`` (arena) and ``helm-static`` (HELM AIR-Bench static labels alone,
``--mode static``; its arena file holds the same signal and is never fitted with it).

Usage::

    python scripts/benchmarks/map_scale_check.py [--only wide-nuts,paper] [--cache runs/map-check]
        [--baseline OTHER_MAP.py]

``--cache`` keeps each reference's posterior means (the slow part) for later runs;
``--baseline`` also runs ``run_map(inputs, config, settings)`` from another file (an
earlier MAP, say) on every case, for a before/after table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.load import load
from bayes_dualeval.inference.sampling import SamplerSettings, run_map
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.runs.fit import fit

ROOT = Path(__file__).resolve().parents[3] / "shared" / "data" / "real"
#: Long warm-up and deep trees: the posterior is a long ridge along the latent scale, and
#: shorter runs stop on it far from the bulk (R-hat near 2).
NUTS = {
    "sampler": "nuts",
    "chains": 2,
    "warmup": 1500,
    "draws": 1000,
    "max_tree_depth": 8,
    "extend": 0,
}
CASES = {
    "wide": {"reference": {"sampler": "svi", "draws": 500}},
    "wide-nuts": {"reference": {**NUTS, "warmup": 800, "draws": 800, "max_tree_depth": 7}},
    "paper": {"reference": NUTS},
    "mtbench": {"reference": NUTS},
    "helm-static": {"reference": NUTS},
    "alpaca": {"reference": {"sampler": "svi", "draws": 500}},
}


def wide_matrix(n_models: int, n_items: int, seed: int = 1):
    """Steep items (log a ~ N(1, 0.8)), b ~ N(0, 1), guessing at 0.25 on every other item."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b = rng.normal(size=n_items)
    a = np.exp(rng.normal(1.0, 0.8, n_items))
    guess = np.where(np.arange(n_items) % 2 == 0, 0.25, 0.0)
    p = guess + (1 - guess) / (1 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(int)
    names = [f"model-{i:02d}" for i in range(n_models)]
    frame = pd.DataFrame(
        {
            "model_label": np.repeat(names, n_items),
            "dataset": "wide",
            "sample_index": np.tile(np.arange(n_items), n_models),
            "correct": y.ravel(),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=frame, source="wide")
    return ds, dict(zip(names, theta, strict=True))


def case_data(name: str, root: Path):
    """(dataset, model config, true abilities by model or None), or None when absent."""
    config = load_spec("dualeval-2pl")
    if name == "wide":
        ds, truth = wide_matrix(12, 20_000)
        return ds, config.replace(mode="static"), truth
    if name == "wide-nuts":
        ds, truth = wide_matrix(12, 2_000)
        return ds, config.replace(mode="static"), truth
    if name == "paper":
        static, arena, truth = simulate(18, 300, 300, n_domains=3, seed=7)
        static["source"], arena["source"] = "bench", "arena"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = Dataset.from_frames(static=static, arena=arena)
        return ds, config, truth["theta"]
    paths = {
        "mtbench": (root / "mtbench", {}),
        "alpaca": (root / "alpaca_eval", {}),
        "helm-static": (root / "helm_airbench" / "static.jsonl", {"mode": "static"}),
    }
    path, options = paths[name]
    if not path.exists():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load([path])
    return ds, config.replace(**options), None


def map_fit(dataset, config, runner):
    """MAP through the same inputs as a fit; abilities in the dataset's model order."""
    dataset = DualEvalModel(config).fitted_data(dataset)
    inputs, _ = build_inputs(dataset, config)
    start = time.perf_counter()
    draws = runner(inputs, config, SamplerSettings(sampler="map"))
    seconds = time.perf_counter() - start
    return draws, seconds


def reference_means(name, dataset, config, settings, cache: Path | None):
    """Posterior means of theta under the reference sampler (cached when asked)."""
    path = cache / f"{name}.json" if cache else None
    if path is not None and path.is_file():
        saved = json.loads(path.read_text())
        if saved["settings"] == settings:
            return np.asarray(saved["theta"]), saved["note"]
    start = time.perf_counter()
    result = fit(dataset, config, SamplerSettings(**settings))
    seconds = time.perf_counter() - start
    theta = result.idata.posterior["theta"].values.reshape(-1, dataset.n_models).mean(0)
    note = f"{settings['sampler']} {seconds:.0f}s"
    if settings["sampler"] == "nuts":
        note += (
            f", R-hat {result.diagnostics['max_rhat']}, ESS {result.diagnostics['min_ess_bulk']}"
        )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"settings": settings, "theta": theta.tolist(), "note": note}
        path.write_text(json.dumps(record))
    return theta, note


def row(label, draws, seconds, ref, truth_vec):
    theta = np.asarray(draws.samples["theta"]).reshape(-1)
    a = np.asarray(draws.samples["a"]).reshape(-1) if "a" in draws.samples else np.ones(1)
    info = draws.info
    out = {
        "map": label,
        "spread": theta.std() / ref.std(),
        "rho": spearmanr(theta, ref)[0],
        "spread_true": theta.std() / truth_vec.std() if truth_vec is not None else np.nan,
        "median_a": float(np.median(a)),
        "max_a": float(a.max()),
        "grad_norm": info.get("grad_norm", np.nan),
        "grad_tol": info.get("grad_tol", np.nan),
        "converged": info.get("converged"),
        "seconds": seconds,
    }
    return out


def load_baseline(path: str):
    spec = importlib.util.spec_from_file_location("baseline_map", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.run_map


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(ROOT), help="folder of the real data sets")
    parser.add_argument("--only", default=None, help="comma-separated case names")
    parser.add_argument("--cache", default=None, help="folder for reference posterior means")
    parser.add_argument("--baseline", default=None, help="a .py file defining run_map")
    args = parser.parse_args(argv)
    wanted = args.only.split(",") if args.only else list(CASES)
    unknown = sorted(set(wanted) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {', '.join(CASES)}")
    runners = [("new", run_map)]
    if args.baseline:
        runners.append(("baseline", load_baseline(args.baseline)))
    cache = Path(args.cache) if args.cache else None
    rows = []
    for name in wanted:
        data = case_data(name, Path(args.root))
        if data is None:
            print(f"skip {name}: data absent under {args.root}", file=sys.stderr)
            continue
        dataset, config, truth = data
        ref, note = reference_means(name, dataset, config, CASES[name]["reference"], cache)
        truth_vec = np.array([truth[m] for m in dataset.models]) if truth else None
        for label, runner in runners:
            draws, seconds = map_fit(dataset, config, runner)
            rows.append(
                {"case": name, "reference": note, **row(label, draws, seconds, ref, truth_vec)}
            )
        print(pd.DataFrame(rows[-len(runners) :]).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.float_format", "{:.3g}".format):
        print("\n" + table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
