r"""Item table, posterior-predictive checks and surprising cells of a fitted run.

Three public entry points, all reading an :class:`arviz.InferenceData` from
:func:`bayes_dualeval.run.fit` (or :func:`bayes_dualeval.run.load_run`) together with the
:class:`~bayes_dualeval.dataset.Dataset` it was fitted to:

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
and processed in chunks of draws (at most :data:`CHUNK_ELEMENTS` numbers per array).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse, special, stats

from bayes_dualeval.dataset import Dataset
from bayes_dualeval.distill import DEFAULT_BB_RATIO, DEFAULT_TIE_RATIO, Pairs, distill
from bayes_dualeval.errors import InputError
from bayes_dualeval.summaries import draws_of, interval

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
CHUNK_ELEMENTS = 2_000_000
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


def _expit(x):
    return special.expit(x)


def _log_expit(x):
    return -np.logaddexp(0.0, -x)


def _incidence(rows: np.ndarray, n_cols: int, weights=None) -> sparse.csr_array:
    """Sparse (len(rows), n_cols) matrix with ``weights`` (default 1) at ``(k, rows[k])``."""
    n = len(rows)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    return sparse.csr_array((w, (np.arange(n), rows)), shape=(n, n_cols))


def _group_sum(values: np.ndarray, matrix: sparse.csr_array) -> np.ndarray:
    """``values @ matrix`` for dense (k, n) values and a sparse (n, g) matrix: (k, g)."""
    return np.asarray(matrix.T @ values.T).T


def _select_draws(n: int, max_draws: int, rng: np.random.Generator) -> np.ndarray:
    """All draws, or a seeded random subset of ``max_draws`` of them (sorted)."""
    if max_draws < 1:
        raise InputError(f"max_draws must be at least 1, got {max_draws}")
    if n <= max_draws:
        return np.arange(n)
    return np.sort(rng.choice(n, size=max_draws, replace=False))


def _replicate_index(draws: np.ndarray) -> np.ndarray:
    """Draw index of each replicated data set: every draw, repeated to reach the minimum."""
    reps = max(1, math.ceil(MIN_REPLICATES / len(draws)))
    return np.repeat(draws, reps)


def _chunks(index: np.ndarray, n_cols: int):
    width = max(1, CHUNK_ELEMENTS // max(n_cols, 1))
    for start in range(0, len(index), width):
        yield index[start : start + width]


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
    """Decisive arena pairs and the sparse maps from pairs to cells and from cells up."""

    row_i: np.ndarray
    row_j: np.ndarray
    i: np.ndarray
    j: np.ndarray
    item: np.ndarray
    t: np.ndarray
    to_cell_i: sparse.csr_array  # (P, R): pair -> its first side's cell
    to_cell_j: sparse.csr_array  # (P, R): pair -> its second side's cell
    n_cell: np.ndarray  # decisive pairs per arena cell
    observed: np.ndarray  # soft wins per arena cell

    @property
    def n_pairs(self) -> int:
        return len(self.t)


@dataclass(frozen=True, eq=False)
class _Fit:
    """Posterior draws (chains pooled, float64) and the data, checked against each other."""

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

    def eta(self, d: np.ndarray, model: np.ndarray, item: np.ndarray) -> np.ndarray:
        """Success log-odds ``a (theta - b)`` of cells, shape (len(d), len(model))."""
        x = self.theta[d][:, model] - self.b[d][:, item]
        if self.a is not None:
            x *= self.a[d][:, item]
        return x

    def pair_prob(self, d: np.ndarray) -> np.ndarray:
        """Win probability of the first side of every decisive pair, (len(d), P)."""
        dec = self.decisive
        if self.arena == "bt":
            x = self.theta[d][:, dec.i] - self.theta[d][:, dec.j]
        else:
            ds = self.dataset
            p = _expit(self.eta(d, ds.arena_model, ds.arena_item))
            x = self.gamma[d][:, None] * (p[:, dec.row_i] - p[:, dec.row_j])
        return _expit(x)


def _var(idata, name: str) -> np.ndarray | None:
    if name not in idata.posterior:
        return None
    return draws_of(idata, name).astype(np.float64)


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
            if name in observed and len(observed[name]) != len(values):
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
        decisive = _Decisive(
            row_i=ri,
            row_j=rj,
            i=pairs.i[keep].astype(np.int64),
            j=pairs.j[keep].astype(np.int64),
            item=pairs.item[keep].astype(np.int64),
            t=t,
            to_cell_i=_incidence(ri, n_rows),
            to_cell_j=_incidence(rj, n_rows),
            n_cell=np.bincount(ri, minlength=n_rows) + np.bincount(rj, minlength=n_rows),
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
    upper: np.ndarray  # P(replicate >= observed)
    lower: np.ndarray  # P(replicate <= observed)
    used: np.ndarray  # cells that enter the table (bool)


def _static_cells(fit: _Fit, draws: np.ndarray) -> _Cells:
    ds = fit.dataset
    y = ds.static_y.astype(np.float64)
    total = np.zeros(len(y))
    for d in _chunks(draws, len(y)):
        total += _expit(fit.eta(d, ds.static_model, ds.static_item)).sum(axis=0)
    mean = total / len(draws)
    sd = np.sqrt(np.clip(mean * (1.0 - mean), _EPS, None))
    return _Cells(
        model=ds.static_model,
        item=ds.static_item,
        observed=y,
        expected=mean,
        residual=(y - mean) / sd,
        upper=np.where(y > 0, mean, 1.0),
        lower=np.where(y > 0, 1.0, 1.0 - mean),
        used=np.ones(len(y), dtype=bool),
    )


def _pair_moments(fit: _Fit, draws: np.ndarray) -> dict:
    """Per arena cell, over draws: mean and variance of expected wins, mean binomial var."""
    dec = fit.decisive
    n_cells = len(fit.dataset.arena_z)
    s1 = np.zeros(n_cells)
    s2 = np.zeros(n_cells)
    sv = np.zeros(n_cells)
    cols = max(dec.n_pairs, n_cells)
    for d in _chunks(draws, cols):
        e, v = _pair_cell_stats(fit, d)
        s1 += e.sum(axis=0)
        s2 += (e**2).sum(axis=0)
        sv += v.sum(axis=0)
    n = len(draws)
    mean = s1 / n
    return {"mean": mean, "var": np.clip(s2 / n - mean**2, 0.0, None), "binom": sv / n}


def _pair_cell_stats(fit: _Fit, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected wins and binomial variance of every arena cell in draws ``d``: (k, R) each."""
    dec = fit.decisive
    s = fit.pair_prob(d)
    e = _group_sum(s, dec.to_cell_i) + _group_sum(1.0 - s, dec.to_cell_j)
    sv = s * (1.0 - s)
    v = _group_sum(sv, dec.to_cell_i) + _group_sum(sv, dec.to_cell_j)
    return e, v


def _dispersion(fit: _Fit, moments: dict, dispersion: float | None) -> float:
    """The arena dispersion: given, or the Pearson (method-of-moments) estimate."""
    if dispersion is not None:
        if not dispersion > 0:
            raise InputError(f"dispersion must be positive, got {dispersion}")
        return float(dispersion)
    used = fit.decisive.n_cell > 0
    denom = moments["binom"][used].sum()
    if denom <= 0:
        return 1.0
    dev = (fit.decisive.observed - moments["mean"]) ** 2 - moments["var"]
    return float(max(dev[used].sum() / denom, MIN_DISPERSION))


def _arena_pair_cells(fit: _Fit, draws: np.ndarray, phi: float, moments: dict) -> _Cells:
    dec = fit.decisive
    ds = fit.dataset
    w = dec.observed
    upper = np.zeros(len(w))
    cols = max(dec.n_pairs, len(w))
    for d in _chunks(draws, cols):
        e, v = _pair_cell_stats(fit, d)
        upper += special.ndtr((e - w) / np.sqrt(phi * np.clip(v, _EPS, None))).sum(axis=0)
    upper /= len(draws)
    used = dec.n_cell > 0
    sd = np.sqrt(phi * moments["binom"] + moments["var"])
    resid = np.where(used, (w - moments["mean"]) / np.where(used, np.maximum(sd, _EPS), 1), 0)
    return _Cells(
        model=ds.arena_model,
        item=ds.arena_item,
        observed=w,
        expected=moments["mean"],
        residual=resid,
        upper=np.where(used, upper, 1.0),
        lower=np.where(used, 1.0 - upper, 1.0),
        used=used,
    )


def _reward_stats(fit: _Fit, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reward likelihood: per-cell mean and residual sd in draws ``d``, (k, R) each."""
    ds = fit.dataset
    item = ds.arena_item
    to_item = _incidence(item, ds.n_items)
    n_q = np.bincount(item, minlength=ds.n_items).astype(np.float64)
    z = ds.arena_z.astype(np.float64)
    zbar = np.bincount(item, weights=z, minlength=ds.n_items) / np.maximum(n_q, 1)
    p = _expit(fit.eta(d, ds.arena_model, item))
    pbar = _group_sum(p, to_item) / np.maximum(n_q, 1)
    mu = zbar[item] + fit.gamma[d][:, None] * (p - pbar[:, item])
    sd = fit.sigma[d][:, None] * np.sqrt(1.0 - 1.0 / n_q[item])
    return mu, sd


def _arena_reward_cells(fit: _Fit, draws: np.ndarray) -> _Cells:
    ds = fit.dataset
    z = ds.arena_z.astype(np.float64)
    s1 = np.zeros(len(z))
    s2 = np.zeros(len(z))
    sv = np.zeros(len(z))
    upper = np.zeros(len(z))
    for d in _chunks(draws, len(z)):
        mu, sd = _reward_stats(fit, d)
        s1 += mu.sum(axis=0)
        s2 += (mu**2).sum(axis=0)
        sv += (sd**2).sum(axis=0)
        upper += special.ndtr((mu - z) / np.maximum(sd, _EPS)).sum(axis=0)
    n = len(draws)
    mean = s1 / n
    var = np.clip(s2 / n - mean**2, 0.0, None) + sv / n
    upper /= n
    return _Cells(
        model=ds.arena_model,
        item=ds.arena_item,
        observed=z,
        expected=mean,
        residual=(z - mean) / np.sqrt(np.maximum(var, _EPS)),
        upper=upper,
        lower=1.0 - upper,
        used=np.ones(len(z), dtype=bool),
    )


def _all_cells(fit: _Fit, draws: np.ndarray, dispersion: float | None):
    """Cell checks of every kind fitted, and the arena dispersion used (NaN if none)."""
    parts = {}
    phi = np.nan
    if fit.use_static:
        parts["static"] = _static_cells(fit, draws)
    if fit.arena in ("pairs", "bt"):
        moments = _pair_moments(fit, draws)
        phi = _dispersion(fit, moments, dispersion)
        parts["arena"] = _arena_pair_cells(fit, draws, phi, moments)
    elif fit.arena == "reward":
        parts["arena"] = _arena_reward_cells(fit, draws)
    return parts, phi


def _cell_table(fit: _Fit, parts: dict) -> pd.DataFrame:
    ds = fit.dataset
    frames = []
    for kind, c in parts.items():
        u = c.used
        ppp = np.minimum(c.upper[u], c.lower[u])
        frames.append(
            pd.DataFrame(
                {
                    "model": ds.models[c.model[u]],
                    "item": ds.items[c.item[u]],
                    "kind": kind,
                    "observed": c.observed[u],
                    "expected": c.expected[u],
                    "residual": c.residual[u],
                    "ppp": ppp,
                    "p_value": np.minimum(1.0, 2.0 * ppp),
                }
            )
        )
    columns = ["model", "item", "kind", "observed", "expected", "residual", "ppp", "p_value"]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    table["q_value"] = bh_qvalues(table["p_value"].to_numpy(dtype=np.float64))
    order = np.lexsort(
        (-np.abs(table["residual"].to_numpy(dtype=np.float64)), table["p_value"].to_numpy())
    )
    return table.iloc[order].reset_index(drop=True)


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
        The run's posterior (:attr:`FitResult.idata` or :func:`~bayes_dualeval.run.load_run`).
    dataset : Dataset
        The data the run was fitted to (restricted to the fitted kinds if it holds more).
    pairs : Pairs, optional
        The run's distilled arena pairs (:attr:`FitResult.pairs`); recomputed with
        ``bb_ratio`` and ``tie_ratio`` when not given.
    seed : int
        Seed of the :class:`numpy.random.Generator` that picks the draws used when the run
        has more than ``max_draws``.
    max_draws : int
        Largest number of posterior draws used.
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
    rng = np.random.default_rng(seed)
    fit = _resolve(idata, dataset, pairs, bb_ratio, tie_ratio)
    draws = _select_draws(fit.n_draws, max_draws, rng)
    parts, phi = _all_cells(fit, draws, dispersion)
    table = _cell_table(fit, parts)
    table.attrs["arena_dispersion"] = phi
    return table


# ----------------------------------------------------------------------------- items
@dataclass(frozen=True, eq=False)
class _StaticReplicates:
    """What replicated static data sets give (see :func:`_static_replicates`)."""

    item_ppp: np.ndarray  # (Q,), NaN for non-static items
    item_hist: np.ndarray  # (Q_static, M + 1): replicated correct counts per static item
    model_correct: np.ndarray  # (n_rep, M): replicated correct answers per model
    mean_p: np.ndarray  # (S,): posterior mean of p over the replicates' draws
    n_rep: int


def _static_replicates(fit: _Fit, rep: np.ndarray, rng: np.random.Generator):
    """Replicate static labels once per entry of ``rep`` (a draw index).

    Gives the deviance item-fit ppp (mid-p: ``P(D_rep > D_obs) + P(D_rep = D_obs) / 2``
    with ``D = -2 log p(y | theta)`` summed over the item's cells), histograms of
    replicated correct counts per static item, replicated correct counts per model and
    the posterior mean of each cell's ``p``.
    """
    ds = fit.dataset
    y = ds.static_y.astype(np.float64)
    n_items, n_models = ds.n_items, ds.n_models
    static_items = ds.static_items
    col = np.full(n_items, -1)
    col[static_items] = np.arange(len(static_items))
    to_item = _incidence(ds.static_item, n_items)
    to_model = _incidence(ds.static_model, n_models)
    greater = np.zeros(n_items)
    equal = np.zeros(n_items)
    hist = np.zeros(len(static_items) * (n_models + 1), dtype=np.int64)
    model_correct = np.zeros((len(rep), n_models))
    total_p = np.zeros(len(y))
    done = 0
    for d in _chunks(rep, len(y)):
        eta = fit.eta(d, ds.static_model, ds.static_item)
        log_p, log_q = _log_expit(eta), _log_expit(-eta)
        p = np.exp(log_p)
        total_p += p.sum(axis=0)
        y_rep = rng.random(eta.shape) < p
        ll_obs = _group_sum(y * log_p + (1.0 - y) * log_q, to_item)
        ll_rep = _group_sum(np.where(y_rep, log_p, log_q), to_item)
        tol = 1e-9 * (1.0 + np.abs(ll_obs))
        greater += (ll_rep < ll_obs - tol).sum(axis=0)
        equal += (np.abs(ll_rep - ll_obs) <= tol).sum(axis=0)
        counts = _group_sum(y_rep.astype(np.float64), to_item)[:, static_items]
        key = np.arange(len(static_items)) * (n_models + 1) + np.rint(counts).astype(np.int64)
        hist += np.bincount(key.ravel(), minlength=hist.size)
        model_correct[done : done + len(d)] = _group_sum(y_rep.astype(np.float64), to_model)
        done += len(d)
    n_rep = len(rep)
    ppp = np.full(n_items, np.nan)
    ppp[static_items] = ((greater + 0.5 * equal) / n_rep)[static_items]
    return _StaticReplicates(
        item_ppp=ppp,
        item_hist=hist.reshape(len(static_items), n_models + 1),
        model_correct=model_correct,
        mean_p=total_p / n_rep,
        n_rep=n_rep,
    )


def _arena_discrepancies(fit: _Fit, draws: np.ndarray, cells: _Cells, phi: float):
    """Degrees of freedom per item and, chunk by chunk, each prompt's discrepancy.

    Pairs: ``D = sum (W - E_d)^2 / (phi V_d)`` over the prompt's cells with decisive pairs,
    ``k`` their number (replicated cells: independent normal soft-win counts). Reward:
    ``D`` is the sum of squared within-prompt residuals over ``sigma_d^2``, ``k = n_q - 1``.
    Returns ``(k, chunks)`` with ``chunks`` yielding arrays of shape (chunk, Q).
    """
    ds = fit.dataset
    n_items = ds.n_items
    if fit.arena == "reward":
        z = ds.arena_z.astype(np.float64)
        to_item = _incidence(ds.arena_item, n_items)
        n_q = np.bincount(ds.arena_item, minlength=n_items).astype(np.float64)
        dof = np.maximum(n_q - 1.0, 0.0)

        def chunks():
            for d in _chunks(draws, len(z)):
                mu, sd = _reward_stats(fit, d)
                # sd = sigma sqrt(1 - 1/n) is the residual's own sd
                scaled = ((z - mu) / np.maximum(sd, _EPS)) ** 2
                yield _group_sum(scaled, to_item) * dof / np.maximum(n_q, 1.0)

        return dof, chunks()
    dec = fit.decisive
    used = cells.used.astype(np.float64)
    to_item = _incidence(ds.arena_item, n_items, weights=used)
    dof = np.bincount(ds.arena_item, weights=used, minlength=n_items)
    w = dec.observed

    def chunks():
        for d in _chunks(draws, max(dec.n_pairs, len(w))):
            e, v = _pair_cell_stats(fit, d)
            yield _group_sum((w - e) ** 2 / (phi * np.clip(v, _EPS, None)), to_item)

    return dof, chunks()


def _arena_item_ppp(
    fit: _Fit, draws: np.ndarray, cells: _Cells, phi: float
) -> tuple[np.ndarray, float]:
    """Arena prompt fit: ``mean_draws P(rho chi2_{k / rho} >= D)`` (see ``docs/outputs.md``).

    ``D`` has mean ``k`` under the model, but prompts differ in how noisy their rewards are,
    which spreads ``D`` more than ``chi2_k`` would. ``rho >= 1`` (Satterthwaite) matches
    the spread seen across prompts: ``rho = sum (Dbar_q - k_q)^2 / sum 2 k_q`` with
    ``Dbar_q`` the posterior mean discrepancy, floored at 1 (never more liberal than
    ``chi2_k``). Returns the ppp per item (NaN for non-arena items and prompts without
    cells to compare) and ``rho`` (NaN without arena data).
    """
    n_items = fit.dataset.n_items
    out = np.full(n_items, np.nan)
    if fit.arena is None:
        return out, float("nan")
    arena = np.zeros(n_items, dtype=bool)
    arena[fit.dataset.arena_items] = True
    dof, chunks = _arena_discrepancies(fit, draws, cells, phi)
    mean = sum(c.sum(axis=0) for c in chunks) / len(draws)
    ok = arena & (dof > 0)
    denom = 2.0 * dof[ok].sum()
    rho = max(1.0, float(((mean[ok] - dof[ok]) ** 2).sum() / denom)) if denom > 0 else 1.0
    _, chunks = _arena_discrepancies(fit, draws, cells, phi)
    k = np.maximum(dof, 1.0) / rho
    total = sum(stats.chi2.sf(c / rho, k).sum(axis=0) for c in chunks)
    out[ok] = (total / len(draws))[ok]
    return out, rho


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
        Largest number of posterior draws used for the fit checks (the parameter
        summaries use every draw).
    bb_ratio, tie_ratio : float
        Distillation quantiles when ``pairs`` is recomputed.
    dispersion : float, optional
        Arena dispersion (see :func:`anomalies`).

    Returns
    -------
    pandas.DataFrame
        Columns ``item, kind, source, domain, b_mean, b_lo, b_hi, a_mean, a_lo, a_hi,
        observed, n_models, information, ppp, flags, ci``, items in dataset order. ``b`` is
        on the leaderboard's scale (abilities centred to mean zero in every draw). Under
        ``irt = "1pl"`` the ``a`` columns are exactly 1; in Bradley-Terry runs ``a``, ``b``
        and ``information`` are NaN. With a single draw (MAP) the interval columns and
        ``ci`` are NaN (also under 1pl). ``observed`` is the static accuracy or the
        prompt's mean normalised reward. ``information`` is the posterior mean of ``a^2 p
        (1 - p)`` at the median ability of each draw. ``ppp`` is the item-fit posterior
        predictive p-value (static: mid-p of the deviance across models; arena: Pearson
        discrepancy of the cells), small when the item is fitted worse than replicated data
        would be. ``flags`` joins ``no_signal``, ``low_discrimination`` and ``misfit`` with
        ``;`` (see ``docs/outputs.md`` for the thresholds). Read the column as
        ``table["flags"]`` (``table.flags`` is a pandas attribute). ``attrs`` holds
        ``arena_dispersion`` and ``arena_item_overdispersion`` (NaN without arena data).

    Examples
    --------
    >>> items = item_table(result.idata, result.dataset, pairs=result.pairs)  # doctest: +SKIP
    >>> items[items["flags"].str.contains("misfit")]  # doctest: +SKIP
    """
    rng = np.random.default_rng(seed)
    fit = _resolve(idata, dataset, pairs, bb_ratio, tie_ratio)
    ds = fit.dataset
    n = fit.n_draws
    nan_q = np.full(ds.n_items, np.nan)
    b_mean = b_lo = b_hi = a_mean = a_lo = a_hi = info = nan_q
    if fit.b is not None:
        b = fit.b - fit.theta.mean(axis=1, keepdims=True)
        b_mean = b.mean(axis=0)
        b_lo, b_hi = interval(b, ci)
        a = fit.a if fit.a is not None else np.ones_like(b)
        a_mean = a.mean(axis=0)
        a_lo, a_hi = interval(a, ci)
        mid = np.median(fit.theta, axis=1, keepdims=True)
        eta = a * (mid - fit.b)
        info = (a**2 * _expit(eta) * _expit(-eta)).mean(axis=0)

    draws = _select_draws(n, max_draws, rng)
    ppp = nan_q.copy()
    phi = rho = float("nan")
    if fit.use_static:
        rep = _static_replicates(fit, _replicate_index(draws), rng)
        ppp = np.where(np.isnan(rep.item_ppp), ppp, rep.item_ppp)
    if fit.arena is not None:
        parts, phi = _all_cells(fit, draws, dispersion)
        arena_ppp, rho = _arena_item_ppp(fit, draws, parts["arena"], phi)
        arena = ds.item_kind == "arena"
        ppp[arena] = arena_ppp[arena]

    frame = ds.item_frame()
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
    flags = np.char.add(
        np.char.add(
            np.where(no_signal, "no_signal;", ""), np.where(low, "low_discrimination;", "")
        ),
        np.where(misfit, "misfit;", ""),
    )
    flags = np.char.rstrip(flags, ";").astype(object)
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
            "n_models": frame["n_models"].to_numpy(),
            "information": info,
            "ppp": ppp,
            "flags": flags,
            "ci": ci if n > 1 else np.nan,
        }
    )
    table.attrs.update(arena_dispersion=phi, arena_item_overdispersion=rho)
    return table


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
    """

    models: pd.DataFrame
    items: pd.DataFrame
    calibration_static: pd.DataFrame
    calibration_arena: pd.DataFrame
    model_misfit: pd.DataFrame
    item_misfit: pd.DataFrame
    anomalies: pd.DataFrame
    summary: dict


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


def _misfit_table(cells: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    flagged = cells["q_value"] < FLAG_Q
    grouped = cells.assign(flagged=flagged, abs_residual=cells["residual"].abs()).groupby(
        by, sort=False
    )
    table = grouped.agg(
        n_cells=("flagged", "size"),
        n_flagged=("flagged", "sum"),
        mean_abs_residual=("abs_residual", "mean"),
        min_ppp=("ppp", "min"),
    ).reset_index()
    table["n_flagged"] = table["n_flagged"].astype(int)
    table.insert(len(by) + 2, "share_flagged", table["n_flagged"] / table["n_cells"])
    order = np.lexsort((table["min_ppp"].to_numpy(), -table["n_flagged"].to_numpy()))
    return table.iloc[order].reset_index(drop=True)


def _arena_model_replicates(fit: _Fit, draws: np.ndarray, rng, phi: float):
    """Observed and replicated arena statistic per model: (observed (M,), reps (n, M), n)."""
    ds = fit.dataset
    m = ds.n_models
    rep = _replicate_index(draws)
    to_model = _incidence(ds.arena_model, m)
    out = np.zeros((len(rep), m))
    if fit.arena == "reward":
        z = ds.arena_z.astype(np.float64)
        count = np.bincount(ds.arena_model, minlength=m).astype(np.float64)
        observed = np.bincount(ds.arena_model, weights=z, minlength=m)
        done = 0
        for d in _chunks(rep, len(z)):
            mu, sd = _reward_stats(fit, d)
            sim = mu + sd * rng.standard_normal(mu.shape)
            out[done : done + len(d)] = _group_sum(sim, to_model)
            done += len(d)
    else:
        dec = fit.decisive
        count = np.bincount(ds.arena_model, weights=dec.n_cell, minlength=m).astype(np.float64)
        observed = np.bincount(ds.arena_model, weights=dec.observed, minlength=m)
        done = 0
        for d in _chunks(rep, max(dec.n_pairs, len(dec.observed))):
            e, v = _pair_cell_stats(fit, d)
            mean, var = _group_sum(e, to_model), _group_sum(v, to_model)
            out[done : done + len(d)] = mean + np.sqrt(phi * var) * rng.standard_normal(mean.shape)
            done += len(d)
    with np.errstate(invalid="ignore", divide="ignore"):
        return observed / count, out / count, count


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
        Largest number of posterior draws used; at least :data:`MIN_REPLICATES` replicated
        data sets are drawn (several per draw for short runs; for MAP it is a plug-in
        check at the point estimate).
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
        ``flag_q``, ``draws``, ``replicates`` and ``ci``.

    Examples
    --------
    >>> ppc = posterior_predictive(result.idata, result.dataset, result.pairs)  # doctest: +SKIP
    >>> ppc.summary["share_models_outside"]  # doctest: +SKIP
    """
    rng = np.random.default_rng(seed)
    fit = _resolve(idata, dataset, pairs, bb_ratio, tie_ratio)
    ds = fit.dataset
    draws = _select_draws(fit.n_draws, max_draws, rng)
    parts, phi = _all_cells(fit, draws, dispersion)
    cells = _cell_table(fit, parts)
    cells.attrs["arena_dispersion"] = phi
    m = ds.n_models
    nan_m = np.full(m, np.nan)

    models = {"model": ds.models}
    items = pd.DataFrame(
        columns=["item", "source", "domain", "observed", "rep_mean", "rep_lo", "rep_hi",
                 "outside", "n_models", "ci"]
    )  # fmt: skip
    n_rep = len(_replicate_index(draws))
    if fit.use_static:
        rep = _static_replicates(fit, _replicate_index(draws), rng)
        n_static = np.bincount(ds.static_model, minlength=m).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc_obs = np.bincount(ds.static_model, weights=ds.static_y, minlength=m) / n_static
            acc_rep = rep.model_correct / n_static
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
        clo, chi = _hist_interval(rep.item_hist, ci)
        counts = np.arange(m + 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rep_mean = (rep.item_hist @ counts) / rep.item_hist.sum(axis=1) / n_q
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
        cal_static = calibration_table(rep.mean_p, ds.static_y)
    else:
        models.update(
            static_observed=nan_m, static_rep_mean=nan_m, static_rep_lo=nan_m,
            static_rep_hi=nan_m, static_outside=np.zeros(m, bool), n_static=np.zeros(m, int),
        )  # fmt: skip
        cal_static = calibration_table([], [])

    statistic = None
    if fit.arena is not None:
        statistic = "mean_reward_z" if fit.arena == "reward" else "win_share"
        obs, reps, count = _arena_model_replicates(fit, draws, rng, phi)
        lo, hi = np.quantile(reps, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
        models.update(
            arena_observed=obs,
            arena_rep_mean=reps.mean(axis=0),
            arena_rep_lo=lo,
            arena_rep_hi=hi,
            arena_outside=(obs < lo) | (obs > hi),
            n_arena=count.astype(int),
        )
    else:
        models.update(
            arena_observed=nan_m, arena_rep_mean=nan_m, arena_rep_lo=nan_m,
            arena_rep_hi=nan_m, arena_outside=np.zeros(m, bool), n_arena=np.zeros(m, int),
        )  # fmt: skip
    if fit.arena in ("pairs", "bt"):
        total = np.zeros(fit.decisive.n_pairs)
        for d in _chunks(draws, max(fit.decisive.n_pairs, 1)):
            total += fit.pair_prob(d).sum(axis=0)
        cal_arena = calibration_table(total / len(draws), fit.decisive.t)
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
    summary = {
        "ci": ci,
        "draws": len(draws),
        "replicates": n_rep,
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
    }
    summary = {k: _nan_to_none(v) for k, v in summary.items()}
    return PPC(
        models=models,
        items=items,
        calibration_static=cal_static,
        calibration_arena=cal_arena,
        model_misfit=_misfit_table(cells, ["model"]),
        item_misfit=_misfit_table(cells, ["item", "kind"]),
        anomalies=cells,
        summary=summary,
    )
