"""Does the default NUTS fit pass its convergence check in its first round? Seed by seed.

A fit whose first round fails runs more rounds (more draws, or a re-tune after divergent
transitions), so over seeds the wall time of ``bayes-dualeval fit DATA --sampler nuts`` is
bimodal, and a median over three seeds is a lottery ticket. This script fits DATA once
per seed with the defaults and no extra round (``extend=0``) in one process (one
compilation) and prints a row per seed: the check's verdict, max R-hat, least bulk and
tail ESS, divergences, leapfrog steps per draw, the effective draws of ``level_c`` (the
arena level, where the bundled example's failures sit) and the worst parameters. The
summary line gives the pass rate.

``--code DIR`` puts another copy of the package first on the path (an older checkout:
``git archive REV bayes_dualeval models | tar -x -C DIR``) for a before/after
comparison, run as a separate invocation.

Usage::

    python scripts/studies/first_round.py --seeds 0-24
    python scripts/studies/first_round.py --seeds 10-24 --code /tmp/old
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def seed_list(text: str) -> list[int]:
    """``"0-4,9"`` as ``[0, 1, 2, 3, 4, 9]``."""
    seeds = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / "data"), help="data folder (bundled)")
    parser.add_argument("--seeds", default="0-9", help="seeds, e.g. 0-9 or 0,2,5")
    parser.add_argument("--model", default="dualeval-2pl")
    parser.add_argument("--code", default=None, help="another copy of the package to run")
    args = parser.parse_args(argv)
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))

    import numpy as np

    import bayes_dualeval
    from bayes_dualeval.inference import device

    device.configure(chains=4)
    from bayes_dualeval import load
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs.fit import fit

    print(f"package: {Path(bayes_dualeval.__file__).parent}", flush=True)
    dataset, config = load(args.data), load_spec(args.model)
    passed = []
    for seed in seed_list(args.seeds):
        result = fit(dataset, config, SamplerSettings(seed=seed, extend=0))
        c = result.diagnostics["convergence"]
        stats = result.idata.sample_stats
        row = {
            "seed": seed,
            "passed": bool(c["converged"]),
            "max_rhat": c["max_rhat"],
            "ess_bulk": c["min_ess_bulk"],
            "ess_tail": c["min_ess_tail"],
            "divergences": c["divergences"],
            "steps_per_draw": round(float(np.asarray(stats["n_steps"]).mean()), 1),
            "sampling_s": result.diagnostics["timings"]["sampling"],
        }
        # the fit's own per-parameter table: the ESS the convergence check read
        level = result.parameters[result.parameters.index.str.startswith("level_c")]
        if len(level):
            row["level_c_ess"] = [round(float(level[k].min())) for k in ("ess_bulk", "ess_tail")]
        row["worst"] = [w["parameter"] for w in c.get("worst") or []][:3]
        passed.append(row["passed"])
        print(json.dumps(row), flush=True)
    print(f"passed in the first round: {sum(passed)} of {len(passed)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
