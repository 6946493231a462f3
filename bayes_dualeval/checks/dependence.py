r"""Local dependence: Yen's Q3 over the question pairs of each benchmark.

The model treats a model's answers to two questions as independent given its ability.
Questions that share a stem, a template or a multi-turn context answer together, which the
model reads as more evidence than there is. Yen's (1984) Q3 is the correlation, across
models, of two questions' residuals :math:`d_{iq} = k_{iq} / n_{iq} - \bar p_{iq}`
(:math:`\bar p` the posterior mean success probability; pairwise complete where cells are
missing). Q3 has a negative bias of about :math:`-1/(Q - 1)` from the abilities being
estimated from the same answers, so each pair is read relative to its benchmark:
:math:`Q_3^* = Q_3 - \overline{Q_3}` (Christensen, Makransky and Horton 2017).

Whether a pair's :math:`Q_3^*` is large depends on the number of models and on the two
questions' difficulties (two hard questions passed by the same few strong models
correlate strongly under the model). The reference is therefore the model's own:
:data:`REPLICATES` label sets drawn from :math:`\bar p` give each pair's mean and sd of
:math:`Q_3^*` under independence, and ``z`` the observed value's distance from them,
divided by the robust sd (1.4826 times the median absolute deviation) of the observed
``z`` of the benchmark's pairs where it exceeds 1: most pairs are independent, but the
fitted parameters' own error correlates residuals, which spreads the observed values
wider than the replicates' (an empirical null, as in Efron 2004).

One pair among the :math:`Q (Q - 1) / 2` of a benchmark has little power (with 40 models a
planted testlet's pairs reach ``z`` of 2 to 4, as do the largest of 20,000 independent
pairs), but a testlet's pairs are all large together. A scan finds them: every question is
grown greedily into a set of :data:`SCAN_SIZE` questions (each step adds the question with
the largest ``z`` summed over the set), scored by the sum of ``z`` over the set's pairs.
The reference of the largest score is the same scan on each replicated label set; a set is
flagged when fewer than :data:`DEPENDENCE_ALPHA` of the replicates' largest scores reach
its score (a family-wise level over the benchmark's questions). Flagged sets sharing a
question form a cluster, pruned of questions that correlate with only a few of its members
(:func:`_components`), and a :class:`~bayes_dualeval.core.errors.DataWarning` names each
cluster's questions.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from bayes_dualeval.checks.budget import CHUNK_ELEMENTS, STORE_ELEMENTS
from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.passes import Checks
from bayes_dualeval.core.errors import DataWarning

#: Label sets replicated from the posterior mean probabilities for the reference of Q3.
REPLICATES = 100
#: A scan set is flagged when the share of replicates whose largest scan score reaches
#: its score is below this (a family-wise level over the benchmark's questions).
DEPENDENCE_ALPHA = 0.01
#: A cluster keeps a question while its mean z to the other members is at least this share
#: of the members' median.
MEMBER_SHARE = 0.5
#: Questions in each set of the scan.
SCAN_SIZE = 4
#: Benchmarks with more questions (with signal) than this are not checked (the pairs grow
#: as the square).
MAX_ITEMS = 2000
#: Fewest models answering both questions of a pair.
MIN_MODELS = 10
#: Most clusters a warning names (the rest are counted).
NAMED_CLUSTERS = 5
#: Questions of a cluster named in the warning (the rest are counted).
NAMED_ITEMS = 5
#: Rows of ``dependence.csv``: every flagged pair and at most this many others, strongest
#: first.
TOP_PAIRS = 100

COLUMNS = ["source", "item_1", "item_2", "q3", "q3_star", "z", "models", "flagged",
           "cluster", "cluster_p"]  # fmt: skip


def q3_matrix(resid: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise-complete correlations of the columns of ``resid`` (M, Q) where ``mask``.

    Returns the (Q, Q) correlations (NaN where undefined) and the models behind each.
    """
    w = mask.astype(np.float64)
    x = np.where(mask, resid, 0.0)
    count = w.T @ w
    if mask.all():
        z = x - x.mean(axis=0)
        norm = np.sqrt((z * z).sum(axis=0))
        with np.errstate(invalid="ignore", divide="ignore"):
            return (np.ascontiguousarray(z.T) @ z) / np.outer(norm, norm), count
    sx = x.T @ w  # sum of column q's residuals over the models that answered r
    sxx = (x * x).T @ w
    sxy = x.T @ x
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = count * sxy - sx * sx.T
        var = (count * sxx - sx * sx) * (count * sxx - sx * sx).T
        return cov / np.sqrt(var), count


def _centred(q3: np.ndarray) -> np.ndarray:
    """Q3 minus its mean over the benchmark's pairs, with a zero diagonal (Q, Q)."""
    out = q3 - np.nanmean(q3[np.triu_indices(len(q3), 1)])
    np.fill_diagonal(out, 0.0)
    return np.nan_to_num(out)


def _batch_q3(resid: np.ndarray) -> np.ndarray:
    """Centred Q3 matrices of fully observed residuals (R, M, Q), one matrix product."""
    z = resid - resid.mean(axis=1, keepdims=True)
    norm = np.sqrt((z * z).sum(axis=1))  # (R, Q)
    with np.errstate(invalid="ignore", divide="ignore"):
        # a contiguous transpose: NumPy's batched product is ten times slower on a view
        zt = np.ascontiguousarray(z.transpose(0, 2, 1))
        q3 = np.matmul(zt, z) / (norm[:, :, None] * norm[:, None, :])
    q3 = np.nan_to_num(q3)
    n = q3.shape[1]
    diagonal = np.einsum("rqq->r", q3)
    mean = (q3.sum(axis=(1, 2)) - diagonal) / max(n * (n - 1), 1)
    q3 -= mean[:, None, None]
    q3[:, np.arange(n), np.arange(n)] = 0.0
    return q3


def _replicates(rng_state, resid_shape, mask, expected, answers):
    """The :data:`REPLICATES` centred Q3 matrices of labels drawn from ``expected``.

    Drawn in batches of at most :data:`~bayes_dualeval.checks.budget.CHUNK_ELEMENTS`
    numbers (one batched matrix product each when every cell is observed), the same for a
    given seed however they are used.
    """
    rng = np.random.default_rng(rng_state)
    n = answers.astype(np.int64)
    share = np.divide(1.0, answers, out=np.zeros(resid_shape), where=mask)
    n_items = resid_shape[1]
    step = max(1, CHUNK_ELEMENTS // max(n_items * max(n_items, resid_shape[0]), 1))
    for start in range(0, REPLICATES, step):
        size = min(step, REPLICATES - start)
        k_rep = rng.binomial(n, expected, size=(size, *n.shape))
        resid = k_rep * share - expected
        if mask.all():
            yield from _batch_q3(resid)
        else:
            for one in resid:
                yield _centred(q3_matrix(one, mask)[0])


def scan(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each question grown greedily into a set of :data:`SCAN_SIZE` correlated questions.

    From every question at once: add the question whose ``z`` summed over the set's
    members is largest, until the set has :data:`SCAN_SIZE` members. Returns the (Q,
    SCAN_SIZE) sets (the seed first) and the sum of ``z`` over the pairs within each set.
    """
    n = len(z)
    size = min(SCAN_SIZE, n)
    sets = np.zeros((n, size), dtype=np.int64)
    sets[:, 0] = np.arange(n)
    link = z.copy()  # each question's summed z to the members so far
    taken = np.eye(n, dtype=bool)
    score = np.zeros(n)
    rows = np.arange(n)
    for step in range(1, size):
        gain = np.where(taken, -np.inf, link)
        best = gain.argmax(axis=1)
        score += gain[rows, best]
        sets[:, step] = best
        taken[rows, best] = True
        link += z[best]
    return sets, score


def source_pairs(
    resid: np.ndarray, mask: np.ndarray, expected: np.ndarray, answers: np.ndarray, seed
) -> tuple[pd.DataFrame, np.ndarray, pd.Series]:
    """Every question pair of one benchmark, and its flagged clusters (see the module).

    Parameters
    ----------
    resid, mask, expected, answers : numpy.ndarray, shape (M, Q)
        Residual share, whether the cell exists, posterior mean success probability and
        the number of answers of each model x question cell.
    seed : int or sequence of int
        Seed of the replicated label sets (drawn twice: for the pairs' reference, then
        for the scan's).

    Returns
    -------
    pairs : pandas.DataFrame
        Columns ``first, second, q3, q3_star, z, models`` (question indices), every pair.
    label : numpy.ndarray of int, shape (Q,)
        Each question's cluster (-1: none), see :func:`_components`.
    p_min : pandas.Series
        Each cluster's scan p-value (the smallest of its flagged sets).
    """
    n_items = resid.shape[1]
    q3, count = q3_matrix(resid, mask)
    star = _centred(q3)
    total = np.zeros_like(star)
    square = np.zeros_like(star)
    keep = REPLICATES * n_items**2 <= STORE_ELEMENTS  # small: the scan reuses them
    stored = []
    for rep in _replicates(seed, resid.shape, mask, expected, answers):
        total += rep
        square += rep**2
        if keep:
            stored.append(rep)
    mean = total / REPLICATES
    sd = np.sqrt(np.maximum(square / REPLICATES - mean**2, 0.0))
    usable = (sd > 0) & (count >= MIN_MODELS)
    np.fill_diagonal(usable, False)

    def standard(values):
        return np.where(usable, (values - mean) / np.where(usable, sd, 1.0), 0.0)

    z = standard(star)
    # the empirical null: the observed z of a benchmark's pairs are mostly independent
    # pairs, but spread wider than the replicates' (the fitted parameters' own error
    # correlates residuals); their robust sd rescales them
    spread = 1.4826 * np.median(np.abs(z[usable] - np.median(z[usable]))) if usable.any() else 1
    z = z / max(float(spread), 1.0)
    sets, score = scan(z)
    again = stored or _replicates(seed, resid.shape, mask, expected, answers)
    null_max = np.array([scan(standard(rep))[1].max() for rep in again])
    p = (1.0 + (null_max[None, :] >= score[:, None]).sum(axis=1)) / (REPLICATES + 1.0)
    hit = p < DEPENDENCE_ALPHA
    upper = np.triu_indices(n_items, 1)
    pairs = pd.DataFrame(
        {
            "first": upper[0],
            "second": upper[1],
            "q3": q3[upper],
            "q3_star": star[upper],
            "z": np.where(usable[upper], z[upper], np.nan),
            "models": count[upper].astype(int),
        }
    )
    if hit.any():
        label, p_min = _components(sets[hit], p[hit], z)
    else:
        label, p_min = np.full(n_items, -1), pd.Series(dtype=float)
    return pairs, label, p_min


def dependence_table(
    idata, dataset, *, pairs=None, options: CheckOptions | None = None, ppc=None
) -> pd.DataFrame | None:
    """The run's ``dependence.csv``: flagged question pairs and the strongest others.

    Parameters
    ----------
    idata : arviz.InferenceData
    dataset : Dataset
    pairs : Pairs, optional
    options : CheckOptions, optional
        Its seed draws the replicated label sets.
    ppc : PPC, optional
        Checks of the same run, reused (their posterior mean probabilities).

    Returns
    -------
    pandas.DataFrame or None
        Columns :data:`COLUMNS`, strongest first (by ``p_value``, then ``q3_star``); None
        without static questions or item parameters. ``cluster`` is
        ``<source>#<k>`` for flagged pairs (the connected components of the flagged
        pairs), else empty. ``attrs["skipped"]`` lists benchmarks with more than
        :data:`MAX_ITEMS` questions.

    Warns
    -----
    DataWarning
        Naming each cluster's questions.
    """
    options = options or CheckOptions()
    previous = ppc.checks if ppc is not None else None
    checks = Checks.reuse(previous, idata, dataset, pairs, options)
    static = checks.static(replicate=False)
    if static is None or checks.fit.items["b"] is None:
        return None
    ds = checks.fit.dataset
    share = ds.static_share
    varies = np.zeros(ds.n_items, dtype=bool)
    lo = np.full(ds.n_items, np.inf)
    hi = np.full(ds.n_items, -np.inf)
    np.minimum.at(lo, ds.static_item, share)
    np.maximum.at(hi, ds.static_item, share)
    varies = hi - lo > 1e-12
    parts, skipped = [], []
    sources = np.unique(ds.item_source[ds.item_kind == "static"].astype(str))
    for k, source in enumerate(sources):
        items = np.flatnonzero((ds.item_source == source) & (ds.item_kind == "static") & varies)
        if len(items) < 2:
            continue
        if len(items) > MAX_ITEMS:
            skipped.append(source)
            continue
        col = np.full(ds.n_items, -1)
        col[items] = np.arange(len(items))
        cells = col[ds.static_item] >= 0
        flat = ds.static_model[cells] * len(items) + col[ds.static_item[cells]]
        size = ds.n_models * len(items)
        n = ds.static_n[cells].astype(np.float64)

        def dense(values, flat=flat, size=size):
            return np.bincount(flat, weights=values, minlength=size).reshape(ds.n_models, -1)

        answers = dense(n)
        with np.errstate(invalid="ignore", divide="ignore"):
            observed = dense(ds.static_y[cells].astype(np.float64)) / answers
            expected = dense(n * static.mean_p[cells]) / answers
        mask = (answers > 0) & np.isfinite(expected)  # a non-finite fit leaves its cells out
        answers = np.where(mask, answers, 0.0)
        expected = np.where(mask, expected, 0.5)
        resid = np.where(mask, observed - expected, 0.0)
        table, label, p_min = source_pairs(resid, mask, expected, answers, [options.seed, 4, k])
        table["cluster"] = ""
        table["cluster_p"] = np.nan
        _label(table, label, p_min, source)
        table.insert(0, "source", source)
        table["item_1"] = ds.items[items[table.pop("first")]]
        table["item_2"] = ds.items[items[table.pop("second")]]
        parts.append(_keep(table))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    out = out.sort_values(["flagged", "z"], ascending=False, kind="stable")[COLUMNS]
    out = out.reset_index(drop=True)
    out.attrs["skipped"] = skipped
    _warn(out)
    return out


def _components(members: np.ndarray, p: np.ndarray, z: np.ndarray) -> tuple:
    """Clusters of the flagged scan sets: connected sets, pruned to questions that belong.

    The sets joined by a shared question form a cluster. A question stays in its cluster
    while its mean ``z`` to the other members is at least :data:`MEMBER_SHARE` of the
    cluster's median such mean (the weakest is dropped first, one at a time): a question
    that correlates with a few members by chance joins a set but not the whole testlet.

    Returns each question's cluster (-1 for none) and each cluster's smallest p-value.
    """
    n_items = len(z)
    seeds = np.repeat(members[:, 0], members.shape[1] - 1)
    graph = coo_array(
        (np.ones(len(seeds)), (seeds, members[:, 1:].ravel())), shape=(n_items, n_items)
    )
    _, component = connected_components(graph, directed=False)
    inside = np.zeros(n_items, dtype=bool)
    inside[members.ravel()] = True
    label = np.where(inside, component, -1)
    for c in np.unique(label[inside]):
        group = list(np.flatnonzero(label == c))
        while len(group) > 2:
            block = z[np.ix_(group, group)]
            mean = block.sum(axis=1) / (len(group) - 1)
            weakest = int(mean.argmin())
            if mean[weakest] >= MEMBER_SHARE * np.median(mean):
                break
            label[group.pop(weakest)] = -1
    seed_label = label[members[:, 0]]
    keep = seed_label >= 0
    p_min = pd.Series(p[keep], index=seed_label[keep]).groupby(level=0).min()
    # clusters renumbered 0, 1, ... in order of their smallest question
    used = np.unique(label[label >= 0])
    renumber = np.full(max(n_items, 1), -1)
    renumber[used] = np.arange(len(used))
    out = np.where(label >= 0, renumber[np.maximum(label, 0)], -1)
    return out, pd.Series(p_min.to_numpy(), index=renumber[p_min.index.to_numpy()])


def _label(table: pd.DataFrame, label: np.ndarray, p_min: pd.Series, source: str) -> None:
    """Name the clusters in ``table``: the pairs whose questions share one."""
    first, second = table["first"].to_numpy(), table["second"].to_numpy()
    same = (label[first] >= 0) & (label[first] == label[second])
    table["flagged"] = same
    table.loc[same, "cluster"] = [f"{source}#{c + 1}" for c in label[first][same]]
    table.loc[same, "cluster_p"] = p_min.reindex(label[first][same]).to_numpy()


def _keep(table: pd.DataFrame) -> pd.DataFrame:
    """The pairs within clusters and the :data:`TOP_PAIRS` strongest others."""
    others = table[~table["flagged"]].nlargest(TOP_PAIRS, "z")
    return pd.concat([table[table["flagged"]], others])


def clusters(table: pd.DataFrame) -> dict:
    """Each cluster of ``dependence.csv`` and its questions (sorted)."""
    flagged = table[table["flagged"].astype(bool)]
    out = {}
    for name, group in flagged.groupby("cluster", sort=False):
        out[name] = sorted(set(group["item_1"]) | set(group["item_2"]))
    return out


def _named(items: list) -> str:
    """A cluster's questions for a one-line message: the first few, and how many more."""
    head = ", ".join(items[:NAMED_ITEMS])
    more = len(items) - NAMED_ITEMS
    return f"{len(items)} questions ({head}{f' and {more} more' if more > 0 else ''})"


def _warn(table: pd.DataFrame) -> None:
    found = clusters(table)
    if not found:
        return
    shown = list(found.items())[:NAMED_CLUSTERS]
    text = "; ".join(f"{name}: {_named(items)}" for name, items in shown)
    if len(found) > NAMED_CLUSTERS:
        text += f" and {len(found) - NAMED_CLUSTERS} more clusters"
    warnings.warn(
        f"locally dependent questions answer together beyond their ability (Q3): {text}; "
        "a shared stem or template counts them as more evidence than there is "
        "(dependence.csv)",
        DataWarning,
        stacklevel=3,
    )
