"""Whether ``bayes-dualeval compare`` chooses the link that generated the data.

Each case simulates static data from one link (``bayes_dualeval.model.simulate``, seeds
5000+ so the tests' seed 3 is not reused), fits the two candidate links with NUTS
(``runs.fit.fit``, as ``bayes-dualeval fit`` runs it, with ``--chains``, ``--warmup`` and
``--draws`` here) and compares them with :func:`bayes_dualeval.posterior.loo.compare`.
Two choices are scored against the truth: rank 1 (the higher ``elpd_loo``) and the
``preferred`` run (the smallest ``p_loo`` among the runs within noise of rank 1).

Cases: ``1pl`` (every a = 1; 1PL against 2PL), ``2pl`` (log a ~ N(0, 0.8)), ``2pl-mild``
(log a ~ N(0, 0.3), the simulator's default spread: slopes that are hard to tell from one)
and ``3pl`` (a guessing floor of 0.25; 2PL against 3PL). Usage::

    python scripts/studies/compare_study.py --seeds 5
    python scripts/studies/compare_study.py --seeds 3 --cases 1pl 2pl --shape 20x200
"""

from __future__ import annotations

import argparse
import sys
import time

#: Case -> (the generating link, the simulator's settings, the two links compared).
CASES = {
    "1pl": ("1pl", {"log_a_sd": 0.0}, ("1pl", "2pl")),
    "2pl": ("2pl", {"log_a_sd": 0.8}, ("1pl", "2pl")),
    "2pl-mild": ("2pl", {"log_a_sd": 0.3}, ("1pl", "2pl")),
    "3pl": ("3pl", {"guess": 0.25}, ("2pl", "3pl")),
}


def one(case: str, shape: str, seed: int, args) -> dict:
    """Simulate one data set, fit both candidate links, compare them; one result row."""
    import warnings

    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.posterior.loo import compare
    from bayes_dualeval.runs.fit import fit

    link, truth, links = CASES[case]
    n_models, n_items = (int(v) for v in shape.split("x"))
    static, _, _ = simulate(n_models, n_items, 0, seed=5000 + seed, **truth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, source="bench")
    settings = SamplerSettings(
        sampler="nuts", chains=args.chains, warmup=args.warmup, draws=args.draws,
        seed=seed, progress=False, extend=0,
    )  # fmt: skip
    posteriors, converged = {}, {}
    for irt in links:
        config = load_spec("dualeval-2pl").replace(irt=irt, mode="static")
        result = fit(ds, config, settings)
        posteriors[irt] = result.idata
        converged[irt] = bool(result.diagnostics["convergence"].get("converged"))
    table = compare(posteriors).set_index("run")
    first = str(table.index[table["rank"] == 1][0])
    other = [r for r in links if r != first][0]
    return {
        "case": case, "shape": shape, "seed": seed, "truth": link,
        "rank1": first, "preferred": str(table.index[table["preferred"]][0]),
        "elpd_diff": float(table.loc[other, "elpd_diff"]), "dse": float(table.loc[other, "dse"]),
        f"p_loo_{links[0]}": float(table.loc[links[0], "p_loo"]),
        f"p_loo_{links[1]}": float(table.loc[links[1], "p_loo"]),
        "converged": all(converged.values()),
    }  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--shape", default=None, help="models x items (default per case)")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    args = parser.parse_args(argv)

    import pandas as pd

    from bayes_dualeval.inference.device import configure

    configure("cpu", args.chains, compile_cache=False)  # parallel chains, before JAX starts

    rows = []
    for case in args.cases:
        shape = args.shape or ("20x200" if case == "3pl" else "12x150")
        for seed in range(args.seeds):
            start = time.perf_counter()
            row = one(case, shape, seed, args)
            rows.append(row)
            print(
                f"{case:9s} {shape:7s} seed {seed}: rank 1 {row['rank1']}, preferred "
                f"{row['preferred']}, diff {row['elpd_diff']:.2f} +- {row['dse']:.2f}, "
                f"converged {row['converged']} ({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
    table = pd.DataFrame(rows)
    table["rank1_right"] = table["rank1"] == table["truth"]
    table["preferred_right"] = table["preferred"] == table["truth"]
    summary = table.groupby(["case", "shape"], sort=False).agg(
        fits=("seed", "size"),
        rank1_right=("rank1_right", "sum"),
        preferred_right=("preferred_right", "sum"),
        median_diff=("elpd_diff", "median"),
        median_dse=("dse", "median"),
        converged=("converged", "sum"),
    )
    print()
    print(summary.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
