"""Are planted reversed keys flagged ``miskeyed`` in items.csv? Recall and precision by shape.

Each seed simulates static data (``bayes_dualeval.model.simulate``, seeds 3000+ so the tests'
seeds are not reused), reverses the key of ``--share`` of the questions (every label of the
item becomes ``1 - y``), fits the default 2PL (SVI unless ``--sampler``) and scores the
``miskeyed`` flag of :func:`bayes_dualeval.checks.item_table` against the planted items.
The old rule (``key_correlation < -0.2`` and a one-sided Fisher-z p below 0.05) is scored
on the same fits, and so is the new one on clean data (``--share 0``: false flags only).
``--guess 0.25`` simulates 3PL data (a guessing floor), which the 2PL fit does not contain;
``--irt 3pl`` fits the 3PL instead (SVI or NUTS), whose floors the per-item key check uses.

Usage::

    python scripts/studies/miskey_study.py --seeds 3 --shapes 20x300 30x200 12x300
    python scripts/studies/miskey_study.py --seeds 3 --shapes 20x300 --guess 0.25
    python scripts/studies/miskey_study.py --seeds 3 --shapes 20x300 --guess 0.25 --irt 3pl
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd


def one(shape: str, seed: int, args) -> dict:
    from bayes_dualeval.checks import CheckOptions, item_table
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.runs.fit import fit

    n_models, n_items = (int(v) for v in shape.split("x"))
    static, _, _ = simulate(n_models, n_items, 0, guess=args.guess, seed=3000 + seed)
    from bayes_dualeval.validation.audit import reverse_keys

    planted = reverse_keys(static, args.share, np.random.default_rng(3000 + seed))
    ds = Dataset.from_frames(static=static, source="bench")
    config = load_spec(f"dualeval-{args.irt}").replace(mode="static")
    result = fit(ds, config, SamplerSettings(sampler=args.sampler, seed=seed, progress=False))
    table = item_table(result.idata, result.dataset, options=CheckOptions(max_draws=200))
    truth = table["item"].str.split("::", n=1).str[1].isin(planted).to_numpy()
    new = table["flags"].str.contains("miskeyed").to_numpy()
    r = table["key_correlation"].to_numpy()
    from scipy import special

    n = table["n_models"].to_numpy(float)
    old_p = special.ndtr(np.arctanh(np.clip(r, -0.999999, 0.999999)) * np.sqrt(n - 3.0))
    old = (r < -0.2) & (old_p < 0.05)
    row = {"shape": shape, "guess": args.guess, "irt": args.irt, "seed": seed}
    row["planted"] = int(truth.sum())
    cuts = {f"q{c:g}": table["key_q"].to_numpy() < c for c in args.cuts}
    for name, flag in (("new", new), ("old", old), *cuts.items()):
        hits = int((flag & truth).sum())
        row[f"{name}_flags"] = int(flag.sum())
        row[f"{name}_recall"] = hits / max(truth.sum(), 1)
        row[f"{name}_precision"] = hits / flag.sum() if flag.sum() else np.nan
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", default=["20x300", "30x200", "12x300"])
    parser.add_argument("--share", type=float, default=0.05)
    parser.add_argument("--guess", type=float, default=0.0)
    parser.add_argument("--sampler", default="svi", choices=["nuts", "svi", "map"])
    parser.add_argument("--irt", default="2pl", choices=["1pl", "2pl", "3pl"])
    parser.add_argument(
        "--cuts",
        type=float,
        nargs="*",
        default=[0.05, 0.2],
        help="also score key_q below these cuts",
    )
    parser.add_argument("--out", help="also write the per-seed rows as CSV here")
    args = parser.parse_args(argv)
    rows = []
    for shape in args.shapes:
        for seed in range(args.seeds):
            rows.append(one(shape, seed, args))
            print(pd.DataFrame([rows[-1]]).round(3).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    names = ["new", "old", *(f"q{c:g}" for c in args.cuts)]
    stats = {"seeds": ("seed", "size"), "planted": ("planted", "sum")}
    for name in names:
        stats[f"{name}_flags"] = (f"{name}_flags", "sum")
        stats[f"{name}_recall"] = (f"{name}_recall", "mean")
        stats[f"{name}_precision"] = (f"{name}_precision", "mean")
    summary = table.groupby(["shape", "guess", "irt"], sort=False).agg(**stats)
    print()
    print(summary.round(3).to_string())
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
