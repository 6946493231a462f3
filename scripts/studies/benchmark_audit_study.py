"""Do planted benchmark leaks rank at the top of ``contamination.csv``? A table over seeds.

Each seed simulates static data (``--models`` models, ``--benchmarks`` benchmarks of
``--items`` questions each, 10% missing cells) and plants ``--leaks`` leaks: for a random
(model, benchmark) block, a share ``--share`` of the model's failures on that benchmark
become successes (a model that saw part of the benchmark). The data are fitted with the
package's defaults (NUTS unless ``--sampler``), and ``contamination.csv``'s ranking
(:func:`bayes_dualeval.checks.benchmark_audit.benchmark_audit`) is scored against the
planted blocks: the rank of each leak, its q-value, how many clean blocks have
``q < 0.05`` (false discoveries), and AUROC of the p-values. The baseline ranks blocks by
the excess of the block's accuracy over an additive prediction from the model's and the
benchmark's accuracies elsewhere (logit scale), without any model.

Usage::

    python scripts/studies/benchmark_audit_study.py --seeds 3
    python scripts/studies/benchmark_audit_study.py --seeds 1 --sampler svi --guess 0.25
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd
from scipy import special


def plant(static: pd.DataFrame, n_leaks: int, share: float, rng) -> list[tuple[str, str]]:
    """Turn ``share`` of the failures of random (model, benchmark) blocks into successes."""
    blocks = static[["model_label", "dataset"]].drop_duplicates().to_numpy()
    chosen = blocks[rng.choice(len(blocks), n_leaks, replace=False)]
    for m, d in chosen:
        fail = static.index[
            (static["model_label"] == m) & (static["dataset"] == d) & (static["correct"] == 0)
        ]
        flip = rng.choice(fail, int(round(share * len(fail))), replace=False)
        static.loc[flip, "correct"] = 1
    return [(m, d) for m, d in chosen]


def baseline(static: pd.DataFrame) -> pd.Series:
    """Block accuracy minus an additive logit prediction from the other blocks."""
    acc = static.groupby(["model_label", "dataset"])["correct"].agg(["sum", "count"])
    model_tot = acc.groupby(level=0).sum()
    bench_tot = acc.groupby(level=1).sum()
    total = acc.sum()
    out = {}
    for (m, d), row in acc.iterrows():
        other_m = (model_tot.loc[m] - row) + 0.5
        other_d = (bench_tot.loc[d] - row) + 0.5
        rest = (total - row) + 0.5
        lg = special.logit
        pred = special.expit(
            lg(other_m["sum"] / other_m["count"])
            + lg(other_d["sum"] / other_d["count"])
            - lg(rest["sum"] / rest["count"])
        )
        out[(m, d)] = row["sum"] / row["count"] - pred
    return pd.Series(out)


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    from scipy.stats import mannwhitneyu

    pos, neg = score[positive], score[~positive]
    return float(mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg)))


def plant_arena(arena: pd.DataFrame, n_leaks: int, share: float, shift: float, rng) -> list:
    """Raise ``share`` of the rewards of random (model, source) blocks by ``shift`` sd."""
    blocks = arena[["model_label", "source"]].drop_duplicates().to_numpy()
    chosen = blocks[rng.choice(len(blocks), n_leaks, replace=False)]
    for m, src in chosen:
        on = arena.index[(arena["model_label"] == m) & (arena["source"] == src)]
        hit = rng.choice(on, int(round(share * len(on))), replace=False)
        sd = arena.loc[arena["source"] == src, "reward"].std(ddof=0)
        arena.loc[hit, "reward"] += shift * sd
    return [(m, src) for m, src in chosen]


def baseline_arena(arena: pd.DataFrame) -> pd.Series:
    """A model's mean z on a source minus its mean z on the other sources."""
    z = arena["reward"] - arena.groupby(["source", "item_id"])["reward"].transform("mean")
    z = z / arena.groupby("source")["reward"].transform("std")
    frame = arena.assign(z=z)
    block = frame.groupby(["model_label", "source"])["z"].agg(["sum", "count"])
    model = block.groupby(level=0).sum()
    out = {}
    for (m, src), row in block.iterrows():
        rest = model.loc[m] - row
        out[(m, src)] = row["sum"] / row["count"] - rest["sum"] / max(rest["count"], 1)
    return pd.Series(out)


def one_arena(seed: int, args) -> dict:
    from bayes_dualeval.checks.benchmark_audit import benchmark_audit
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.runs.fit import fit

    rng = np.random.default_rng(5000 + seed)
    n_static = 0 if args.arena_only else args.items * args.benchmarks
    static, arena, _ = simulate(
        args.models, n_static, args.items * args.sources, n_domains=max(args.benchmarks, 1),
        missing=0.1, seed=500 + seed,
    )  # fmt: skip
    prompts = arena["item_id"].unique()
    source_of = {p: f"arena{k % args.sources}" for k, p in enumerate(prompts)}
    arena["source"] = arena["item_id"].map(source_of)
    leaks = plant_arena(arena, args.leaks, args.share, args.shift, rng)
    ds = Dataset.from_frames(static=static if n_static else None, arena=arena, source="bench")
    mode = "arena" if args.arena_only else "both"
    config = load_spec("dualeval-2pl").replace(mode=mode)
    start = time.perf_counter()
    result = fit(ds, config, SamplerSettings(sampler=args.sampler, seed=seed, progress=False))
    table = benchmark_audit(result.idata, result.dataset)
    seconds = time.perf_counter() - start
    table = table[table["kind"] == "arena"].reset_index(drop=True)
    leak = np.array(
        [(m, s) in set(leaks) for m, s in zip(table["model"], table["source"], strict=True)]
    )
    base = baseline_arena(arena)
    keys = list(zip(table["model"], table["source"], strict=True))
    base_score = base.loc[keys].to_numpy()
    base_rank = pd.Series(-base_score).rank(method="first").to_numpy()[leak]
    return {
        "seed": seed,
        "sampler": args.sampler,
        "data": "arena only" if args.arena_only else "static + arena",
        "blocks": len(table),
        "seconds": round(seconds, 1),
        "converged": result.converged,
        "leak_ranks": ",".join(map(str, np.flatnonzero(leak) + 1)),
        "leak_max_q": round(float(table.loc[leak, "q_value"].max()), 4),
        "false_discoveries": int(((table["q_value"] < 0.05) & ~leak).sum()),
        "auroc": round(auroc(-table["p_value"].to_numpy(), leak), 3),
        "baseline_ranks": ",".join(str(int(r)) for r in sorted(base_rank)),
        "baseline_auroc": round(auroc(base_score, leak), 3),
    }


def one(seed: int, args) -> dict:
    from bayes_dualeval.checks.benchmark_audit import benchmark_audit
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.runs.fit import fit

    rng = np.random.default_rng(1000 + seed)
    static, _, _ = simulate(
        args.models, args.items * args.benchmarks, 0, n_domains=args.benchmarks,
        missing=0.1, guess=args.guess, seed=seed,
    )  # fmt: skip
    leaks = plant(static, args.leaks, args.share, rng)
    ds = Dataset.from_frames(static=static, source="bench")
    irt = "3pl" if args.guess else "2pl"
    config = load_spec("dualeval-2pl").replace(mode="static", irt=irt)
    start = time.perf_counter()
    result = fit(ds, config, SamplerSettings(sampler=args.sampler, seed=seed))
    table = benchmark_audit(result.idata, result.dataset)
    seconds = time.perf_counter() - start
    table["leak"] = [
        (m, d) in set(leaks) for m, d in zip(table["model"], table["dataset"], strict=True)
    ]
    ranks = np.flatnonzero(table["leak"].to_numpy()) + 1
    base = baseline(static)
    keys = list(zip(table["model"], table["dataset"], strict=True))
    base_score = base.loc[keys].to_numpy()
    leak = table["leak"].to_numpy()
    base_rank = pd.Series(-base_score).rank(method="first").to_numpy()[leak]
    return {
        "seed": seed,
        "sampler": args.sampler,
        "blocks": len(table),
        "seconds": round(seconds, 1),
        "converged": result.converged,
        "leak_ranks": ",".join(map(str, ranks)),
        "leak_max_q": round(float(table.loc[leak, "q_value"].max()), 4),
        "false_discoveries": int(((table["q_value"] < 0.05) & ~table["leak"]).sum()),
        "auroc": round(auroc(-table["p_value"].to_numpy(), leak), 3),
        "baseline_ranks": ",".join(str(int(r)) for r in sorted(base_rank)),
        "baseline_auroc": round(auroc(base_score, leak), 3),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--benchmarks", type=int, default=3)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--leaks", type=int, default=3)
    parser.add_argument("--share", type=float, default=0.4)
    parser.add_argument("--guess", type=float, default=0.0)
    parser.add_argument("--kind", choices=["static", "arena"], default="static")
    parser.add_argument("--sources", type=int, default=4, help="arena sources (--kind arena)")
    parser.add_argument("--shift", type=float, default=2.0, help="reward sd added (arena)")
    parser.add_argument("--arena-only", action="store_true", help="no static data (arena)")
    parser.add_argument("--sampler", default="nuts", choices=["nuts", "svi", "map"])
    parser.add_argument("--out", help="also write the table as CSV here")
    args = parser.parse_args(argv)

    import numpyro

    numpyro.set_host_device_count(4)
    rows = []
    for seed in range(args.seeds):
        rows.append((one_arena if args.kind == "arena" else one)(seed, args))
        print(pd.DataFrame([rows[-1]]).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    print()
    print(table.to_string(index=False))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
