r"""A short form of a bank: the items that carry most of its information.

An item's information is Fisher's, integrated over where the bank's models are *and*
over the bank's posterior, not taken at point estimates:

.. math::

    \bar I_q = \frac{1}{D M} \sum_{d=1}^{D} \sum_{m=1}^{M}
        I_q(\theta_{m,d};\, \phi_{q,d}),
    \qquad
    I_q(\theta; \phi) = \frac{p'(\theta)^2}{p (1 - p)},

with :math:`p = c + (d - c)\,\sigma(a(\theta - b))` the run's link
(:func:`bayes_dualeval.model.links.bernoulli_score` gives the information in
:math:`\eta`; times :math:`a^2` it is the information in :math:`\theta`). Under 1PL and
2PL this is :math:`a^2 p (1 - p)`. An arena prompt speaks through its pairs with the
other models on it (or its reward), so its :math:`I_q` is the expected information of
those terms (:func:`bayes_dualeval.measure.information.arena_information`, the one the
adaptive tests use), averaged the same way over :data:`ARENA_DRAWS` evenly spaced draws.

:func:`compress` shares the requested number of items among the sources and, within a
source, stratifies by difficulty (see its notes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.checks.saturation import INFO_DRAWS, measurement_table
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.measure import anchors, information
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.measure.information import fisher_information

#: Largest number of floats in one chunk of (draws x models x items).
CHUNK = 4_000_000

#: Bank draws an arena prompt's information is averaged over (evenly spaced).
ARENA_DRAWS = 100

#: Columns of the table :func:`compress` returns.
COLUMNS = ("item", "source", "kind", "b_mean", "a_mean", "information")


def item_information(bank: Bank, items=None) -> np.ndarray:
    r"""Each item's Fisher information averaged over bank draws and bank models.

    Parameters
    ----------
    bank : Bank
    items : array_like of int, optional
        Bank item indices; every item when None.

    Returns
    -------
    numpy.ndarray, shape (len(items),)
        :math:`\bar I_q` of the module's formula.
    """
    items = np.arange(len(bank.items)) if items is None else np.asarray(items, dtype=int)
    arena = (bank.items["kind"].to_numpy(dtype=str) == "arena")[items]
    theta = bank.draws["theta"]
    n_draws, n_models = theta.shape
    total = np.zeros(len(items))
    static = items[~arena]
    step = max(1, CHUNK // max(n_models * len(static), 1))
    for start in range(0, n_draws if len(static) else 0, step):  # chunks of draws
        rows = np.arange(start, min(start + step, n_draws))
        par = bank.parameters(rows, static)
        col = lambda x: None if x is None else x[:, None, :]  # noqa: E731
        info = fisher_information(theta[rows][:, :, None], par["b"][:, None, :],
                                  col(par["a"]), col(par["c"]), col(par["d"]))  # fmt: skip
        total[~arena] += info.sum(axis=(0, 1)) / (n_draws * n_models)
    if arena.any():
        rows = evenly_spaced(n_draws, ARENA_DRAWS)
        table = information.prompts(bank)
        prompts = items[arena]
        info = sum(
            information.arena_information(bank, table, theta[rows, m], prompts, rows).mean(0)
            for m in range(n_models)
        )
        total[arena] = info / n_models
    return total


def _allocate(counts: np.ndarray, n_items: int) -> np.ndarray:
    """Share ``n_items`` among sources in proportion to their item counts.

    One item per source first (the largest sources when ``n_items`` is smaller than the
    number of sources), then the rest in proportion to the items each source has left,
    rounded by largest remainders.
    """
    n_sources = len(counts)
    if n_items < n_sources:
        out = np.zeros(n_sources, dtype=int)
        out[np.argsort(-counts, kind="stable")[:n_items]] = 1
        return out
    spare = counts - 1
    rest = n_items - n_sources
    share = rest * spare / max(spare.sum(), 1)
    out = np.floor(share).astype(int)
    left = rest - out.sum()
    order = np.argsort(-(share - out), kind="stable")
    out[order[:left]] += 1
    return out + 1


#: What a short form is chosen for (:func:`compress`'s ``purpose``).
PURPOSES = ("ranking", "accuracy")


def compress(
    bank: Bank, n_items: int, *, per_source: bool = False, seed: int = 0,
    purpose: str = "ranking",
) -> pd.DataFrame:  # fmt: skip
    r"""A short form of the bank: informative items (ranking) or representative ones (accuracy).

    Static questions and arena prompts are both candidates.

    Parameters
    ----------
    bank : Bank
    n_items : int
        Items to keep in all; with ``per_source``, items to keep in each source (a source
        with fewer items keeps all of them).
    per_source : bool
        Keep ``n_items`` per source instead of sharing ``n_items`` among the sources.
    seed : int
        Seed that breaks ties in information (items with equal information are ordered
        at random, reproducibly) and starts the clustering of ``purpose="accuracy"``.
    purpose : {"ranking", "accuracy"}
        ``ranking``: the most informative item of each difficulty stratum (below).
        ``accuracy``: representative items (:mod:`~bayes_dualeval.measure.anchors`),
        each standing for a cluster of items with like success profiles.

    Returns
    -------
    pandas.DataFrame
        One row per chosen item, ordered by source and difficulty: ``item, source, kind``,
        the posterior means ``b_mean`` and ``a_mean`` (1 without a discrimination), the
        ``information`` of :func:`item_information`. No weights: a score predicts the
        accuracy on every bank question from the answered ones
        (:func:`~bayes_dualeval.measure.score.accuracy_table`), and a cluster-weighted
        mean of the answers predicted it worse than that, and worse than their plain
        mean (docs/validation.md, section 14), so the package has no use for them.

    Raises
    ------
    InputError
        When ``n_items`` is below 1 or above the number of bank items (above the largest
        source's with ``per_source``), or ``purpose`` is unknown.

    Notes
    -----
    *Sharing among sources*: without ``per_source``, every source gets one item (as far as
    ``n_items`` allows: the largest sources first), and the rest is shared in proportion
    to the sources' item counts (largest remainders), so no source is left out of the
    short form and none is over-represented.

    *Within a source* the items are split into as many difficulty strata as items are to
    be chosen: equal-count bins of the posterior mean difficulty ``b_mean``. The most
    informative item of each stratum is kept. Ranking by information alone would pile the
    choice onto the difficulty region where most bank models sit (the items of largest
    :math:`\bar I_q` all have ``b`` near the bulk of the abilities), leaving the short
    form blind to models stronger or weaker than the bank's bulk; stratifying spreads the
    items over the whole difficulty range of the source, and taking the best item in each
    stratum still beats a random subset on information (each stratum's best is at least
    its average, and equal-count strata average to the source's mean).

    *Judges and graders*: where the bank's arena has judges, family biases or style
    covariates, or its static labels several graders, an item's information is that of
    the average judge or grader (the shared ``gamma``, no bias, no style, no severity):
    the choice of items does not depend on who will score them; scoring the short form
    reads each answer's judge or grader.
    """
    items = bank.items
    n_total = len(items)
    source = items["source"].to_numpy(dtype=str)
    _, source_index, counts = np.unique(source, return_inverse=True, return_counts=True)
    limit = int(counts.max()) if per_source else n_total
    if not 1 <= n_items <= limit:
        raise InputError(
            f"n_items must be between 1 and {limit} (the bank's "
            + ("largest source" if per_source else "items")
            + f"), got {n_items}"
        )
    if purpose not in PURPOSES:
        raise InputError(f"purpose must be one of {', '.join(PURPOSES)}; got {purpose!r}")
    quota = np.minimum(counts, n_items) if per_source else _allocate(counts, n_items)
    info = item_information(bank)
    b_mean = bank.draws["b"].mean(axis=0)
    a_draws = bank.draws["a"] if "a" in bank.model.item_sites else None
    a_mean = np.ones(n_total) if a_draws is None else a_draws.mean(axis=0)
    if purpose == "accuracy":
        chosen = _representative(bank, source_index, quota, seed)
    else:
        chosen = _informative(info, b_mean, source_index, quota, counts, seed)
    chosen = chosen[np.lexsort((b_mean[chosen], source_index[chosen]))]
    return pd.DataFrame(
        {
            "item": items["item"].to_numpy(dtype=str)[chosen],
            "source": source[chosen],
            "kind": items["kind"].to_numpy(dtype=str)[chosen],
            "b_mean": b_mean[chosen],
            "a_mean": a_mean[chosen],
            "information": info[chosen],
        },
        columns=list(COLUMNS),
    )


def _informative(info, b_mean, source_index, quota, counts, seed) -> np.ndarray:
    """The most informative item of each equal-count difficulty stratum of each source."""
    n_total = len(info)
    rank_b = pd.Series(b_mean).groupby(source_index).rank(method="first").to_numpy() - 1
    stratum = np.floor(rank_b * quota[source_index] / counts[source_index]).astype(int)
    tie = np.random.default_rng(seed).random(n_total)
    order = np.lexsort((tie, -info, stratum, source_index))
    key = source_index[order] * (n_total + 1) + stratum[order]
    first = np.r_[True, key[1:] != key[:-1]]
    return order[first & (quota[source_index[order]] > 0)]


def _representative(bank: Bank, source_index, quota, seed) -> np.ndarray:
    """Per source, ``quota`` representatives of its items' success profiles."""
    chosen = []
    for s, k in enumerate(quota):
        members = np.nonzero(source_index == s)[0]
        if k == 0 or not len(members):
            continue
        rows, _ = anchors.representatives(anchors.success_profiles(bank, members), k, seed)
        chosen.append(members[rows])
    return np.concatenate(chosen)


def short_form_benchmarks(bank: Bank, short: pd.DataFrame, *, ci: float = 0.95):
    """How the short form ``short`` measures, beside the whole bank: ``benchmarks.csv``.

    The run's benchmark table (:func:`~bayes_dualeval.checks.saturation.benchmark_table`:
    per source and overall, reliability, information at the top models, how many of the
    top models' adjacent pairs it separates at level ``ci``, ceiling share, verdict) of
    the short form's static questions (``form = "short"``) and of all the bank's
    (``form = "bank"``), from :data:`~bayes_dualeval.checks.saturation.INFO_DRAWS` bank
    draws. None when the short form has no static question (arena prompts have no test
    information curve here).
    """
    rows = evenly_spaced(bank.n_draws, INFO_DRAWS)
    theta, params = bank.draws["theta"][rows], bank.parameters(rows)
    chosen = pd.Index(bank.dataset.items).get_indexer(short["item"].astype(str))
    tables = {
        "short": measurement_table(theta, params, bank.dataset, ci=ci, questions=chosen),
        "bank": measurement_table(theta, params, bank.dataset, ci=ci),
    }
    if tables["short"] is None:
        return None
    parts = []
    for name, table in tables.items():
        part = table.assign(form=name)[["form", *table.columns]]
        part.attrs = {}  # the curves stay with each table (pandas cannot compare them)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)
