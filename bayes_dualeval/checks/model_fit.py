r"""Model fit: whether each model's static labels fit the run, and below-chance models.

Per model, from the pass of :mod:`~bayes_dualeval.checks.residuals`: ``infit`` and
``outfit`` (posterior means of the mean squares) and ``fit_p``, the posterior mean of
:math:`\Phi(l_z^*)` (:func:`~bayes_dualeval.checks.person_fit.lz_star`, the statistic
``score`` reports for new models): small when the model's labels are less likely than the
run predicts at its ability, as for an inverted answer key or a broken harness, which fails
the questions every other model passes. Models whose ``fit_p`` has a Benjamini-Yekutieli
q-value below :data:`MISFIT_Q` are named in a :class:`~bayes_dualeval.core.errors.DataWarning`.

Below chance: where a benchmark's chance level is known (given per source, or the mean
guessing floor ``c`` of its questions under a 3PL/4PL fit), a model whose accuracy on it is
below chance by a one-sided binomial test (Benjamini-Yekutieli over the tested model x
benchmark pairs, :data:`MISFIT_Q`) is named too: no ability explains scoring below guessing.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_dualeval.checks.fdr import by_qvalues
from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.passes import Checks
from bayes_dualeval.checks.person_fit import MIN_FIT_ITEMS
from bayes_dualeval.core.errors import DataWarning, InputError

#: A model is named when the q-value of its ``fit_p`` (or of its below-chance test) is
#: below this.
MISFIT_Q = 0.05
#: Most models a warning names (the rest are counted).
NAMED = 10


def parse_chance(pairs) -> dict:
    """``{source: level}`` from ``SOURCE=LEVEL`` strings (the command line's form).

    Raises
    ------
    InputError
        For a string without ``=`` or a level that is not a number in (0, 1).
    """
    levels = {}
    for text in pairs or ():
        source, sep, value = str(text).rpartition("=")
        try:
            level = float(value)
        except ValueError:
            level = float("nan")
        if not sep or not source or not 0.0 < level < 1.0:
            raise InputError(f"chance: expected SOURCE=LEVEL with a level in (0, 1), got {text!r}")
        levels[source] = level
    return levels


def check_chance(chance: dict | None, dataset) -> None:
    """Raise :class:`InputError` unless ``chance`` names static sources of ``dataset``."""
    static = dataset.item_kind == "static"
    sources = set(np.asarray(dataset.item_source)[static].astype(str))
    for source, level in (chance or {}).items():
        if source not in sources:
            known = ", ".join(sorted(sources)) or "none"
            raise InputError(f"chance: no static source {source!r} (the data's: {known})")
        if not 0.0 < float(level) < 1.0:
            raise InputError(f"chance: the level of {source!r} must be in (0, 1), got {level}")


def chance_levels(fit, chance: dict | None) -> dict:
    """Each benchmark's chance level: given, else the mean posterior floor of its questions."""
    ds = fit.dataset
    check_chance(chance, ds)
    static = ds.item_kind == "static"
    levels = {source: float(level) for source, level in (chance or {}).items()}
    if fit.items.get("c") is not None:
        floor = fit.items["c"].mean(axis=0, dtype=np.float64)
        for source in set(ds.item_source[static].astype(str)) - set(levels):
            levels[source] = float(floor[static & (ds.item_source == source)].mean())
    return levels


def below_chance(fit, chance: dict | None = None) -> pd.DataFrame:
    """Model x benchmark pairs tested against the benchmark's chance level.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, source, accuracy, chance, answers, p_value, q_value, flagged``,
        one row per model and benchmark with a known chance level.
    """
    ds = fit.dataset
    levels = chance_levels(fit, chance)
    rows = []
    source_of_cell = ds.item_source[ds.static_item].astype(str)
    for source, level in sorted(levels.items()):
        cells = source_of_cell == source
        k = np.bincount(ds.static_model[cells], ds.static_y[cells], minlength=ds.n_models)
        n = np.bincount(ds.static_model[cells], ds.static_n[cells], minlength=ds.n_models)
        has = n > 0
        p = stats.binom.cdf(k[has], n[has], level)
        rows.append(
            pd.DataFrame(
                {
                    "model": ds.models[has],
                    "source": source,
                    "accuracy": k[has] / n[has],
                    "chance": level,
                    "answers": n[has].astype(int),
                    "p_value": p,
                }
            )
        )
    columns = ["model", "source", "accuracy", "chance", "answers", "p_value"]
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)
    table["q_value"] = by_qvalues(table["p_value"].to_numpy(float))
    table["flagged"] = table["q_value"] < MISFIT_Q
    return table


def model_fit_table(
    idata,
    dataset,
    *,
    pairs=None,
    options: CheckOptions | None = None,
    ppc=None,
    chance: dict | None = None,
) -> pd.DataFrame | None:
    """Per model ``infit, outfit, fit_p, fit_q, below_chance``; warns naming misfits.

    Parameters
    ----------
    idata : arviz.InferenceData
    dataset : Dataset
    pairs : Pairs, optional
    options : CheckOptions, optional
    ppc : PPC, optional
        Checks of the same run, reused.
    chance : dict of str to float, optional
        Chance level per static source (else the 3PL/4PL floor, else none).

    Returns
    -------
    pandas.DataFrame or None
        One row per model (the run's order); None without static cells. ``fit_p`` is NaN
        below :data:`~bayes_dualeval.checks.person_fit.MIN_FIT_ITEMS` cells;
        ``below_chance`` names the benchmarks (``;``-joined) on which the model scored
        below chance. ``attrs["below_chance"]`` holds :func:`below_chance`'s table.

    Warns
    -----
    DataWarning
        Naming the models whose ``fit_q`` is below :data:`MISFIT_Q` and those below chance.
    """
    previous = ppc.checks if ppc is not None else None
    checks = Checks.reuse(previous, idata, dataset, pairs, options or CheckOptions())
    res = checks.residuals()
    if res is None:
        return None
    ds = checks.fit.dataset
    cells = np.bincount(ds.static_model, minlength=ds.n_models)
    fit_p = special.ndtr(res.model_lz).mean(axis=0)
    fit_p = np.where(cells >= MIN_FIT_ITEMS, fit_p, np.nan)
    tests = below_chance(checks.fit, chance)
    flagged = tests[tests["flagged"]]
    below = flagged.groupby("model")["source"].agg(";".join)
    table = pd.DataFrame(
        {
            "model": ds.models,
            "infit": res.model_infit.mean(axis=0),
            "outfit": res.model_outfit.mean(axis=0),
            "fit_p": fit_p,
            "fit_q": by_qvalues(fit_p),
            "below_chance": below.reindex(ds.models).fillna("").to_numpy(object),
        }
    )
    table.attrs["below_chance"] = tests
    _warn(table, flagged)
    return table


def _warn(table: pd.DataFrame, flagged: pd.DataFrame) -> None:
    misfit = table[table["fit_q"] < MISFIT_Q].sort_values("fit_p")
    if len(misfit):
        shown = misfit.head(NAMED)
        names = ", ".join(f"{m} (fit_p = {p:.2g})" for m, p in zip(shown["model"],
                                                                   shown["fit_p"],
                                                                   strict=True))  # fmt: skip
        if len(misfit) > NAMED:
            names += f" and {len(misfit) - NAMED} more"
        warnings.warn(
            f"static labels that do not fit the run at the model's ability: {names}; an "
            "inverted answer key, a broken harness or another grader? (leaderboard.csv: "
            "fit_p)",
            DataWarning,
            stacklevel=3,
        )
    if len(flagged):
        shown = flagged.head(NAMED)
        names = ", ".join(
            f"{m} on {s} ({a:.0%}, chance {c:.0%})"
            for m, s, a, c in zip(shown["model"], shown["source"], shown["accuracy"],
                                  shown["chance"], strict=True)
        )  # fmt: skip
        if len(flagged) > NAMED:
            names += f" and {len(flagged) - NAMED} more"
        warnings.warn(
            f"below chance: {names}; its rank says nothing about ability "
            "(leaderboard.csv: below_chance)",
            DataWarning,
            stacklevel=3,
        )
