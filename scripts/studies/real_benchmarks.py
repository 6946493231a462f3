"""benchmarks.csv, item fit, model fit and Q3 on the shared real data (MAP fits).

Fits the default 2PL to the static labels of each data set under ``../shared/data/real``
(BigCodeBench, ChemBench, HELM AIR-Bench's static file) by MAP, one run each (their models
differ), and prints ``benchmarks.csv``, the questions with ``fit_q < 0.05``, the models
named by the model fit and the clusters of ``dependence.csv``. Data sets that are absent
are skipped.

Usage::

    python scripts/studies/real_benchmarks.py [--root ../shared/data/real] [--sampler map]

``--q3-items`` (default 3000) raises the limit of questions per benchmark that Q3 checks
(2,000 in a run), so that ChemBench is checked too.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

DATA = {
    "bigcodebench": "bigcodebench/bigcodebench.csv",
    "chembench": "chembench/static.jsonl",
    "helm_airbench": "helm_airbench/static.jsonl",
}


def one(name: str, path: Path, sampler: str) -> None:
    from bayes_dualeval.core.errors import DataWarning
    from bayes_dualeval.data.load import load
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs import output
    from bayes_dualeval.runs.fit import fit

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load(path)
        config = load_spec("dualeval-2pl").replace(mode="static")
        result = fit(ds, config, SamplerSettings(sampler=sampler, seed=0, progress=False))
    fitted = time.perf_counter() - start
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        output.tabulate(result, ci=0.95)
    tables = result.tables
    took = time.perf_counter() - start - fitted
    print(f"\n## {name}: {ds.n_models} models x {ds.n_items} items, {sampler} "
          f"(fit {fitted:.0f} s, tables {took:.0f} s)")  # fmt: skip
    bench = tables["benchmarks"]
    print(bench.drop(columns=["verdict", "ci"]).to_string(index=False, float_format="%.3g"))
    for source, verdict in zip(bench["source"], bench["verdict"], strict=True):
        print(f"  {source}: {verdict}")
    items = tables["items"]
    static = items[items["kind"] == "static"]
    print(
        f"items: fit_q < 0.05: {int((static['fit_q'] < 0.05).sum())} of {len(static)}; "
        f"median infit {static['infit_mean'].median():.3f}, outfit "
        f"{static['outfit_mean'].median():.3f}; fit_ppp < 0.05: "
        f"{int((static['fit_ppp'] < 0.05).sum())}"
    )
    board = tables["leaderboard"]
    worst = board.sort_values("fit_p").head(5)[["rank", "model", "infit", "outfit", "fit_p"]]
    print("models with the smallest fit_p:")
    print(worst.to_string(index=False, float_format="%.3g"))
    print(f"clean? fit_p < 0.01: {int((board['fit_p'] < 0.01).sum())} of {len(board)}")
    for w in caught:
        if issubclass(w.category, DataWarning):
            print(f"warning: {str(w.message)[:400]}")
    dep = tables["dependence"]
    from bayes_dualeval.checks.dependence import clusters

    found = clusters(dep)
    print(f"Q3 clusters: {len(found)}; skipped: {dep.attrs.get('skipped')}")
    for cluster, members in list(found.items())[:10]:
        print(f"  {cluster}: {len(members)} questions: {', '.join(members[:8])}")
    sys.stdout.flush()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="../shared/data/real")
    parser.add_argument("--sampler", default="map", choices=("map", "svi"))
    parser.add_argument("--only", nargs="*", choices=list(DATA))
    parser.add_argument("--q3-items", type=int, default=3000)
    args = parser.parse_args(argv)
    from bayes_dualeval.checks import dependence

    dependence.MAX_ITEMS = args.q3_items  # ChemBench's 2,854 questions are above the default
    pd.set_option("display.width", 220)
    for name, rel in DATA.items():
        if args.only and name not in args.only:
            continue
        path = Path(args.root) / rel
        if not path.exists():
            print(f"\n## {name}: {path} not found, skipped")
            continue
        one(name, path, args.sampler)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
