"""Panel of the sampler's diagnostics: convergence facts, R-hat and ESS, rank plots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.posterior.convergence import LIMITS
from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num, pct

#: Abilities shown in the rank plots (those with the worst R-hat).
RANK_PLOTS = 6


def diagnostics(doc: Markup, ctx: ReportContext) -> None:
    """Convergence of a NUTS run; what applies instead for MAP and SVI."""
    info = ctx.diagnostics.get("sampler_info", {})
    scalars = {k: v for k, v in info.items() if not isinstance(v, (list, dict))}
    if ctx.sampler == "map" or ctx.point:
        doc.note(
            "Not applicable: a MAP fit is an optimisation, not a sample, so R-hat, effective "
            "sample sizes, divergences and rank plots do not exist."
        )
        if scalars:
            doc.facts(scalars)
        return
    if ctx.sampler == "svi":
        doc.note(
            "Unavailable: SVI fits an approximation by optimisation, so the sampling "
            "diagnostics (R-hat, ESS, divergences, rank plots) do not apply. Whether the "
            "optimisation settled is shown below; compare with a NUTS fit to check the "
            "intervals."
        )
        doc.facts(scalars)
        if info.get("loss_trace"):
            doc.figure(
                "loss_trace",
                plots.loss_trace(info["loss_trace"]),
                "SVI loss (negative ELBO) against optimisation step.",
            )
        return
    conv = ctx.diagnostics.get("convergence", {})
    doc.facts(_nuts_facts(ctx, conv), bad=conv.get("converged") is False and "verdict")
    if conv.get("worst"):
        doc.para("Parameters that fail a check, worst first:")
        worst = pd.DataFrame(conv["worst"])
        frame = pd.DataFrame(
            {
                "parameter": worst["parameter"],
                "R-hat": [num(x, ".4f") for x in worst.get("rhat", [])],
                "bulk ESS": [num(x, ".0f") for x in worst.get("ess_bulk", [])],
            }
        )
        doc.table(frame, names=("parameter",))
    per = ctx.result.parameters
    doc.figure(
        "rhat_ess",
        plots.rhat_ess(per, rhat_max=LIMITS.rhat_max, ess_min=LIMITS.ess_min),
        f"R-hat (left) and bulk and tail effective sample size (right) of all {len(per)} "
        f"checked parameters. Every R-hat should be at most {LIMITS.rhat_max} and every ESS "
        f"at least {LIMITS.ess_min}.",
    )
    doc.figure(
        "rank_plots",
        plots.rank_plots(_worst_abilities(ctx, per)),
        "Rank plots of the abilities with the worst R-hat: all draws are ranked together and "
        "each chain's ranks are histogrammed, one row of bars per chain. Mixed chains give "
        "flat rows near their dashed lines; a chain stuck high or low leans to one side.",
    )


#: How the report words ``sampler_info.start_metric``.
START_METRIC = {
    "curvature": "the curvature at a start (large data)",
    "identity": "the identity",
}


def _nuts_facts(ctx: ReportContext, conv: dict) -> dict:
    settings = ctx.result.settings
    info = ctx.diagnostics.get("sampler_info", {})
    facts = {
        "verdict": {True: "converged", False: "NOT converged", None: "not checked"}[
            conv.get("converged")
        ],
        "max R-hat": f"{num(conv.get('max_rhat'), '.4f')} (limit {LIMITS.rhat_max})",
        "min bulk ESS": f"{num(conv.get('min_ess_bulk'), '.0f')} (minimum {LIMITS.ess_min})",
        "min tail ESS": f"{num(conv.get('min_ess_tail'), '.0f')} (minimum {LIMITS.ess_min})",
        "parameters checked": str(conv.get("n_parameters")),
        "divergent transitions": str(conv.get("divergences")),
        **_divergent_site(conv),
        "lowest E-BFMI": f"{num(conv.get('ebfmi_min'), '.2f')} (minimum {LIMITS.ebfmi_min})",
        "share at max tree depth": pct(conv.get("treedepth_hit_share")),
        "chains x draws": f"{ctx.n_chain} x {ctx.n_draw} (warm-up {settings.warmup})",
        "target acceptance": _final(info, "target_accept", settings.target_accept),
        "trajectory cap (tree depth)": _final(info, "max_tree_depth", settings.max_tree_depth),
    }
    if "start_metric" in info:
        facts["warm-up metric started from"] = START_METRIC.get(
            info["start_metric"], str(info["start_metric"])
        )
    if "sample_stats" not in ctx.idata.groups():
        return facts
    stats = ctx.idata.sample_stats
    if "diverging" in stats:
        per_chain = np.asarray(stats["diverging"].values).sum(axis=1)
        facts["divergences per chain"] = ", ".join(str(int(x)) for x in per_chain)
    if "acceptance_rate" in stats:
        facts["mean acceptance"] = num(np.asarray(stats["acceptance_rate"]).mean(), ".3f")
    if "step_size" in stats:
        facts["step size (per chain)"] = ", ".join(
            num(x, ".3g") for x in np.asarray(stats["step_size"].values)[:, -1]
        )
    return facts


def _divergent_site(conv: dict) -> dict:
    """The fact naming where the divergent draws lie, when there are any."""
    site = conv.get("divergent_site")
    if not site:
        return {}
    return {"divergent draws furthest out on": f"{site['parameter']} ({site['sd']:+.1f} sd)"}


def _worst_abilities(ctx: ReportContext, per: pd.DataFrame) -> dict:
    """Draws (chain, draw) of the :data:`RANK_PLOTS` abilities with the worst R-hat."""
    theta = np.asarray(ctx.idata.posterior["theta"].values)
    keys = [f"theta[{m}]" for m in ctx.models]
    score = per["rhat"].reindex(keys).to_numpy(float)
    if not np.isfinite(score).any():
        score = -per["ess_bulk"].reindex(keys).to_numpy(float)
    score = np.where(np.isfinite(score), score, -np.inf)
    chosen = np.argsort(-score, kind="stable")[:RANK_PLOTS]
    return {f"\u03b8 {plots.short(ctx.models[k], 30)}": theta[:, :, k] for k in chosen}


def _final(info: dict, key: str, requested) -> str:
    """The final round's setting, with the requested one when a restart raised it."""
    final = info.get(key, requested)
    if final == requested:
        return str(requested)
    return f"{final} (requested {requested}; raised by the restart after divergences)"
