"""The report's header: title, what was fitted, and the banners to read first."""

from __future__ import annotations

from bayes_dualeval.core.fields import setting
from bayes_dualeval.inference.settings import batches_read
from bayes_dualeval.report.context import ReportContext, model_name
from bayes_dualeval.report.markup import Markup

TITLE = "Bayesian DualEval report"


def header(doc: Markup, ctx: ReportContext, sections: dict) -> None:
    """Title, a line of facts, the table of contents (``sections``) and the banners."""
    d = ctx.diagnostics
    cfg = ctx.result.config
    facts = [
        f"run {ctx.run_name}",
        f"created {d.get('created', '?')}",
        f"model {model_name(cfg)}",
        f"sampler {ctx.sampler}"
        + (f" ({ctx.n_chain} chains x {ctx.n_draw} draws)" if ctx.sampler == "nuts" else ""),
        f"{len(ctx.models)} models, {ctx.dataset.n_items} items",
        "point estimates" if ctx.point else f"intervals at {ctx.ci:.0%}",
    ]
    doc.title(TITLE, " \u00b7 ".join(facts), sections)
    conv = d.get("convergence", {})
    if conv.get("converged") is False:
        doc.banner(
            "error",
            "Convergence failed: the posterior summaries below may be wrong.",
            list(conv.get("problems", [])) or ["the convergence checks failed"],
        )
    if ctx.sampler == "map" or ctx.point:
        doc.banner(
            "info",
            "MAP point estimate: one value per parameter, no posterior uncertainty.",
            [
                "intervals, rank ranges, tiers, rank probabilities, posterior-predictive "
                "intervals and convergence diagnostics need posterior draws and are skipped",
                f"refit with {setting('sampler', 'nuts')} for the full posterior",
            ],
        )
    elif ctx.sampler == "svi":
        lines = [
            "intervals come from a variational approximation and are often too narrow: on "
            "simulated panels of 56 to 1,000 models the 90% ability intervals covered 23-93% "
            "of the true abilities (86-98% once the scale the guide shrinks is matched), so "
            "the ranking is closer to honest than the abilities' values (docs/validation.md, "
            "section 10)",
            "sampling diagnostics (R-hat, ESS, divergences) are unavailable for SVI",
        ]
        batches = batches_read(d.get("sampler_info", {}))
        if batches:
            lines.append(
                f"each step read a random batch of {' and of '.join(batches)} (weighted to "
                f"an unbiased estimate of the whole; {setting('subsample', 'none')} reads all)"
            )
        if d.get("sampler_info", {}).get("converged") is False:
            lines.insert(
                0,
                "the optimisation did not settle within its step limit "
                f"(raise {setting('svi_steps')} or use {setting('sampler', 'nuts')})",
            )
        doc.banner("warn", "SVI: approximate posterior.", lines)
    skipped = d.get("data", {}).get("skipped")
    if skipped:
        detail = ", ".join(f"{n} {why}" for why, n in skipped.items())
        doc.banner("warn", "Rows were skipped while loading the data.", [detail])
