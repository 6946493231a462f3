"""What the arena data identify when the reward model's leniency varies by prompt.

Simulates joint data whose arena rewards either carry the prompt's level
(``reward = 5 + 4 p + noise``) or add a per-prompt leniency offset
(``reward = c_q + 4 p + noise``, ``c_q ~ Normal(5, offset_sd)``), fits both assumptions by
name with NUTS (``dualeval-2pl``: equal leniency, the default; ``dualeval-offsets``: no
level term), and prints, per fit, convergence (over every sampled site) and recovery
against the truth: Spearman correlation of the abilities, of the arena difficulties
(centred), and the spread ratio of the arena difficulty estimates (sd of posterior means
over sd of the truth), plus the mean 90% interval width of the arena difficulties.

Usage::

    python scripts/studies/leniency_check.py
    python scripts/studies/leniency_check.py --models 18 --items 100 --offsets 0,0.5,1 --seeds 7
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def one(models: int, items: int, offset_sd: float, seed: int, spec: str) -> dict:
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.runs.fit import fit

    static, arena, truth = simulate(
        models, items, items, prompt_offset_sd=offset_sd, reward_noise=0.5, seed=seed
    )
    static["source"], arena["source"] = "bench", "arena"  # the truth's item keys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena)
    start = time.perf_counter()
    result = fit(ds, load_spec(spec), SamplerSettings(progress=False))
    seconds = time.perf_counter() - start
    post = result.idata.posterior
    theta = post["theta"].values.reshape(-1, ds.n_models)
    b = post["b"].values.reshape(-1, ds.n_items)
    true_theta = np.array([truth["theta"][m] for m in ds.models])
    arena_idx = np.flatnonzero(ds.item_kind == "arena")
    true_b = np.array([truth["items"][ds.items[q]]["b"] for q in arena_idx])
    est_b = (b[:, arena_idx] - theta.mean(axis=1, keepdims=True)).mean(axis=0)
    lo, hi = np.quantile(b[:, arena_idx], [0.05, 0.95], axis=0)
    conv = result.diagnostics["convergence"]
    return {
        "offset_sd": offset_sd,
        "spec": spec,
        "time_s": round(seconds, 1),
        "max_rhat": round(conv["max_rhat"], 4),
        "min_ess": round(min(conv["min_ess_bulk"], conv["min_ess_tail"])),
        "divergences": conv["divergences"],
        "theta_spearman": round(spearman(theta.mean(axis=0), true_theta), 3),
        "b_arena_spearman": round(spearman(est_b, true_b), 3),
        "b_arena_spread": round(float(est_b.std() / true_b.std()), 2),
        "b_arena_90_width": round(float((hi - lo).mean()), 2),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=18)
    parser.add_argument("--items", type=int, default=100, help="static questions = prompts")
    parser.add_argument("--offsets", default="0,1")
    parser.add_argument("--seeds", default="7")
    parser.add_argument("--specs", default="dualeval-2pl,dualeval-offsets")
    args = parser.parse_args(argv)

    import numpyro

    numpyro.set_host_device_count(4)
    import pandas as pd

    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for offset in (float(o) for o in args.offsets.split(",")):
            for spec in args.specs.split(","):
                row = {"seed": seed, **one(args.models, args.items, offset, seed, spec)}
                rows.append(row)
                print(pd.DataFrame([row]).to_string(index=False), flush=True)
    print()
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(str(v) for v in row.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
