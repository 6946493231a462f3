"""Judges as a facet: severity, discrimination, self-preference and style, recovered.

Issue 53's simulation targets, on shapes nobody tuned on. Each case draws a joint data set
with the package's simulator (``simulate(..., judges=K, self_preference=X,
style_effect=E)``: every arena cell scored by each of K judges, models spread over K
families, one per judge) and fits it with default NUTS through
:func:`bayes_dualeval.runs.fit.fit`, as the command line does (``--style length`` and the
rows' families). Cases (``--cases``):

* ``facets``: 6 judges (``--judges``), no self-preference, no style; Spearman of the
  judges' fitted severity (``judges.csv``: the level at the average answer, against the
  simulator's ``level``), of the model's intercept at p = 1/2 (against its ``severity``
  ``s_k`` plus half its slope ``g_k``) and of the discrimination (against its slope
  ``g_k``) with the truth, how many severity and intercept 90% intervals cover it, and
  how many of the 6 x 6 (judge, family) bias intervals exclude 0 (the null: at most 1 in
  10 should);
* ``self``: 4 judges, each preferring its own family (judge-a family-a, ...) by
  ``--self`` (1.0); how many of the own-family bias intervals are above 0, and how many
  are the largest of their judge's row?
* ``style``: 3 judges, a length effect ``--style`` (0.8) with the weakest third of models
  the most verbose; the leaderboard's Spearman with the true abilities with ``--style
  length`` and without it, and whether the coefficient's interval covers the truth
  (the effect per standard deviation of ``length``, divided by the rewards' sd: the
  scale of the z-normalised rewards, the pair logits' scale at ``gamma`` 1).

Usage::

    python scripts/studies/judge_study.py --seeds 0 1 2 --cases facets self style

About a minute per fit on two cores (the style case fits twice).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from scipy import stats


def fit_case(case: str, seed: int, args) -> dict:
    """Fit one case and return its figures."""
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import ModelConfig
    from bayes_dualeval.model.simulate import simulate
    from bayes_dualeval.posterior.facet_tables import facet_tables
    from bayes_dualeval.posterior.summaries import leaderboard
    from bayes_dualeval.runs.fit import fit

    judges = {"facets": args.judges, "self": 4, "style": 3}[case]
    static, arena, truth = simulate(
        12, args.questions, args.prompts, judges=judges,
        self_preference=args.self if case == "self" else 0.0,
        style_effect=args.style if case == "style" else 0.0, seed=1000 + seed,
    )  # fmt: skip
    static["source"], arena["source"] = "bench", "arena"
    out = {
        "case": case, "seed": seed, "likelihood": args.likelihood,
        "bb_ratio": args.bb_ratio, "tie_ratio": args.tie_ratio,
        "arena_weight": args.arena_weight,
    }  # fmt: skip
    styles = [("length",), ()] if case == "style" else [()]
    if case == "style" and args.adjusted_only:
        styles = [("length",)]
    for style in styles:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = Dataset.from_frames(static=static, arena=arena, style=style)
        start = time.perf_counter()
        settings = SamplerSettings(sampler="nuts", chains=4, seed=seed)
        config = ModelConfig(
            arena_likelihood=args.likelihood,
            bb_ratio=args.bb_ratio,
            tie_ratio=args.tie_ratio,
            arena_weight=args.arena_weight,
        )
        result = fit(ds, config, settings)
        board = leaderboard(result.idata, ds, ci=0.9)
        true = board["model"].map(truth["theta"])
        tag = "style_" if style else ("unadjusted_" if case == "style" else "")
        conv = result.convergence
        factor = result.config.arena_weight_factor
        out.update(
            {
                f"{tag}spearman": float(stats.spearmanr(board["theta_mean"], true).statistic),
                f"{tag}converged": bool(result.converged),
                f"{tag}max_rhat": float(conv.max_rhat),
                f"{tag}min_ess": float(min(conv.min_ess_bulk, conv.min_ess_tail)),
                f"{tag}divergences": int(result.diagnostics["divergences"] or 0),
                f"{tag}steps_per_draw": round(
                    float(result.idata.sample_stats["n_steps"].mean()), 1
                ),
                f"{tag}seconds": round(time.perf_counter() - start, 1),
                f"{tag}arena_factor": None if factor is None else round(float(factor), 3),
            }
        )
        tables = facet_tables(result.idata, ds, ci=0.9)
        judges_t = tables["judges"].set_index("judge")
        names = list(truth["judges"])
        if case == "facets":
            # judges.csv's severity is a judge's level at the average answer (the
            # simulator's ``level``); the model's intercept, the ``severity`` site, is the
            # level at p = 1/2 (the simulator's ``severity`` + ``slope`` / 2), both
            # centred over judges, on the z-normalised rewards' scale
            sd = float(np.std(arena["reward"]))
            post = result.idata.posterior
            intercept = np.asarray(post["severity"]).reshape(-1, len(names))
            lo_i, hi_i = np.quantile(intercept, [0.05, 0.95], axis=0)
            fitted = {
                "severity": (
                    judges_t.loc[names, "severity_mean"].to_numpy(),
                    judges_t.loc[names, "severity_lo"].to_numpy(),
                    judges_t.loc[names, "severity_hi"].to_numpy(),
                    "level",
                ),
                "intercept": (intercept.mean(axis=0), lo_i, hi_i, "half"),
            }
            for what, (got, lo, hi, key) in fitted.items():
                raw = np.array([_judge_truth(truth["judges"][j], key) for j in names])
                want = (raw - raw.mean()) / sd
                out[f"{what}_spearman"] = float(stats.spearmanr(got, want).statistic)
                out[f"{what}_covered"] = int(((lo <= want) & (want <= hi)).sum())
                out[f"{what}_detail"] = {
                    "truth": np.round(want, 3).tolist(),
                    "mean": np.round(got, 3).tolist(),
                    "lo": np.round(lo, 3).tolist(),
                    "hi": np.round(hi, 3).tolist(),
                }
            want = [truth["judges"][j]["slope"] for j in names]
            got = judges_t.loc[names, "discrimination_mean"].to_numpy()
            out["slope_spearman"] = float(stats.spearmanr(got, want).statistic)
            out["slope_pearson"] = float(np.corrcoef(got, want)[0, 1])
            out["true_slope"] = [round(truth["judges"][j]["slope"], 3) for j in names]
            out["discrimination"] = np.round(got, 3).tolist()
            out["severity_judges"] = len(names)
        if "judge_bias" in tables:
            bias = tables["judge_bias"]
            excludes = (bias["bias_lo"] > 0) | (bias["bias_hi"] < 0)
            out["bias_cells"], out["bias_excluding_0"] = len(bias), int(excludes.sum())
            out["bias_detail"] = [
                [
                    r.judge,
                    r.family,
                    round(r.bias_mean, 3),
                    round(r.bias_lo, 3),
                    round(r.bias_hi, 3),
                ]
                for r in bias.itertuples()
            ]
            if case == "self":
                # every judge prefers its own family (judge-x, family-x): each such cell's
                # interval above 0, and the largest of its judge's row?
                own = bias[bias["judge"].str[6:] == bias["family"].str[7:]]
                top = bias.loc[bias.groupby("judge")["bias_mean"].idxmax()]
                out["self_found"] = int((own["bias_lo"] > 0).sum())
                out["self_largest_in_row"] = int(
                    (top["judge"].str[6:] == top["family"].str[7:]).sum()
                )
                out["self_judges"] = int(bias["judge"].nunique())
                out["self_mean"] = float(own["bias_mean"].mean())
        if style and "style" in tables:
            coef = tables["style"]
            # the effect on the z-normalised rewards per sd of length: the pair logit's
            # scale, since a soft target's logit is the rewards' z difference
            sd_length = float(np.std(arena["length"]))
            want = args.style * sd_length / float(np.std(arena["reward"]))
            out["style_truth"] = want
            inside = (coef["coef_lo"] <= want) & (want <= coef["coef_hi"])
            out["style_covered"] = int(inside.sum())
            out["style_judges"] = len(coef)
            out["style_mean"] = float(coef["coef_mean"].mean())
    return out


def _judge_truth(judge: dict, key: str) -> float:
    """A judge's true ``level`` (at the average answer), or its level at p = 1/2."""
    from bayes_dualeval.model.arena_term import SCORE_CENTRE

    if key == "half":
        return judge["severity"] + judge["slope"] * SCORE_CENTRE
    return judge[key]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cases", nargs="+", default=["facets", "self", "style"])
    parser.add_argument("--self", type=float, default=1.0)
    parser.add_argument("--style", type=float, default=0.8)
    parser.add_argument("--questions", type=int, default=150, help="static questions")
    parser.add_argument("--prompts", type=int, default=60, help="arena prompts")
    parser.add_argument("--judges", type=int, default=6, help="judges of the facets case")
    parser.add_argument(
        "--adjusted-only", action="store_true", help="style case: skip the unadjusted fit"
    )
    parser.add_argument("--bb-ratio", type=float, default=0.15, help="both-bad pairs' quantile")
    parser.add_argument("--tie-ratio", type=float, default=0.10, help="ties' quantile")
    parser.add_argument(
        "--likelihood", default="pairs", help="the arena likelihood (pairs, pairs-full, reward)"
    )
    parser.add_argument(
        "--arena-weight", default="fixed", help="the arena pairs' weight (fixed, calibrated)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpyro

    numpyro.set_host_device_count(4)
    rows = []
    for seed in args.seeds:
        for case in args.cases:
            row = fit_case(case, seed, args)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
