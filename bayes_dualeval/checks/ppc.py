r"""Item table, posterior-predictive checks and surprising cells of a fitted run.

Three public entry points, all reading an :class:`arviz.InferenceData` from
:func:`bayes_dualeval.runs.fit.fit` (or :func:`bayes_dualeval.runs.fit.load_run`) together with the
:class:`~bayes_dualeval.data.dataset.Dataset` it was fitted to:

* :func:`item_table`: one row per item with its difficulty and discrimination, Fisher
  information, an item-fit posterior predictive p-value and flags;
* :func:`anomalies`: every model-item cell with its observed and expected value, a
  standardised residual, a posterior predictive tail probability and a Benjamini-Hochberg
  q-value, most surprising first;
* :func:`posterior_predictive`: replicated data compared with the observed data per model
  and per item, calibration tables and a summary of the model's fit.

How each quantity is defined (and the thresholds used for flags) is documented in
``docs/outputs.md``. In brief, with :math:`p_{iq} = \sigma(a_q(\theta_i - b_q))` evaluated
in every posterior draw:

* a **static cell** has expected value :math:`\bar p_{iq}` (the posterior mean) and the
  exact posterior predictive probability :math:`P(y^{rep} \ge y)` or
  :math:`P(y^{rep} \le y)`;
* an **arena cell** (pairs likelihood) counts the model's soft wins on the prompt,
  :math:`W_{iq} = \sum t` over its decisive pairs (oriented to its side), against
  :math:`\sum s` with :math:`s = \sigma(\gamma(p_{iq} - p_{jq}))` (Bradley-Terry:
  :math:`\sigma(\theta_i - \theta_j)`). Replicated wins are treated as soft outcomes with
  per-draw mean :math:`\sum s` and variance :math:`\phi \sum s(1 - s)`: :math:`\phi = 1` is
  the binomial (hard win/loss) variance, and by default :math:`\phi` is estimated from the
  arena cells (a Pearson dispersion), because soft targets scatter less than coin flips;
* an **arena cell** under the ``reward`` likelihood compares the normalised reward with
  :math:`\bar z_q + \gamma(p_{iq} - \bar p_q)` and residual standard deviation
  :math:`\sigma\sqrt{1 - 1/n_q}`.

Tail probabilities are Rao-Blackwellised: averaged over posterior draws of the exact (or
normal) conditional tail probability, so they have no Monte Carlo floor and the
Benjamini-Hochberg step-up can reach small q-values. Everything is vectorised over cells
and processed in chunks of draws (at most :data:`CHUNK_ELEMENTS` numbers per array), in
float32 where a value is evaluated per cell (or pair) and draw.

Each kind of data is visited once: one pass over the static cells gives the cell table,
the replicated labels, the item fit and the calibration; one pass over the arena pairs
gives, for every draw used, each arena cell's expected wins and their variance, from which
everything arena follows. The three public functions share these passes (``item_table``
reuses a :class:`PPC`'s through ``ppc=``). A pass uses at most ``max_draws`` posterior
draws and at most :data:`CHECK_ELEMENTS` cell or pair evaluations: for large data (say
AlpacaEval's million decisive pairs) it keeps fewer, evenly spaced draws (never fewer than
:data:`MIN_CHECK_DRAWS`), which changes p-values only within Monte Carlo noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse, special

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import DEFAULT_BB_RATIO, DEFAULT_TIE_RATIO, Pairs, distill
from bayes_dualeval.errors import InputError
from bayes_dualeval.posterior.summaries import draws_of, interval

#: Item-fit ppp below this or above one minus this flags an item ``misfit``.
MISFIT_PPP = 0.05
#: An item is ``low_discrimination`` when its upper interval bound of ``a`` (its point
#: estimate for a single draw) is below this: a one-sd ability gap then moves the success
#: log-odds by less than half a unit.
LOW_DISCRIMINATION = 0.5
#: Cells with a q-value below this count as flagged in the misfit tables and summary.
FLAG_Q = 0.05
#: At least this many replicated data sets are drawn (several per draw for short runs and
#: MAP, where the check is a plug-in check at the point estimate).
MIN_REPLICATES = 200
#: Equal-width bins of predicted probability in the calibration tables.
CALIBRATION_BINS = 10
#: Largest number of elements of one (draws x cells) array held at once.
CHUNK_ELEMENTS = 4_000_000
#: Largest number of cell (or arena pair) evaluations of one check pass over one kind of
#: data: beyond it a pass uses fewer posterior draws (evenly spaced among those selected).
#: 1e8 evaluations take a few seconds on a laptop core; at 500 draws the budget starts to
#: bite above 200,000 static cells or arena pairs (DualEval's paper scale has 35,000).
CHECK_ELEMENTS = 100_000_000
#: Largest (cells x draws) array kept by the arena pass (float32, two of them).
STORE_ELEMENTS = 25_000_000
#: Fewest posterior draws a check pass uses when the run has them (the budget's floor).
MIN_CHECK_DRAWS = 50
#: Fewest draws per chunk of the arena pass (its arrays are pairs x draws).
PAIR_CHUNK_DRAWS = 8
#: Smallest arena dispersion used (guards a degenerate estimate).
MIN_DISPERSION = 1e-3

_EPS = 1e-12


# ----------------------------------------------------------------------------- helpers
def bh_qvalues(p_values) -> np.ndarray:
    """Benjamini-Hochberg q-values (step-up adjusted p-values).

    ``q_(k) = min_{l >= k} min(1, m p_(l) / l)`` over the ``m`` non-missing p-values sorted
    ascending. Flagging ``q < alpha`` controls the false discovery rate at ``alpha`` for
    independent (or positively dependent) p-values that are uniform or conservative
    under the null.

    Parameters
    ----------
    p_values : array_like of float
        P-values; NaN entries are ignored and get a NaN q-value.

    Returns
    -------
    numpy.ndarray of float64
        q-values, same shape as ``p_values``.

    Examples
    --------
    >>> bh_qvalues([0.01, 0.04, 0.03, 0.2]).round(4).tolist()
    [0.04, 0.0533, 0.0533, 0.2]
    """
    p = np.asarray(p_values, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return q
    values = p[ok]
    order = np.argsort(values, kind="stable")
    scaled = values[order] * m / np.arange(1, m + 1)
    scaled = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(scaled, 1.0)
    q[ok] = adjusted
    return q


def _sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Logistic function in the dtype of ``x`` (float32 in the checks: SIMD ``exp``)."""
    with np.errstate(over="ignore"):
        out = np.exp(np.negative(x, out=out), out=out)
    out += 1.0
    return np.reciprocal(out, out=out)


def _group_matrix(groups: np.ndarray, n_groups: int, weights=None) -> sparse.csr_array:
    """Sparse (n_groups, len(groups)) matrix with ``weights`` (default 1) at ``(groups[k], k)``.

    ``matrix @ values`` sums the rows of a (len(groups), k) array by group.
    """
    n = len(groups)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    return sparse.csr_array((w, (groups, np.arange(n))), shape=(n_groups, n))


def _select_draws(n: int, max_draws: int, rng: np.random.Generator) -> np.ndarray:
    """All draws, or a seeded random subset of ``max_draws`` of them (sorted)."""
    if max_draws < 1:
        raise InputError(f"max_draws must be at least 1, got {max_draws}")
    if n <= max_draws:
        return np.arange(n)
    return np.sort(rng.choice(n, size=max_draws, replace=False))


def _budget(draws: np.ndarray, width: int, store: int = 0) -> np.ndarray:
    """The draws a check pass over ``width`` elements per draw can afford.

    At most :data:`CHECK_ELEMENTS` evaluations (``len(result) * width``) and, when the pass
    keeps a (``store`` x draws) array, at most :data:`STORE_ELEMENTS` numbers in it; never
    fewer than :data:`MIN_CHECK_DRAWS` draws. The subset is evenly spaced in ``draws``.
    """
    n = CHECK_ELEMENTS // max(width, 1)
    if store:
        n = min(n, STORE_ELEMENTS // store)
    n = max(n, MIN_CHECK_DRAWS)
    if n >= len(draws):
        return draws
    return draws[np.unique(np.linspace(0, len(draws) - 1, n).round().astype(int))]


def _replicate_index(draws: np.ndarray) -> np.ndarray:
    """Draw index of each replicated data set: every draw, cycled to reach the minimum."""
    return np.resize(draws, max(len(draws), MIN_REPLICATES))


def _chunks(index: np.ndarray, n_cols: int, least: int = 1):
    """Consecutive pieces of ``index``: :data:`CHUNK_ELEMENTS` // ``n_cols`` entries each.

    At least ``least`` entries per piece (the last may be shorter).
    """
    width = max(least, CHUNK_ELEMENTS // max(n_cols, 1))
    for start in range(0, len(index), width):
        yield index[start : start + width]


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stable order sorting ``keys``, start of each run of equal keys, and the run keys.

    ``np.add.reduceat(values[:, order], starts, axis=1)`` then sums values by key.
    """
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(keys) else []
    starts = np.asarray(starts, dtype=np.intp)
    return order, starts, ordered[starts]


def _hist_interval(hist: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed interval (inverted CDF) of integer counts from per-row histograms."""
    total = hist.sum(axis=1, keepdims=True)
    cdf = np.cumsum(hist, axis=1) / np.maximum(total, 1)
    lo = np.argmax(cdf >= (1 - ci) / 2 - 1e-12, axis=1).astype(float)
    hi = np.argmax(cdf >= (1 + ci) / 2 - 1e-12, axis=1).astype(float)
    empty = total[:, 0] == 0
    lo[empty] = hi[empty] = np.nan
    return lo, hi


def _nan_to_none(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


# ----------------------------------------------------------------------------- the fit
@dataclass(frozen=True, eq=False)
class _Decisive:
    """Decisive arena pairs and the sparse maps from pairs to arena cells."""

    row_i: np.ndarray
    row_j: np.ndarray
    i: np.ndarray
    j: np.ndarray
    item: np.ndarray
    t: np.ndarray
    diff: sparse.csr_array  # (R, P): +1 at the pair's first cell, -1 at its second
    both: sparse.csr_array  # (R, P): +1 at both cells
    n_second: np.ndarray  # pairs in which the cell is the second side
    n_cell: np.ndarray  # decisive pairs per arena cell
    observed: np.ndarray  # soft wins per arena cell

    @property
    def n_pairs(self) -> int:
        return len(self.t)


@dataclass(frozen=True, eq=False)
class _Fit:
    """Posterior draws (chains pooled, float32) and the data, checked against each other."""

    dataset: Dataset
    theta: np.ndarray  # (D, M)
    a: np.ndarray | None  # (D, Q); None under 1pl and bt
    b: np.ndarray | None  # (D, Q); None under bt
    gamma: np.ndarray | None  # (D,)
    sigma: np.ndarray | None  # (D,)
    use_static: bool
    arena: str | None  # "pairs", "bt", "reward" or None
    decisive: _Decisive | None

    @property
    def n_draws(self) -> int:
        return self.theta.shape[0]

    def eta(
        self, d: np.ndarray, model: np.ndarray, item: np.ndarray, runs: tuple | None = None
    ) -> np.ndarray:
        """Success log-odds ``a (theta - b)`` of cells, shape (len(d), len(model)) float32.

        ``runs``, ``(items, lengths)`` when the cells come in runs of one item each (as
        ``item == np.repeat(items, lengths)``), lets the item parameters be repeated
        instead of gathered. One draw at a time: a 1-D ``take`` is several times faster
        than fancy indexing of a 2-D array.
        """
        out = np.empty((len(d), len(model)), dtype=np.float32)
        for row, k in zip(out, d, strict=True):
            if runs is None:
                b = self.b[k].take(item)
                a = None if self.a is None else self.a[k].take(item)
            else:
                b = self.b[k, runs[0]].repeat(runs[1])
                a = None if self.a is None else self.a[k, runs[0]].repeat(runs[1])
            np.subtract(self.theta[k].take(model), b, out=row)
            if a is not None:
                row *= a
        return out

    def pair_prob(self, d: np.ndarray) -> np.ndarray:
        """Win probability of the first side of every decisive pair, (P, len(d))."""
        dec = self.decisive
        if self.arena == "bt":
            t = np.ascontiguousarray(self.theta[d].T)
            x = t[dec.i] - t[dec.j]
        else:
            ds = self.dataset
            p = np.ascontiguousarray(_sigmoid(self.eta(d, ds.arena_model, ds.arena_item)).T)
            x = p[dec.row_i] - p[dec.row_j]
            x *= self.gamma[d][None, :]
        return _sigmoid(x, out=x)


def _var(idata, name: str) -> np.ndarray | None:
    if name not in idata.posterior:
        return None
    return np.asarray(draws_of(idata, name), dtype=np.float32)


def _resolve(idata, dataset: Dataset, pairs: Pairs | None, bb_ratio, tie_ratio) -> _Fit:
    """Read the draws, restrict the dataset to the kinds fitted and check they match."""
    post = idata.posterior
    observed = idata.observed_data if "observed_data" in idata.groups() else None
    has_static = len(dataset.static_y) > 0
    has_arena = len(dataset.arena_z) > 0
    if observed is not None:
        fitted_static, fitted_arena = "static_y" in observed, "arena_z" in observed
        if has_static and has_arena and fitted_static != fitted_arena:
            dataset = dataset.only("static" if fitted_static else "arena")
            has_static, has_arena = fitted_static, fitted_arena
    models = np.asarray(post["model"].values).astype(str)
    if not np.array_equal(models, dataset.models):
        raise InputError(
            "the posterior's models do not match the dataset's: pass the dataset the run "
            "was fitted to (FitResult.dataset)"
        )
    if "item" in post.coords and not np.array_equal(
        np.asarray(post["item"].values).astype(str), dataset.items
    ):
        raise InputError(
            "the posterior's items do not match the dataset's: pass the dataset the run "
            "was fitted to (FitResult.dataset)"
        )
    if observed is not None:
        for name, values in (("static_y", dataset.static_y), ("arena_z", dataset.arena_z)):
            if name in observed and observed[name].size != len(values):
                raise InputError(f"the run's observed {name} does not match the dataset")
    theta = _var(idata, "theta")
    b = _var(idata, "b")
    sigma = _var(idata, "sigma")
    if not has_arena:
        arena = None
    elif b is None:
        arena = "bt"
    elif sigma is not None:
        arena = "reward"
    else:
        arena = "pairs"
    decisive = None
    if arena in ("pairs", "bt"):
        if pairs is None:
            pairs = distill(dataset, bb_ratio=bb_ratio, tie_ratio=tie_ratio)
        n_rows = len(dataset.arena_z)
        if pairs.n_pairs and max(pairs.row_i.max(), pairs.row_j.max()) >= n_rows:
            raise InputError("the arena pairs do not belong to this dataset")
        keep = ~pairs.both_bad
        ri, rj = pairs.row_i[keep].astype(np.int64), pairs.row_j[keep].astype(np.int64)
        t = pairs.target[keep].astype(np.float64)
        n_pairs = len(t)
        cols = np.arange(n_pairs)
        rows = np.concatenate([ri, rj])
        ones = np.ones(n_pairs, dtype=np.float32)
        diff = sparse.csr_array(
            (np.concatenate([ones, -ones]), (rows, np.concatenate([cols, cols]))),
            shape=(n_rows, n_pairs),
        )
        both = sparse.csr_array(
            (np.concatenate([ones, ones]), (rows, np.concatenate([cols, cols]))),
            shape=(n_rows, n_pairs),
        )
        n_second = np.bincount(rj, minlength=n_rows)
        decisive = _Decisive(
            row_i=ri,
            row_j=rj,
            i=pairs.i[keep].astype(np.int64),
            j=pairs.j[keep].astype(np.int64),
            item=pairs.item[keep].astype(np.int64),
            t=t,
            diff=diff,
            both=both,
            n_second=n_second.astype(np.float32),
            n_cell=np.bincount(ri, minlength=n_rows) + n_second,
            observed=np.bincount(ri, weights=t, minlength=n_rows)
            + np.bincount(rj, weights=1.0 - t, minlength=n_rows),
        )
    return _Fit(
        dataset=dataset,
        theta=theta,
        a=_var(idata, "a"),
        b=b,
        gamma=_var(idata, "gamma"),
        sigma=sigma,
        use_static=has_static and b is not None,
        arena=arena,
        decisive=decisive,
    )


# ----------------------------------------------------------------------------- cells
@dataclass(frozen=True, eq=False)
class _Cells:
    """Per-cell checks of one kind (arrays aligned with the dataset's cells)."""

    model: np.ndarray
    item: np.ndarray
    observed: np.ndarray
    expected: np.ndarray
    residual: np.ndarray
    ppp: np.ndarray  # the smaller posterior predictive tail probability
    used: np.ndarray  # cells that enter the table (bool)


@dataclass(frozen=True, eq=False)
class _StaticPass:
    """What one pass over the static cells gives (see :func:`_static_pass`)."""

    cells: _Cells
    mean_p: np.ndarray  # (S,): posterior mean of p
    n_draws: int
    n_rep: int = 0
    item_ppp: np.ndarray | None = None  # (Q,), NaN for non-static items
    item_hist: np.ndarray | None = None  # (Q_static, M + 1): replicated correct counts
    model_correct: np.ndarray | None = None  # (n_rep, M): replicated correct answers


def _static_pass(fit: _Fit, draws: np.ndarray, rng: np.random.Generator | None) -> _StaticPass:
    """Cell checks and, with ``rng``, replicated labels of every static cell.

    Works on ``z``, the log-odds of the observed label, so that small tail probabilities
    keep their precision in float32. The cell's tail probability (``E[p]`` for a success,
    ``E[1 - p]`` for a failure) is the posterior mean of ``sigmoid(z)``. Replicates (one
    per entry of :func:`_replicate_index`) give the deviance item-fit ppp (mid-p:
    ``P(D_rep > D_obs) + P(D_rep = D_obs) / 2`` with ``D = -2 log p(y | theta)`` summed
    over the item's cells; ``D_rep - D_obs`` is twice the sum of ``z`` over the cells
    where the replicate differs from the data), histograms of replicated correct counts
    per static item and replicated correct counts per model.
    """
    ds = fit.dataset
    n_models = ds.n_models
    order, starts, seg_items = _segments(ds.static_item)
    item, model = ds.static_item[order], ds.static_model[order]
    y = ds.static_y[order] > 0
    sign = np.where(y, 1.0, -1.0).astype(np.float32)
    n_cells, n_first = len(y), len(draws)
    runs = (seg_items, np.diff(np.r_[starts, n_cells]))
    rep = draws if rng is None else _replicate_index(draws)
    total = np.zeros(n_cells)
    greater = np.zeros(len(starts))
    equal = np.zeros(len(starts))
    hist = np.zeros(len(starts) * (n_models + 1), dtype=np.int64)
    model_correct = np.zeros((len(rep), n_models))
    offset = np.arange(len(starts)) * (n_models + 1)
    correct_item = np.add.reduceat(y.astype(np.float32), starts) if n_cells else np.zeros(0)
    correct_model = np.bincount(model, weights=y, minlength=n_models)
    per_model = _ModelSums(model, n_models)
    done = 0
    for d in _chunks(rep, n_cells):
        z = fit.eta(d, model, item, runs)
        z *= sign
        s = _sigmoid(z)
        first = min(len(d), max(n_first - done, 0))
        if first:
            total += s[:first].sum(axis=0)
        if rng is not None:
            differ = rng.random(z.shape, dtype=np.float32) >= s
            flip = np.multiply(differ, sign, dtype=np.float32)  # y - y_rep
            z *= differ
            change = np.add.reduceat(z, starts, axis=1)
            greater += (change > 0).sum(axis=0)
            equal += (change == 0).sum(axis=0)
            counts = np.rint(correct_item - np.add.reduceat(flip, starts, axis=1)).astype(np.int64)
            hist += np.bincount((counts + offset).ravel(), minlength=hist.size)
            model_correct[done : done + len(d)] = correct_model - per_model(flip)
        done += len(d)
    mean_obs = np.empty(n_cells)
    mean_obs[order] = total / n_first
    y_obs = ds.static_y.astype(np.float64)
    mean_p = np.where(y_obs > 0, mean_obs, 1.0 - mean_obs)
    sd = np.sqrt(np.clip(mean_obs * (1.0 - mean_obs), _EPS, None))
    cells = _Cells(
        model=ds.static_model,
        item=ds.static_item,
        observed=y_obs,
        expected=mean_p,
        residual=np.where(y_obs > 0, 1.0, -1.0) * (1.0 - mean_obs) / sd,
        ppp=np.minimum(mean_obs, 1.0),
        used=np.ones(n_cells, dtype=bool),
    )
    if rng is None:
        return _StaticPass(cells=cells, mean_p=mean_p, n_draws=n_first)
    n_rep = len(rep)
    ppp = np.full(ds.n_items, np.nan)
    ppp[seg_items] = (greater + 0.5 * equal) / n_rep
    static_items = ds.static_items
    item_hist = np.zeros((len(static_items), n_models + 1), dtype=np.int64)
    col = np.full(ds.n_items, -1)
    col[static_items] = np.arange(len(static_items))
    item_hist[col[seg_items]] = hist.reshape(len(starts), n_models + 1)
    return _StaticPass(
        cells=cells,
        mean_p=mean_p,
        n_draws=n_first,
        n_rep=n_rep,
        item_ppp=ppp,
        item_hist=item_hist,
        model_correct=model_correct,
    )


class _ModelSums:
    """Sums of a (k, S) float32 array over each model's cells, (k, M).

    A dense one-hot product (BLAS) for a few models; a sparse product for many.
    """

    def __init__(self, model: np.ndarray, n_models: int):
        if n_models <= 32:
            self.onehot = np.zeros((len(model), n_models), dtype=np.float32)
            self.onehot[np.arange(len(model)), model] = 1.0
            self.matrix = None
        else:
            self.matrix = _group_matrix(model, n_models).astype(np.float32)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        if self.matrix is None:
            return values @ self.onehot
        return (self.matrix @ values.T).T


@dataclass(frozen=True, eq=False)
class _ArenaPass:
    """What one pass over the arena data gives (see :func:`_arena_pass`)."""

    cells: _Cells
    phi: float  # dispersion (NaN under the reward likelihood)
    item_ppp: np.ndarray  # (Q,), NaN for non-arena items and prompts without cells
    rho: float  # overdispersion of prompt discrepancies
    model_observed: np.ndarray  # (M,)
    model_reps: np.ndarray  # (n_rep, M)
    model_count: np.ndarray  # (M,)
    pair_mean: np.ndarray | None  # (P,): posterior mean win probability of the first side
    n_draws: int


def _dispersion(dec: _Decisive, mean, var, binom, dispersion: float | None) -> float:
    """The arena dispersion: given, or the Pearson (method-of-moments) estimate."""
    if dispersion is not None:
        if not dispersion > 0:
            raise InputError(f"dispersion must be positive, got {dispersion}")
        return float(dispersion)
    used = dec.n_cell > 0
    denom = binom[used].sum()
    if denom <= 0:
        return 1.0
    dev = (dec.observed - mean) ** 2 - var
    return float(max(dev[used].sum() / denom, MIN_DISPERSION))


def _overdispersion(mean: np.ndarray, dof: np.ndarray, ok: np.ndarray) -> float:
    """``rho = sum (Dbar_q - k_q)^2 / sum 2 k_q`` over prompts ``ok``, floored at 1."""
    denom = 2.0 * dof[ok].sum()
    return max(1.0, float(((mean[ok] - dof[ok]) ** 2).sum() / denom)) if denom > 0 else 1.0


def _arena_pass(fit: _Fit, draws: np.ndarray, rng, dispersion: float | None) -> _ArenaPass:
    """Arena cells, prompt fit and per-model replicates from one pass over the pairs.

    Pairs likelihood (and Bradley-Terry): for every draw, the expected soft wins
    ``E_d`` of each arena cell and their binomial variance ``V_d`` are computed once (the
    only step that touches every pair) and kept as (cells x draws) arrays; the dispersion,
    the cells' tail probabilities, the prompt discrepancies and the replicated win shares
    per model all follow from them.
    """
    if fit.arena == "reward":
        return _reward_pass(fit, draws, rng)
    ds = fit.dataset
    dec = fit.decisive
    n_cells, n_items, n_draw = len(ds.arena_z), ds.n_items, len(draws)
    expected = np.zeros((n_cells, n_draw), dtype=np.float32)
    variance = np.zeros((n_cells, n_draw), dtype=np.float32)
    pair_total = np.zeros(dec.n_pairs)
    done = 0
    if dec.n_pairs:
        # several draws at once: the sparse sums are faster per draw on wider blocks
        for d in _chunks(draws, max(dec.n_pairs, n_cells), least=PAIR_CHUNK_DRAWS):
            s = fit.pair_prob(d)
            pair_total += s.sum(axis=1)
            e = dec.diff @ s
            e += dec.n_second[:, None]
            s -= np.square(s)  # s (1 - s)
            expected[:, done : done + len(d)] = e
            variance[:, done : done + len(d)] = dec.both @ s
            done += len(d)
    mean = expected.mean(axis=1, dtype=np.float64)
    var = np.clip(expected.var(axis=1, dtype=np.float64), 0.0, None)
    binom = variance.mean(axis=1, dtype=np.float64)
    phi = _dispersion(dec, mean, var, binom, dispersion)

    w = dec.observed
    used = dec.n_cell > 0
    to_item = _group_matrix(ds.arena_item, n_items, weights=used)
    dof = to_item @ np.ones(n_cells)
    upper = np.zeros(n_cells)
    discrepancy = np.zeros((n_items, n_draw))
    for cols in _chunks(np.arange(n_draw), n_cells):
        e = expected[:, cols].astype(np.float64)
        sd = np.sqrt(phi * np.clip(variance[:, cols], _EPS, None))
        upper += special.ndtr((e - w[:, None]) / sd).sum(axis=1)
        discrepancy[:, cols] = to_item @ (((w[:, None] - e) / sd) ** 2)
    upper /= max(n_draw, 1)
    sd = np.sqrt(phi * binom + var)
    resid = np.where(used, (w - mean) / np.where(used, np.maximum(sd, _EPS), 1), 0)
    cells = _Cells(
        model=ds.arena_model,
        item=ds.arena_item,
        observed=w,
        expected=mean,
        residual=resid,
        ppp=np.where(used, np.minimum(upper, 1.0 - upper), 1.0),
        used=used,
    )
    item_ppp, rho = _prompt_ppp(fit, discrepancy, dof)

    to_model = _group_matrix(ds.arena_model, ds.n_models)
    count = to_model @ dec.n_cell.astype(np.float64)
    observed = to_model @ w
    rep = _replicate_index(np.arange(n_draw))
    m_mean = (to_model @ expected.astype(np.float64))[:, rep].T
    m_var = (to_model @ variance.astype(np.float64))[:, rep].T
    reps = m_mean + np.sqrt(phi * m_var) * rng.standard_normal(m_mean.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _ArenaPass(
            cells=cells,
            phi=phi,
            item_ppp=item_ppp,
            rho=rho,
            model_observed=observed / count,
            model_reps=reps / count,
            model_count=count,
            pair_mean=pair_total / max(n_draw, 1),
            n_draws=n_draw,
        )


def _prompt_ppp(fit: _Fit, discrepancy: np.ndarray, dof: np.ndarray) -> tuple:
    """Prompt fit ``mean_draws P(rho chi2_{k / rho} >= D)`` from (Q x draws) discrepancies."""
    arena = np.zeros(fit.dataset.n_items, dtype=bool)
    arena[fit.dataset.arena_items] = True
    ok = arena & (dof > 0)
    rho = _overdispersion(discrepancy.mean(axis=1), dof, ok)
    k = np.maximum(dof, 1.0) / rho
    out = np.full(fit.dataset.n_items, np.nan)
    out[ok] = special.chdtrc(k[ok, None], discrepancy[ok] / rho).mean(axis=1)
    return out, rho


def _reward_stats(fit: _Fit, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reward likelihood: per-cell mean and residual sd in draws ``d``, (k, R) each."""
    ds = fit.dataset
    item = ds.arena_item
    to_item = _group_matrix(item, ds.n_items)
    n_q = np.bincount(item, minlength=ds.n_items).astype(np.float64)
    z = ds.arena_z.astype(np.float64)
    zbar = np.bincount(item, weights=z, minlength=ds.n_items) / np.maximum(n_q, 1)
    p = _sigmoid(fit.eta(d, ds.arena_model, item).astype(np.float64))
    pbar = (to_item @ p.T).T / np.maximum(n_q, 1)
    mu = zbar[item] + fit.gamma[d].astype(np.float64)[:, None] * (p - pbar[:, item])
    sd = fit.sigma[d].astype(np.float64)[:, None] * np.sqrt(1.0 - 1.0 / n_q[item])
    return mu, sd


def _reward_pass(fit: _Fit, draws: np.ndarray, rng) -> _ArenaPass:
    """The reward likelihood's cells (normalised rewards), prompt fit and model replicates.

    Prompt discrepancy: the sum of squared within-prompt residuals over ``sigma_d^2``
    (``sd = sigma sqrt(1 - 1/n)`` is the residual's own sd), ``k = n_q - 1``.
    """
    ds = fit.dataset
    z = ds.arena_z.astype(np.float64)
    n_items, n_draw = ds.n_items, len(draws)
    to_item = _group_matrix(ds.arena_item, n_items)
    to_model = _group_matrix(ds.arena_model, ds.n_models)
    n_q = np.bincount(ds.arena_item, minlength=n_items).astype(np.float64)
    dof = np.maximum(n_q - 1.0, 0.0)
    s1, s2, sv, upper = (np.zeros(len(z)) for _ in range(4))
    discrepancy = np.zeros((n_items, n_draw))
    done = 0
    for d in _chunks(draws, len(z)):
        mu, sd = _reward_stats(fit, d)
        s1 += mu.sum(axis=0)
        s2 += (mu**2).sum(axis=0)
        sv += (sd**2).sum(axis=0)
        scaled = (z - mu) / np.maximum(sd, _EPS)
        upper += special.ndtr(-scaled).sum(axis=0)
        discrepancy[:, done : done + len(d)] = (to_item @ (scaled**2).T) * (
            dof / np.maximum(n_q, 1.0)
        )[:, None]
        done += len(d)
    mean = s1 / n_draw
    var = np.clip(s2 / n_draw - mean**2, 0.0, None) + sv / n_draw
    upper /= n_draw
    cells = _Cells(
        model=ds.arena_model,
        item=ds.arena_item,
        observed=z,
        expected=mean,
        residual=(z - mean) / np.sqrt(np.maximum(var, _EPS)),
        ppp=np.minimum(upper, 1.0 - upper),
        used=np.ones(len(z), dtype=bool),
    )
    item_ppp, rho = _prompt_ppp(fit, discrepancy, dof)
    rep = _replicate_index(draws)
    count = np.bincount(ds.arena_model, minlength=ds.n_models).astype(np.float64)
    reps = np.zeros((len(rep), ds.n_models))
    done = 0
    for d in _chunks(rep, len(z)):
        mu, sd = _reward_stats(fit, d)
        sim = mu + sd * rng.standard_normal(mu.shape)
        reps[done : done + len(d)] = (to_model @ sim.T).T
        done += len(d)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _ArenaPass(
            cells=cells,
            phi=float("nan"),
            item_ppp=item_ppp,
            rho=rho,
            model_observed=(to_model @ z) / count,
            model_reps=reps / count,
            model_count=count,
            pair_mean=None,
            n_draws=n_draw,
        )


class _Checks:
    """The checks of one run, each computed at most once and shared by the public functions.

    The posterior draws used are a seeded subset of at most ``max_draws``; each pass then
    keeps as many of them (evenly spaced) as :func:`_budget` allows for its size. Each
    pass has its own random stream derived from ``seed``, so a table does not depend on
    which other tables were computed first.
    """

    def __init__(self, idata, dataset, pairs, *, seed, max_draws, bb_ratio, tie_ratio, dispersion):
        self.idata, self.dataset = idata, dataset
        self.options = (seed, max_draws, dispersion)
        self.fit = _resolve(idata, dataset, pairs, bb_ratio, tie_ratio)
        self.draws = _select_draws(self.fit.n_draws, max_draws, np.random.default_rng(seed))
        self._seed = seed
        self._static: _StaticPass | None = None
        self._arena: _ArenaPass | None = None

    def matches(self, idata, dataset, seed, max_draws, dispersion) -> bool:
        """Whether these checks were computed for the same run, data and options."""
        return (
            idata is self.idata
            and dataset is self.dataset
            and self.options == (seed, max_draws, dispersion)
        )

    def static(self, replicate: bool = True) -> _StaticPass | None:
        if not self.fit.use_static:
            return None
        if self._static is None or (replicate and self._static.item_ppp is None):
            n_cells = len(self.fit.dataset.static_y)
            draws = _budget(self.draws, n_cells)
            rng = np.random.default_rng([self._seed, 1]) if replicate else None
            self._static = _static_pass(self.fit, draws, rng)
        return self._static

    def arena(self) -> _ArenaPass | None:
        if self.fit.arena is None:
            return None
        if self._arena is None:
            n_cells = len(self.fit.dataset.arena_z)
            width = n_cells
            if self.fit.decisive is not None:
                width = max(self.fit.decisive.n_pairs, n_cells)
            draws = _budget(self.draws, width, store=n_cells)
            rng = np.random.default_rng([self._seed, 2])
            self._arena = _arena_pass(self.fit, draws, rng, self.options[2])
        return self._arena

    def cells(self) -> tuple[pd.DataFrame, tuple]:
        """The table of :func:`anomalies` and its rows' (model, item) codes."""
        parts = {}
        static = self.static(replicate=False)
        if static is not None:
            parts["static"] = static.cells
        arena = self.arena()
        if arena is not None:
            parts["arena"] = arena.cells
        table, codes = _cell_table(self.fit, parts)
        table.attrs["arena_dispersion"] = arena.phi if arena is not None else np.nan
        return table, codes


def _cell_table(fit: _Fit, parts: dict) -> tuple[pd.DataFrame, tuple]:
    """The cell table, most surprising first, and its rows' (model, item) codes."""
    ds = fit.dataset
    columns = ["model", "item", "kind", "observed", "expected", "residual", "ppp", "p_value"]
    if not parts:
        table = pd.DataFrame(columns=columns)
        table["q_value"] = bh_qvalues(np.zeros(0))
        empty = np.zeros(0, dtype=np.int64)
        return table, (empty, empty)
    u = [c.used for c in parts.values()]

    def cat(name):
        return np.concatenate(
            [getattr(c, name)[k] for c, k in zip(parts.values(), u, strict=True)]
        )

    ppp = cat("ppp")
    p_value = np.minimum(1.0, 2.0 * ppp)
    residual = cat("residual")
    order = np.lexsort((-np.abs(residual), p_value))
    model, item = cat("model")[order], cat("item")[order]
    kinds = np.array(list(parts), dtype=object)
    kind = np.repeat(kinds, [int(k.sum()) for k in u])[order]
    table = pd.DataFrame(
        {
            "model": ds.models[model],
            "item": ds.items[item],
            "kind": kind,
            "observed": cat("observed")[order],
            "expected": cat("expected")[order],
            "residual": residual[order],
            "ppp": ppp[order],
            "p_value": p_value[order],
        }
    )
    table["q_value"] = bh_qvalues(p_value[order])
    return table, (model, item)


def anomalies(
    idata,
    dataset: Dataset,
    pairs: Pairs | None = None,
    *,
    seed: int = 0,
    max_draws: int = 1000,
    bb_ratio: float = DEFAULT_BB_RATIO,
    tie_ratio: float = DEFAULT_TIE_RATIO,
    dispersion: float | None = None,
) -> pd.DataFrame:
    """Model-item cells ranked by how much the fitted model is surprised by them.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior (:attr:`FitResult.idata` or :func:`~bayes_dualeval.runs.fit.load_run`).
    dataset : Dataset
        The data the run was fitted to (restricted to the fitted kinds if it holds more).
    pairs : Pairs, optional
        The run's distilled arena pairs (:attr:`FitResult.pairs`); recomputed with
        ``bb_ratio`` and ``tie_ratio`` when not given.
    seed : int
        Seed of the :class:`numpy.random.Generator` that picks the draws used when the run
        has more than ``max_draws``.
    max_draws : int
        Largest number of posterior draws used (fewer when the data are large: at most
        :data:`CHECK_ELEMENTS` cell or pair evaluations per kind of data).
    bb_ratio, tie_ratio : float
        Distillation quantiles when ``pairs`` is recomputed: pass the run's
        ``diagnostics["config"]`` values.
    dispersion : float, optional
        Dispersion ``phi`` of replicated arena wins relative to hard win/loss outcomes;
        estimated from the arena cells when not given (1 = binomial).

    Returns
    -------
    pandas.DataFrame
        One row per cell, most surprising first (ascending ``p_value``, then descending
        ``|residual|``), with columns ``model, item, kind, observed, expected, residual, ppp,
        p_value, q_value``. Static cells: ``observed`` is the 0/1 label, ``expected`` the
        posterior mean of ``p``, ``ppp`` the posterior predictive probability of an
        outcome at least as extreme as the observed one in its direction (``E[p]`` for a
        success, ``E[1 - p]`` for a failure). Arena cells (pairs likelihood): ``observed``
        the model's soft wins on the prompt over its decisive pairs, ``expected`` the
        posterior mean of its predicted wins; reward likelihood: the normalised reward and
        its posterior mean prediction. ``residual`` is ``(observed - expected) / sd`` with
        the posterior predictive sd; ``p_value = min(1, 2 ppp)`` (two-sided) and
        ``q_value`` its Benjamini-Hochberg adjustment over all cells of the table. Arena
        cells without decisive pairs are left out. ``attrs["arena_dispersion"]`` holds
        the dispersion used (NaN without arena cells).

    Examples
    --------
    >>> table = anomalies(result.idata, result.dataset, result.pairs)  # doctest: +SKIP
    >>> table[table.q_value < 0.05]  # doctest: +SKIP
    """
    checks = _Checks(
        idata, dataset, pairs, seed=seed, max_draws=max_draws, bb_ratio=bb_ratio,
        tie_ratio=tie_ratio, dispersion=dispersion,
    )  # fmt: skip
    return checks.cells()[0]


# ----------------------------------------------------------------------------- items
def item_table(
    idata,
    dataset: Dataset,
    *,
    ci: float = 0.95,
    pairs: Pairs | None = None,
    seed: int = 0,
    max_draws: int = 1000,
    bb_ratio: float = DEFAULT_BB_RATIO,
    tie_ratio: float = DEFAULT_TIE_RATIO,
    dispersion: float | None = None,
    ppc: PPC | None = None,
) -> pd.DataFrame:
    """One row per item: difficulty, discrimination, information, fit and flags.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior.
    dataset : Dataset
        The data the run was fitted to.
    ci : float
        Level of the equal-tailed posterior intervals.
    pairs : Pairs, optional
        The run's arena pairs; recomputed with ``bb_ratio`` and ``tie_ratio`` if not given.
    seed : int
        Seed of the generator for the draw subset and the replicated static labels.
    max_draws : int
        Largest number of posterior draws used for the fit checks (fewer for large data,
        see :func:`anomalies`; the parameter summaries use every draw).
    bb_ratio, tie_ratio : float
        Distillation quantiles when ``pairs`` is recomputed.
    dispersion : float, optional
        Arena dispersion (see :func:`anomalies`).
    ppc : PPC, optional
        A :func:`posterior_predictive` result of the same ``idata`` and ``dataset`` objects
        with the same ``seed``, ``max_draws`` and ``dispersion``: its item-fit checks are
        reused instead of computed again (ignored when any of these differ).

    Returns
    -------
    pandas.DataFrame
        Columns ``item, kind, source, domain, b_mean, b_lo, b_hi, a_mean, a_lo, a_hi,
        observed, n_models, information, ppp, identified, flags, ci``, items in dataset
        order. ``identified`` is False for arena prompts of a specification without the
        arena level term (their ``b`` and ``a`` are then set by the prior and the pairs'
        shape, not by the data; flag ``not_identified``). ``b`` is
        on the leaderboard's scale (abilities centred to mean zero in every draw). Under
        ``irt = "1pl"`` the ``a`` columns are exactly 1; in Bradley-Terry runs ``a``, ``b``
        and ``information`` are NaN. With a single draw (MAP) the interval columns and
        ``ci`` are NaN (also under 1pl). ``observed`` is the static accuracy or the
        prompt's mean normalised reward. ``information`` is the posterior mean of ``a^2 p
        (1 - p)`` at the median ability of each draw. ``ppp`` is the item-fit posterior
        predictive p-value (static: mid-p of the deviance across models; arena: Pearson
        discrepancy of the cells), small when the item is fitted worse than replicated data
        would be. ``flags`` joins ``no_signal``, ``low_discrimination``, ``misfit`` and
        ``not_identified`` with
        ``;`` (see ``docs/outputs.md`` for the thresholds). Read the column as
        ``table["flags"]`` (``table.flags`` is a pandas attribute). ``attrs`` holds
        ``arena_dispersion`` and ``arena_item_overdispersion`` (NaN without arena data).

    Examples
    --------
    >>> items = item_table(result.idata, result.dataset, pairs=result.pairs)  # doctest: +SKIP
    >>> items[items["flags"].str.contains("misfit")]  # doctest: +SKIP
    """
    if (
        ppc is not None
        and ppc.checks is not None
        and ppc.checks.matches(idata, dataset, seed, max_draws, dispersion)
    ):
        checks = ppc.checks
    else:
        checks = _Checks(
            idata, dataset, pairs, seed=seed, max_draws=max_draws, bb_ratio=bb_ratio,
            tie_ratio=tie_ratio, dispersion=dispersion,
        )  # fmt: skip
    fit = checks.fit
    ds = fit.dataset
    n = fit.n_draws
    nan_q = np.full(ds.n_items, np.nan)
    b_mean, b_lo, b_hi, a_mean, a_lo, a_hi, info = (nan_q.copy() for _ in range(7))
    if fit.b is not None:
        shift = fit.theta.mean(axis=1, dtype=np.float64).astype(np.float32)[:, None]
        mid = np.median(fit.theta, axis=1)[:, None]
        step = max(1, CHUNK_ELEMENTS // max(n, 1))
        for start in range(0, ds.n_items, step):
            cols = slice(start, start + step)
            b = fit.b[:, cols]
            centred = b - shift
            b_mean[cols] = centred.mean(axis=0, dtype=np.float64)
            b_lo[cols], b_hi[cols] = interval(centred, ci)
            a = fit.a[:, cols] if fit.a is not None else np.ones_like(b)
            a_mean[cols] = a.mean(axis=0, dtype=np.float64)
            a_lo[cols], a_hi[cols] = interval(a, ci)
            p = _sigmoid(a * (mid - b))
            info[cols] = (a**2 * p * (1.0 - p)).mean(axis=0, dtype=np.float64)

    ppp = nan_q.copy()
    phi = rho = float("nan")
    static = checks.static()
    if static is not None:
        ppp = np.where(np.isnan(static.item_ppp), ppp, static.item_ppp)
    arena_pass = checks.arena()
    if arena_pass is not None:
        phi, rho = arena_pass.phi, arena_pass.rho
        arena = ds.item_kind == "arena"
        ppp[arena] = arena_pass.item_ppp[arena]

    n_static = np.bincount(ds.static_item, minlength=ds.n_items)
    n_arena = np.bincount(ds.arena_item, minlength=ds.n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(ds.static_item, weights=ds.static_y, minlength=ds.n_items)
        accuracy = accuracy / n_static
        mean_z = np.bincount(ds.arena_item, weights=ds.arena_z, minlength=ds.n_items) / n_arena
    is_static = ds.item_kind == "static"
    observed = np.where(is_static, accuracy, mean_z)

    no_signal = _no_signal(fit)
    if fit.a is not None:
        a_bound = a_hi if n > 1 else a_mean
        low = a_bound < LOW_DISCRIMINATION
    else:
        low = np.zeros(ds.n_items, dtype=bool)
    misfit = (ppp < MISFIT_PPP) | (ppp > 1.0 - MISFIT_PPP)
    from bayes_dualeval.posterior.idata import arena_levels_identified

    identified = ~((ds.item_kind == "arena") & (not arena_levels_identified(idata)))
    table = pd.DataFrame(
        {
            "item": ds.items,
            "kind": ds.item_kind,
            "source": ds.item_source,
            "domain": ds.item_domain,
            "b_mean": b_mean,
            "b_lo": b_lo,
            "b_hi": b_hi,
            "a_mean": a_mean,
            "a_lo": a_lo,
            "a_hi": a_hi,
            "observed": observed,
            "n_models": n_static + n_arena,
            "information": info,
            "ppp": ppp,
            "identified": identified,
            "flags": _flags(
                {
                    "no_signal": no_signal,
                    "low_discrimination": low,
                    "misfit": misfit,
                    "not_identified": ~identified,
                }
            ),
            "ci": ci if n > 1 else np.nan,
        }
    )
    table.attrs.update(arena_dispersion=phi, arena_item_overdispersion=rho)
    return table


def _flags(flags: dict) -> np.ndarray:
    """``;``-joined names of the flags set for each row (an empty string for none)."""
    names = list(flags)
    code = sum(np.asarray(v, dtype=np.int64) << k for k, v in enumerate(flags.values()))
    labels = np.array(
        [";".join(n for k, n in enumerate(names) if c >> k & 1) for c in range(1 << len(names))],
        dtype=object,
    )
    return labels[code]


def _no_signal(fit: _Fit) -> np.ndarray:
    """Items on which every model got the same outcome (or reward), or no decisive pair."""
    ds = fit.dataset
    q = ds.n_items
    lo = np.full(q, np.inf)
    hi = np.full(q, -np.inf)
    np.minimum.at(lo, ds.static_item, ds.static_y.astype(np.float64))
    np.maximum.at(hi, ds.static_item, ds.static_y.astype(np.float64))
    np.minimum.at(lo, ds.arena_item, ds.arena_z)
    np.maximum.at(hi, ds.arena_item, ds.arena_z)
    out = ~(hi - lo > 1e-12)
    if fit.decisive is not None:
        has_pairs = np.bincount(fit.decisive.item, minlength=q) > 0
        out |= (ds.item_kind == "arena") & ~has_pairs
    return out


# ----------------------------------------------------------------------------- PPC


@dataclass(frozen=True, eq=False)
class PPC:
    """Posterior-predictive checks of a run (see :func:`posterior_predictive`).

    Attributes
    ----------
    models : pandas.DataFrame
        Per model: ``model, static_observed, static_rep_mean, static_rep_lo, static_rep_hi,
        static_outside, n_static, arena_observed, arena_rep_mean, arena_rep_lo,
        arena_rep_hi, arena_outside, n_arena, ci``.
    items : pandas.DataFrame
        Per static item: ``item, source, domain, observed, rep_mean, rep_lo, rep_hi,
        outside, n_models, ci``.
    calibration_static : pandas.DataFrame
        Bins of predicted success probability: ``bin, lo, hi, n, mean_predicted,
        observed_frequency``; ``n`` sums to the number of static cells.
    calibration_arena : pandas.DataFrame
        The same for decisive arena pairs: predicted win probability of the first model
        against the mean soft target; ``n`` sums to the number of decisive pairs.
    model_misfit, item_misfit : pandas.DataFrame
        Per model (per item): ``n_cells, n_flagged`` (cells with ``q_value`` below
        :data:`FLAG_Q`), ``share_flagged, mean_abs_residual, min_ppp``; worst first.
    anomalies : pandas.DataFrame
        The full cell table of :func:`anomalies`.
    summary : dict
        Plain numbers for ``diagnostics.json`` (NaN written as None).
    checks : object
        The computed checks, reused by :func:`item_table` (``ppc=``); not part of the
        results.
    """

    models: pd.DataFrame
    items: pd.DataFrame
    calibration_static: pd.DataFrame
    calibration_arena: pd.DataFrame
    model_misfit: pd.DataFrame
    item_misfit: pd.DataFrame
    anomalies: pd.DataFrame
    summary: dict
    checks: object = field(default=None, repr=False)


def calibration_table(predicted, observed, bins: int = CALIBRATION_BINS) -> pd.DataFrame:
    """Equal-width bins of predicted probability with mean prediction and observed mean.

    Parameters
    ----------
    predicted : array_like of float in [0, 1]
    observed : array_like of float in [0, 1]
        Outcomes (0/1 labels or soft targets).
    bins : int
        Number of bins on [0, 1]; the last bin includes 1.

    Returns
    -------
    pandas.DataFrame
        ``bin, lo, hi, n, mean_predicted, observed_frequency`` (NaN means in empty bins).
    """
    pred = np.asarray(predicted, dtype=np.float64)
    obs = np.asarray(observed, dtype=np.float64)
    which = np.clip((pred * bins).astype(np.int64), 0, bins - 1)
    n = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_pred = np.bincount(which, weights=pred, minlength=bins) / n
        mean_obs = np.bincount(which, weights=obs, minlength=bins) / n
    edges = np.linspace(0.0, 1.0, bins + 1)
    return pd.DataFrame(
        {
            "bin": np.arange(bins),
            "lo": edges[:-1],
            "hi": edges[1:],
            "n": n,
            "mean_predicted": mean_pred,
            "observed_frequency": mean_obs,
        }
    )


def calibration_error(table: pd.DataFrame) -> float:
    """Expected calibration error: ``n``-weighted mean ``|mean_predicted - observed|``."""
    n = table["n"].to_numpy(dtype=np.float64)
    if n.sum() == 0:
        return float("nan")
    gap = np.abs(table["mean_predicted"] - table["observed_frequency"]).to_numpy()
    return float(np.sum(np.where(n > 0, n * np.nan_to_num(gap), 0.0)) / n.sum())


def _misfit_table(cells: pd.DataFrame, codes: np.ndarray, labels: dict) -> pd.DataFrame:
    """Per group of cells (``codes`` of the table's rows): counts of flagged cells, worst first.

    ``labels`` maps the group columns to label arrays indexed by code. Groups are listed
    in order of their first row in the table, then sorted by the number of flagged cells
    (descending) and the smallest ppp (stable).
    """
    n_groups = max(len(v) for v in labels.values())
    flagged = (cells["q_value"].to_numpy(dtype=np.float64) < FLAG_Q).astype(np.float64)
    abs_res = np.abs(cells["residual"].to_numpy(dtype=np.float64))
    ppp = cells["ppp"].to_numpy(dtype=np.float64)
    n_cells = np.bincount(codes, minlength=n_groups)
    first = np.full(n_groups, len(codes))
    np.minimum.at(first, codes, np.arange(len(codes)))
    min_ppp = np.full(n_groups, np.inf)
    np.minimum.at(min_ppp, codes, ppp)
    present = np.flatnonzero(n_cells > 0)
    present = present[np.argsort(first[present], kind="stable")]
    with np.errstate(invalid="ignore", divide="ignore"):
        table = pd.DataFrame(
            {
                **{name: values[present] for name, values in labels.items()},
                "n_cells": n_cells[present],
                "n_flagged": np.bincount(codes, flagged, n_groups)[present].astype(int),
                "mean_abs_residual": (np.bincount(codes, abs_res, n_groups) / n_cells)[present],
                "min_ppp": min_ppp[present],
            }
        )
    table.insert(len(labels) + 2, "share_flagged", table["n_flagged"] / table["n_cells"])
    order = np.lexsort((table["min_ppp"].to_numpy(), -table["n_flagged"].to_numpy()))
    return table.iloc[order].reset_index(drop=True)


def posterior_predictive(
    idata,
    dataset: Dataset,
    pairs: Pairs | None = None,
    *,
    ci: float = 0.95,
    seed: int = 0,
    max_draws: int = 1000,
    bb_ratio: float = DEFAULT_BB_RATIO,
    tie_ratio: float = DEFAULT_TIE_RATIO,
    dispersion: float | None = None,
) -> PPC:
    """Compare replicated data from the posterior with the observed data.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior.
    dataset : Dataset
        The data the run was fitted to.
    pairs : Pairs, optional
        The run's arena pairs; recomputed with ``bb_ratio`` and ``tie_ratio`` if not given.
    ci : float
        Level of the replicated intervals.
    seed : int
        Seed of the generator for the draw subset and the replicated data.
    max_draws : int
        Largest number of posterior draws used (fewer for large data, see
        :func:`anomalies`); at least :data:`MIN_REPLICATES` replicated data sets are drawn
        (several per draw for short runs; for MAP it is a plug-in check at the point
        estimate).
    bb_ratio, tie_ratio : float
        Distillation quantiles when ``pairs`` is recomputed.
    dispersion : float, optional
        Arena dispersion (see :func:`anomalies`).

    Returns
    -------
    PPC
        Per-model and per-item tables, calibration tables, misfit tables and ``summary``
        with ``share_models_outside`` (models with any statistic outside its replicated
        interval), ``share_models_outside_static``, ``share_models_outside_arena``,
        ``share_items_outside``, ``calibration_error_static``, ``calibration_error_arena``,
        ``arena_dispersion``, ``arena_statistic``, ``cells``, ``flagged_cells``,
        ``flag_q``, ``draws`` (the most posterior draws any check used), ``draws_static``,
        ``draws_arena``, ``replicates`` and ``ci``.

    Examples
    --------
    >>> ppc = posterior_predictive(result.idata, result.dataset, result.pairs)  # doctest: +SKIP
    >>> ppc.summary["share_models_outside"]  # doctest: +SKIP
    """
    checks = _Checks(
        idata, dataset, pairs, seed=seed, max_draws=max_draws, bb_ratio=bb_ratio,
        tie_ratio=tie_ratio, dispersion=dispersion,
    )  # fmt: skip
    fit = checks.fit
    ds = fit.dataset
    static = checks.static()
    arena = checks.arena()
    cells, (cell_model, cell_item) = checks.cells()
    phi = arena.phi if arena is not None else float("nan")
    m = ds.n_models
    nan_m = np.full(m, np.nan)

    models = {"model": ds.models}
    items = pd.DataFrame(
        columns=["item", "source", "domain", "observed", "rep_mean", "rep_lo", "rep_hi",
                 "outside", "n_models", "ci"]
    )  # fmt: skip
    if static is not None:
        n_static = np.bincount(ds.static_model, minlength=m).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc_obs = np.bincount(ds.static_model, weights=ds.static_y, minlength=m) / n_static
            acc_rep = static.model_correct / n_static
        # accuracies are discrete: an interval end is an attainable value
        lo, hi = np.quantile(acc_rep, [(1 - ci) / 2, (1 + ci) / 2], axis=0, method="inverted_cdf")
        models.update(
            static_observed=acc_obs,
            static_rep_mean=acc_rep.mean(axis=0),
            static_rep_lo=lo,
            static_rep_hi=hi,
            static_outside=(acc_obs < lo) | (acc_obs > hi),
            n_static=n_static.astype(int),
        )
        sidx = ds.static_items
        n_q = np.bincount(ds.static_item, minlength=ds.n_items)[sidx].astype(np.float64)
        correct = np.bincount(ds.static_item, weights=ds.static_y, minlength=ds.n_items)[sidx]
        clo, chi = _hist_interval(static.item_hist, ci)
        counts = np.arange(m + 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rep_mean = (static.item_hist @ counts) / static.item_hist.sum(axis=1) / n_q
            items = pd.DataFrame(
                {
                    "item": ds.items[sidx],
                    "source": ds.item_source[sidx],
                    "domain": ds.item_domain[sidx],
                    "observed": correct / n_q,
                    "rep_mean": rep_mean,
                    "rep_lo": clo / n_q,
                    "rep_hi": chi / n_q,
                    "outside": (correct < clo) | (correct > chi),
                    "n_models": n_q.astype(int),
                    "ci": ci,
                }
            )
        cal_static = calibration_table(static.mean_p, ds.static_y)
    else:
        models.update(
            static_observed=nan_m, static_rep_mean=nan_m, static_rep_lo=nan_m,
            static_rep_hi=nan_m, static_outside=np.zeros(m, bool), n_static=np.zeros(m, int),
        )  # fmt: skip
        cal_static = calibration_table([], [])

    statistic = None
    if arena is not None:
        statistic = "mean_reward_z" if fit.arena == "reward" else "win_share"
        obs, reps = arena.model_observed, arena.model_reps
        lo, hi = np.quantile(reps, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
        models.update(
            arena_observed=obs,
            arena_rep_mean=reps.mean(axis=0),
            arena_rep_lo=lo,
            arena_rep_hi=hi,
            arena_outside=(obs < lo) | (obs > hi),
            n_arena=arena.model_count.astype(int),
        )
    else:
        models.update(
            arena_observed=nan_m, arena_rep_mean=nan_m, arena_rep_lo=nan_m,
            arena_rep_hi=nan_m, arena_outside=np.zeros(m, bool), n_arena=np.zeros(m, int),
        )  # fmt: skip
    if arena is not None and arena.pair_mean is not None:
        cal_arena = calibration_table(arena.pair_mean, fit.decisive.t)
    else:
        cal_arena = calibration_table([], [])
    models = pd.DataFrame(models)
    models["ci"] = ci

    has_static = models["n_static"].to_numpy() > 0
    has_arena = models["n_arena"].to_numpy() > 0
    out_static = models["static_outside"].to_numpy(bool)
    out_arena = models["arena_outside"].to_numpy(bool)

    def share(flags, mask):
        return float(flags[mask].mean()) if mask.any() else float("nan")

    flagged = int((cells["q_value"] < FLAG_Q).sum())
    draws_static = static.n_draws if static is not None else 0
    draws_arena = arena.n_draws if arena is not None else 0
    summary = {
        "ci": ci,
        "draws": max(draws_static, draws_arena),
        "draws_static": draws_static,
        "draws_arena": draws_arena,
        "replicates": max(static.n_rep if static is not None else 0, len(arena.model_reps)
                          if arena is not None else 0),
        "share_models_outside": share(out_static | out_arena, has_static | has_arena),
        "share_models_outside_static": share(out_static, has_static),
        "share_models_outside_arena": share(out_arena, has_arena),
        "share_items_outside": share(items["outside"].to_numpy(bool), np.ones(len(items), bool)),
        "calibration_error_static": calibration_error(cal_static),
        "calibration_error_arena": calibration_error(cal_arena),
        "arena_dispersion": float(phi),
        "arena_statistic": statistic,
        "cells": len(cells),
        "flagged_cells": flagged,
        "flag_q": FLAG_Q,
    }  # fmt: skip
    summary = {k: _nan_to_none(v) for k, v in summary.items()}
    return PPC(
        models=models,
        items=items,
        calibration_static=cal_static,
        calibration_arena=cal_arena,
        model_misfit=_misfit_table(cells, cell_model, {"model": ds.models}),
        item_misfit=_misfit_table(
            cells, cell_item, {"item": ds.items, "kind": ds.item_kind.astype(object)}
        ),
        anomalies=cells,
        summary=summary,
        checks=checks,
    )
