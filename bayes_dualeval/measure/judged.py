"""New arena responses against a bank whose arena has judges, families or style covariates.

A bank fitted with the arena's facets (:mod:`bayes_dualeval.model.facets`) scores an arena
cell ``s = gamma_k (p - 1/2) + beta_{k, f} + x . lambda_k``. Measuring a new model with it needs,
for each of the model's arena rewards, the judge who gave it (one of the bank's: a new
judge's discrimination and biases are not in the bank), its style covariates (standardised
with the bank's mapping, kept in the run) and the model's family (one of the bank's
families, or none: no bias). Pairs are formed within a prompt and a judge, as the fit forms
them (:func:`~bayes_dualeval.measure.grid.arena_pairs`).

A bank whose static labels were graded by several judges
(:mod:`bayes_dualeval.model.graders`) reads each new label's grader the same way
(:func:`static_graders`): one of the bank's graders, whose severity the label carries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.rows import STYLE_PREFIX
from bayes_dualeval.model.facets import ArenaFacets


@dataclass(frozen=True)
class ResponseFacets:
    """The facets of new models' arena cells, as indices into the bank's.

    Attributes
    ----------
    judge : numpy.ndarray of int, shape (R,)
        Each arena cell's judge (index into the bank's judges; 0 with one judge).
    family : numpy.ndarray of int, shape (K,)
        Each new model's family (index into the bank's families; their number for a model
        without one, which has no bias).
    style : numpy.ndarray of float, shape (R, C)
        The style covariates, standardised with the bank's mean and sd.
    """

    judge: np.ndarray
    family: np.ndarray
    style: np.ndarray


def align(facets: ArenaFacets, style_names, table: pd.DataFrame, models) -> ResponseFacets:
    """The :class:`ResponseFacets` of new arena cells ``table`` (one row per cell).

    Parameters
    ----------
    facets : ArenaFacets
        The bank's (:func:`~bayes_dualeval.model.facets.arena_facets` of its data).
    style_names : sequence of str
        The bank's style covariates, in its order.
    table : pandas.DataFrame
        The new arena cells: ``model`` and, where the data have them, ``judge``,
        ``family``, the style columns (``style:<name>``), ``file`` and ``line``.
    models : sequence of str
        The new models, in their index order.

    Raises
    ------
    InputError
        When a row names a judge the bank does not have, or has no judge where the bank
        has several; when a style covariate of the bank is missing or not a number.
    """
    n = len(table)
    judge = np.zeros(n, np.int64)
    if facets.n_judges > 1:
        judge = _judges_of(
            table, facets.judges, "", "the bank's arena was scored by",
            "a new judge's discrimination and biases are not in the bank",
        )  # fmt: skip
    style = np.zeros((n, len(style_names)))
    for c, name in enumerate(style_names):
        column = STYLE_PREFIX + name
        if column not in table:
            raise InputError(
                f"the bank controls for style covariate {name!r}, and the new arena rows "
                "have no such field"
            )
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise InputError(
                f"{_where(table.iloc[bad[0]])}: style covariate {name!r} is missing or not "
                "a number"
            )
        sd = facets.style_sd[c] if facets.style_sd[c] > 0 else 1.0
        style[:, c] = (values - facets.style_mean[c]) / sd
    family = np.full(len(models), facets.n_families, np.int64)
    if facets.n_families and "family" in table:
        named = table.dropna(subset=["family"]).drop_duplicates("model")
        index = pd.Index(models).get_indexer(named["model"].astype(str))
        known = pd.Index(facets.families).get_indexer(named["family"].astype(str))
        hit = (index >= 0) & (known >= 0)
        family[index[hit]] = known[hit]
    return ResponseFacets(judge=judge, family=family, style=style)


def static_graders(names, table: pd.DataFrame) -> np.ndarray:
    """Each new static cell's grader, as an index into the bank's graders ``names``.

    All 0 where the bank has one grader (``names`` of length 1), whatever the rows say.

    Raises
    ------
    InputError
        When the bank has several graders and a row names none, or one the bank lacks.
    """
    if len(names) < 2:
        return np.zeros(len(table), np.int64)
    return _judges_of(
        table, names, " on a static label", "the bank's labels were graded by",
        "a new grader's severity is not in the bank",
    )  # fmt: skip


def _judges_of(table: pd.DataFrame, names, on: str, bank_has: str, missing: str) -> np.ndarray:
    """Each row's ``judge`` as an index into the bank's ``names``; one line when one is not."""
    said = table["judge"].astype(object) if "judge" in table else pd.Series([None] * len(table))
    index = pd.Index(names).get_indexer(said.astype(str).where(said.notna(), ""))
    bad = np.flatnonzero(index < 0)
    if len(bad):
        label = said.iloc[bad[0]]
        what = "no judge" if label is None or pd.isna(label) else f"judge {label!r}"
        raise InputError(
            f"{_where(table.iloc[bad[0]])}: {what}{on}, and {bank_has} "
            f"{', '.join(map(repr, names))}: {missing} (fit it together with the bank)"
        )
    return index.astype(np.int64)


def _where(row) -> str:
    """``file:line`` of a row where the table has them, else the model's name."""
    if "file" in row and "line" in row and pd.notna(row["file"]):
        return f"{row['file']}:{row['line']}"
    return f"model {row['model']!r}"


#: The bank's facet draws the kernels read.
FACET_DRAWS = ("gamma_judge", "judge_bias", "style_coef")


def layout_rows(bank, resp, pairs, n: int, rows_d: np.ndarray, rows_c: np.ndarray) -> dict:
    """The facet arrays of a :class:`~bayes_dualeval.measure.kernels.Layout`.

    Zeros (with no covariate) where the bank or the responses have no facets.

    ``rows_d`` are the pairs of the decisive layout (K, P_max), ``rows_c`` a pair of each
    cell of the cell layout (K, R_max).
    """
    import jax.numpy as jnp  # the measurement's kernels run in JAX; reading rows does not

    k = resp.n_models
    fac = resp.facets if bank.facets is not None and n else None
    width = fac.style.shape[1] if fac is not None else 0
    i32, f32 = jnp.int32, jnp.float32
    if fac is None:
        zeros = {"pair": rows_d.shape, "cell": rows_c.shape}
        return {
            "pair_judge": jnp.zeros(zeros["pair"], i32),
            "pair_style": jnp.zeros((*zeros["pair"], 0), f32),
            "pair_other_family": jnp.zeros(zeros["pair"], i32),
            "pair_other_style": jnp.zeros((*zeros["pair"], 0), f32),
            "cell_judge": jnp.zeros(zeros["cell"], i32),
            "cell_style": jnp.zeros((*zeros["cell"], 0), f32),
            "model_family": jnp.zeros(k, i32),
            "facets": False,
        }
    judge = np.asarray(pairs.judge[:n], np.int64)
    mine = fac.style[np.asarray(pairs.row[:n])]
    other_row = np.asarray(pairs.other_row[:n])
    theirs = bank.facets.style[other_row]
    other_family = bank.facets.family[np.asarray(pairs.other[:n])]
    return {
        "pair_judge": jnp.asarray(judge[rows_d], i32),
        "pair_style": jnp.asarray(mine[rows_d].reshape(*rows_d.shape, width), f32),
        "pair_other_family": jnp.asarray(other_family[rows_d], i32),
        "pair_other_style": jnp.asarray(theirs[rows_d].reshape(*rows_d.shape, width), f32),
        "cell_judge": jnp.asarray(judge[rows_c], i32),
        "cell_style": jnp.asarray(mine[rows_c].reshape(*rows_c.shape, width), f32),
        "model_family": jnp.asarray(fac.family, i32),
        "facets": True,
    }
