"""Arena cell tails at the Benjamini-Yekutieli level: null p-values of the pairs cells.

The arena cell check under the soft-target pairs likelihood (``checks/arena.py``) takes a
cell's tail probability from a normal approximation of its soft wins (a sum of bounded
soft targets, with a dispersion estimated per source), though the soft wins are not normal
under any generator. This study measures what matters for the cell audit: on null data
(rewards from the simulator, Gaussian or skewed noise, nothing planted), fitted by MAP with
the default pairs likelihood, how often clean arena cells reach small p-values (the share
with ``p_value <= u`` over ``u``, down to 1e-4), and how many cells per data set reach
``q_value < 0.05`` (Benjamini-Yekutieli over the data set's cells, whose first threshold
is about 0.05 / (n ln n)). With valid tails the shares are at most about ``u`` and no data
set has a flagged cell in more than 5% of the data sets.

With ``--plant S``, DualEval's protocol is planted (2.0 reward sd added to a share ``S`` of
the lowest-third cells, :func:`bayes_dualeval.validation.audit.plant_arena`) and the study
reports how many planted and clean cells reach ``q_value < 0.05``.

Usage::

    python scripts/studies/arena_tail_study.py --seeds 8 --noise gaussian
    python scripts/studies/arena_tail_study.py --seeds 8 --noise skewed
    python scripts/studies/arena_tail_study.py --seeds 4 --plant 0.03
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings

import numpy as np

LEVELS = (1e-1, 1e-2, 1e-3, 1e-4)


def null_arena(n_models: int, n_prompts: int, noise: str, seed: int):
    """Simulated arena rewards, nothing planted.

    Reward noise of sd 0.5: Gaussian, or skewed (a centred exponential).
    """
    from bayes_dualeval.model.simulate import simulate

    _, arena, _ = simulate(
        n_models, 0, n_prompts, reward_noise=0.5 if noise == "gaussian" else 0.0, seed=seed
    )
    if noise == "skewed":
        rng = np.random.default_rng(seed + 1000)
        arena["reward"] = arena["reward"] + rng.exponential(0.5, len(arena)) - 0.5
    return arena


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8, help="number of seeds (0, 1, ...)")
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--prompts", type=int, default=300)
    parser.add_argument("--noise", choices=("gaussian", "skewed"), default="gaussian")
    parser.add_argument("--plant", type=float, default=0.0, help="share of cells planted")
    args = parser.parse_args(argv)
    if args.plant:
        return planted(args)

    from bayes_dualeval.checks import anomalies
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs.fit import fit

    config = load_spec("dualeval-2pl").replace(mode="arena")
    settings = SamplerSettings(sampler="map", seed=0, progress=False)
    head = f"{'seed':>4}  {'cells':>6}  " + "  ".join(f"{f'<={u:g}':>8}" for u in LEVELS)
    print(f"noise {args.noise}; {args.models} models x {args.prompts} prompts; MAP, pairs")
    print(head + f"  {'min p':>8}  {'q<.05':>5}  {'secs':>5}")
    print("-" * (len(head) + 25))
    counts, total, flagged_sets, minima = np.zeros(len(LEVELS)), 0, 0, []
    for seed in range(args.seeds):
        start = time.perf_counter()
        arena = null_arena(args.models, args.prompts, args.noise, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = Dataset.from_frames(arena=arena)
            result = fit(ds, config, dataclasses.replace(settings, seed=seed))
            cells = anomalies(result.idata, result.dataset)
        cells = cells[cells["kind"] == "arena"]
        p = cells["p_value"].to_numpy(float)
        hits = np.array([(p <= u).sum() for u in LEVELS])
        flagged = int((cells["q_value"] < 0.05).sum())
        counts += hits
        total += len(p)
        flagged_sets += flagged > 0
        minima.append(p.min())
        shares = "  ".join(f"{h / len(p):8.2e}" for h in hits)
        secs = time.perf_counter() - start
        print(f"{seed:>4}  {len(p):>6}  {shares}  {p.min():8.1e}  {flagged:>5}  {secs:5.0f}",
              flush=True)  # fmt: skip
    print()
    print(f"pooled over {args.seeds} data sets, {total} cells:")
    for u, c in zip(LEVELS, counts, strict=True):
        print(
            f"  p <= {u:g}: {int(c)} cells, share {c / total:.2e}, share / u {c / total / u:.2f}"
        )
    print(f"  data sets with a cell at q < 0.05: {flagged_sets} of {args.seeds}; "
          f"smallest p {min(minima):.1e}")  # fmt: skip
    return 0


def planted(args) -> int:
    """Planted and clean cells reaching ``q_value < 0.05``, per seed."""
    from bayes_dualeval.checks import anomalies
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs.fit import fit
    from bayes_dualeval.validation.audit import arena_key, plant_arena

    config = load_spec("dualeval-2pl").replace(mode="arena")
    print(f"noise {args.noise}; plant {args.plant}; {args.models} x {args.prompts}; MAP, pairs")
    print("seed  planted  planted flagged  clean flagged")
    for seed in range(args.seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arena = null_arena(args.models, args.prompts, args.noise, seed)
            ds, mask = plant_arena(Dataset.from_frames(arena=arena), share=args.plant, seed=seed)
            result = fit(ds, config, SamplerSettings(sampler="map", seed=seed, progress=False))
            cells = anomalies(result.idata, result.dataset)
        cells = cells[cells["kind"] == "arena"].set_index(["model", "item"])
        q = cells["q_value"].reindex(arena_key(result.dataset)).to_numpy(float)
        hit, false = int((q[mask] < 0.05).sum()), int((q[~mask] < 0.05).sum())
        print(f"{seed:>4}  {int(mask.sum()):>7}  {hit:>15}  {false:>13}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
