"""How hard NUTS works on data scored by several judges: step size and steps per draw.

One small joint simulation (8 models x 40 questions + 30 prompts by default) scored by
``--judges`` judges with a self-preference, fitted with NUTS (``--chains`` chains of
``--warmup`` + ``--draws``, no extension rounds) once per ``--variants`` entry, each a
specification override (``arena_level=none``...) or ``default``. Each line prints the
adapted step size, the mean leapfrog steps per draw, the share of draws that hit the tree
depth, the divergences and the smallest bulk and tail ESS over every site. The step
counts are the measure: they do not depend on the machine's load, the seconds do.

Usage::

    python scripts/benchmarks/facet_geometry.py --judges 1 3 --seeds 3
    python scripts/benchmarks/facet_geometry.py --variants default arena_level=none
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings


def probe(judges: int, seed: int, variant: str, args) -> dict:
    """Fit one variant on one simulation and return its sampler figures."""
    import numpy as np

    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import ModelConfig
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.runs.fit import fit

    static, arena, _ = simulate(
        args.models, args.questions, args.prompts, judges=judges,
        self_preference=args.self if judges > 1 else 0.0, seed=seed,
    )  # fmt: skip
    static["source"], arena["source"] = "bench", "arena"
    overrides = {}
    if variant != "default":
        key, value = variant.split("=", 1)
        overrides[key] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = Dataset.from_frames(static=static, arena=arena)
        config = ModelConfig(**overrides)
        settings = SamplerSettings(
            chains=args.chains, warmup=args.warmup, draws=args.draws, seed=seed, extend=0
        )
        start = time.perf_counter()
        result = fit(data, config, settings)
    stats = result.idata.sample_stats
    steps = np.asarray(stats["n_steps"])
    depth = np.asarray(stats["tree_depth"])
    conv = result.convergence
    return {
        "judges": judges,
        "seed": seed,
        "variant": variant,
        "step_size": round(float(np.asarray(stats["step_size"])[:, -1].mean()), 4),
        "steps_per_draw": round(float(steps.mean()), 1),
        "depth_hit": round(float((depth >= settings.max_tree_depth).mean()), 3),
        "divergences": int(np.asarray(stats["diverging"]).sum()),
        "min_ess": round(float(min(conv.min_ess_bulk, conv.min_ess_tail)), 1),
        "max_rhat": round(float(conv.max_rhat), 4),
        "seconds": round(time.perf_counter() - start, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judges", type=int, nargs="+", default=[3])
    parser.add_argument("--seeds", type=int, nargs="+", default=[3])
    parser.add_argument("--variants", nargs="+", default=["default"])
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--prompts", type=int, default=30)
    parser.add_argument("--self", type=float, default=0.8)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpyro

    numpyro.set_host_device_count(args.chains)
    for seed in args.seeds:
        for judges in args.judges:
            for variant in args.variants:
                print(json.dumps(probe(judges, seed, variant, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
