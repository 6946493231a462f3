"""What a run says about itself: its effective model, typed diagnostics, and HTML.

:func:`~bayes_dualeval.report.context.model_name` (re-exported here) is the one sentence
naming the model a run fitted, as the report's header and the command line say it;
:class:`Diagnostics` is ``diagnostics.json`` as a typed, frozen object.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from bayes_dualeval.posterior.convergence import Convergence
from bayes_dualeval.report.context import model_name

__all__ = ["Diagnostics", "leaderboard_html", "model_name", "verdict"]


@dataclass(frozen=True)
class Diagnostics:
    """A run's ``diagnostics.json``, typed.

    Attributes
    ----------
    model : str
        The effective model (:func:`model_name`).
    sampler : str
        ``nuts``, ``svi`` or ``map``.
    converged : bool or None
        The verdict of the convergence rule; None where it does not apply (SVI, MAP).
    convergence : Convergence
        The figures behind the verdict (R-hat, ESS, divergences), its problems and notes.
    models, items : int
        Models and items fitted.
    timings : Mapping of str to float
        Seconds by stage (``data``, ``compile``, ``sampling``...).
    holdout : Mapping or None
        Held-out scores, with ``holdout=`` in the fit.
    raw : Mapping
        Every entry of ``diagnostics.json``, read-only.
    """

    model: str
    sampler: str
    converged: bool | None
    convergence: Convergence
    models: int
    items: int
    timings: Mapping = field(default_factory=dict)
    holdout: Mapping | None = None
    raw: Mapping = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, result) -> Diagnostics:
        """The diagnostics of a :class:`~bayes_dualeval.runs.fit.FitResult`."""
        d = result.diagnostics
        data = d.get("data", {})
        return cls(
            model=model_name(result.config),
            sampler=result.settings.sampler,
            converged=result.converged,
            convergence=result.convergence,
            models=int(data.get("models", len(result.dataset.models))),
            items=int(data.get("items", len(result.dataset.items))),
            timings=MappingProxyType(dict(d.get("timings", {}))),
            holdout=d.get("holdout"),
            raw=MappingProxyType(d),
        )


def verdict(converged: bool | None, sampler: str) -> str:
    """One line on whether the intervals can be trusted."""
    if converged is True:
        return "converged"
    if converged is False:
        return (
            "NOT CONVERGED: the chains disagree or are too short; do not publish these intervals"
        )
    if sampler == "map":
        return "point estimate (MAP): no intervals, no convergence check"
    return f"no convergence check for {sampler} (its intervals are variational)"


def leaderboard_html(board, *, title: str, ci: float, note: str, top: int = 20) -> str:
    """A small HTML table of a leaderboard: rank, model, mean and interval."""
    rows = []
    for row in board.head(top).itertuples(index=False):
        interval = (
            "" if row.theta_lo != row.theta_lo else f"[{row.theta_lo:+.2f}, {row.theta_hi:+.2f}]"
        )
        rows.append(
            f"<tr><td>{row.rank}</td><td>{html.escape(str(row.model))}</td>"
            f"<td>{row.theta_mean:+.2f}</td><td>{interval}</td></tr>"
        )
    more = f"<p>... {len(board) - top} more: run.leaderboard()</p>" if len(board) > top else ""
    return (
        f"<div><p><b>{html.escape(title)}</b><br>{html.escape(note)}</p>"
        f"<table><thead><tr><th>rank</th><th>model</th><th>&theta;</th>"
        f"<th>{ci:.0%} interval</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"{more}</div>"
    )
