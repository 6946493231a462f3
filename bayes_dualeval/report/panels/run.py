"""Panel of the run's details: specification, data, pairs, timings, versions."""

from __future__ import annotations

import numpy as np

from bayes_dualeval import __version__
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup

#: Packages whose versions the run details list.
VERSIONS = ("bayes_dualeval", "python", "jax", "numpyro", "arviz")


def held_out_text(held: dict) -> str:
    """The held-out scores (``diagnostics["holdout"]``) in words."""
    parts = [f"{held['share']:.0%} of the cells left out of the fit (split seed {held['seed']})"]
    if "static" in held:
        s = held["static"]
        parts.append(
            f"{s['cells']:,} static labels: log score {s['log_score']:.3f} (a coin: -0.693), "
            f"Brier {s['brier']:.3f}, AUC {s['auc']:.3f}"
        )
    if "arena" in held:
        a = held["arena"]
        parts.append(
            f"{a['cells']:,} arena rewards in {a['pairs']:,} pairs: log score "
            f"{a['log_score']:.3f}, AUC {a['auc']:.3f}"
        )
    return "; ".join(parts)


def features_text(report: dict, posterior) -> str:
    """The item features of the run and how much of the difficulty they explain."""
    from bayes_dualeval.data.features import describe

    text = f"{report['file']}: {describe(report)}"
    if "tau_beta_b" in posterior and posterior.sizes.get("draw", 0) > 1:
        tau = posterior["tau_beta_b"].values.ravel()
        lo, hi = np.quantile(tau, [0.05, 0.95])
        text += (
            f"; they explain a standard deviation of {tau.mean():.2f} [{lo:.2f}, {hi:.2f}] "
            "(90%) of the difficulties"
        )
    return text


def run_details(doc: Markup, ctx: ReportContext) -> None:
    """What was fitted, to what, how long it took and with which packages."""
    d = ctx.diagnostics
    cfg = ctx.result.config.to_dict()
    description = cfg.pop("description", "")
    data = d.get("data", {})
    facts = {
        "specification": f"{cfg.pop('name', '?')}: {description}",
        "options": ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in cfg.items()
        ),
        "data": (
            f"{data.get('models', '?')} models, {data.get('static_items', 0)} static "
            f"items ({data.get('static_labels', 0)} labels), {data.get('arena_items', 0)}"
            f" arena prompts ({data.get('arena_rewards', 0)} rewards), rewards "
            f"normalised per {data.get('reward_norm', '?')}"
        ),
    }
    if d.get("pairs"):
        p = d["pairs"]
        facts["arena pairs"] = (
            f"{p.get('pairs_total')} in all, {p.get('pairs_decisive')} "
            f"decisive, {p.get('pairs_both_bad')} both-bad, "
            f"{p.get('pairs_tie')} ties"
        )
    if d.get("holdout"):
        facts["held-out cells"] = held_out_text(d["holdout"])
    if d.get("features"):
        facts["item features"] = features_text(d["features"], ctx.result.idata.posterior)
    if d.get("timings"):
        t = d["timings"]
        cache = ("compile_cache", "cache_hits", "cache_misses")
        facts["timings (s)"] = ", ".join(f"{k} {v}" for k, v in t.items() if k not in cache)
        if "compile_cache" in t:
            facts["compile cache"] = (
                f"{t['compile_cache']} ({t.get('cache_hits', 0)} programs read, "
                f"{t.get('cache_misses', 0)} compiled)"
            )
    if d.get("versions"):
        v = d["versions"]
        facts["versions"] = ", ".join(f"{k} {v[k]}" for k in VERSIONS if k in v)
    facts["report"] = f"bayes_dualeval {__version__}"
    doc.facts(facts)
