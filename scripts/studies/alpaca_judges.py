"""The judge facet on real data: AlpacaEval's three judges (``../shared/data/real``).

``alpaca_eval_judges`` holds 59,025 rewards of 68 models on 805 instructions from three
judges comparing each model's output with one baseline's: ``alpaca_eval_gpt4`` (57
models), ``claude`` (16) and ``bedrock_claude`` (one model, itself: a judge that scored a
single model compares nothing, so its rows are left out here, as ``load`` would refuse
them with one line). Six models were judged by both remaining judges. Families for the
self-preference check come from the model names (``gpt``/``text_davinci`` -> openai,
``claude`` -> anthropic, else other; a stated heuristic, written to the output folder).

The script fits the judge-faceted model (``--sampler map`` by default; ``svi`` for
intervals) and reports:

* each judge's own win rates (mean reward per model) against the judge-adjusted
  leaderboard, as Spearman correlations over the judge's models;
* judges.csv (severity, discrimination, agreement) and judge_bias.csv (openai and
  anthropic families x the two judges);
* the six doubly-judged models: their win rate under each judge.

Usage::

    python scripts/studies/alpaca_judges.py --sampler map --out /tmp/alpaca-judges

Skips with a note when the shared data are absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import pandas as pd
from scipy import stats

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "real" / "alpaca_eval_judges"


def family(model: str) -> str:
    """The heuristic family of a model name (see the module)."""
    name = model.lower()
    if "gpt" in name or "davinci" in name:
        return "openai"
    if "claude" in name:
        return "anthropic"
    return "other"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sampler", default="map", choices=["map", "svi"])
    parser.add_argument("--out", type=Path, default=Path("alpaca-judges"))
    args = parser.parse_args(argv)
    source = args.data / "arena.jsonl"
    if not source.is_file():
        print(f"skipped: {source} is absent (the shared real data)", file=sys.stderr)
        return 0
    import bayes_dualeval as bd

    rows = pd.read_json(source, lines=True)
    models_per_judge = rows.groupby("judge")["model_label"].nunique()
    single = sorted(models_per_judge.index[models_per_judge == 1])
    rows = rows[~rows["judge"].isin(single)]
    args.out.mkdir(parents=True, exist_ok=True)
    folder = args.out / "data" / "alpaca_eval"
    folder.mkdir(parents=True, exist_ok=True)
    rows.to_json(folder / "arena.jsonl", orient="records", lines=True)
    families = {m: family(m) for m in rows["model_label"].unique()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = bd.load(folder, families=families)
        run = bd.fit(ds, sampler=args.sampler, mode="arena")
    run.save(args.out / "run")
    board = run.leaderboard().set_index("model")
    report = {"dropped_judges": single, "sampler": args.sampler, "per_judge": {}}
    # whether the optimiser (MAP) or the fit converged: a leaderboard from a stalled
    # optimiser is not the mode, and its agreement with the judges says little
    info = json.loads((args.out / "run" / "diagnostics.json").read_text())["sampler_info"]
    report["fit"] = {k: info.get(k) for k in ("converged", "steps", "grad_norm", "message")}
    win = rows.groupby(["judge", "model_label"])["reward"].mean()
    for judge, rates in win.groupby(level=0):
        rates = rates.droplevel(0)
        rho = stats.spearmanr(rates, board.loc[rates.index, "theta_mean"]).statistic
        report["per_judge"][judge] = {"models": len(rates), "spearman": float(rho)}
    both = rows.groupby("model_label")["judge"].nunique()
    twice = both.index[both > 1]
    report["doubly_judged"] = win.unstack(0).loc[twice].round(3).to_dict(orient="index")
    report["judges"] = pd.read_csv(args.out / "run" / "judges.csv").to_dict(orient="records")
    bias = args.out / "run" / "judge_bias.csv"
    if bias.is_file():
        report["judge_bias"] = pd.read_csv(bias).to_dict(orient="records")
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
