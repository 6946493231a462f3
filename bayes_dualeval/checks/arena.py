r"""One pass over the arena pairs: cell checks, prompt fit and per-model replicates.

An arena cell (pairs likelihood) counts the model's soft wins on the prompt,
:math:`W_{iq} = \sum t` over its decisive pairs (oriented to its side), against
:math:`\sum s` with :math:`s` the pair's win probability
(:func:`~bayes_dualeval.model.arena_term.win_probability`; Bradley-Terry:
:math:`\sigma(\theta_i - \theta_j)`). Replicated wins are treated as soft outcomes with
per-draw mean :math:`\sum s` and variance :math:`\phi \sum s(1 - s)`: :math:`\phi = 1` is
the binomial (hard win/loss) variance, and by default :math:`\phi` is estimated from the
arena cells (a Pearson dispersion), because soft targets scatter less than coin flips, and
per arena source, because rewards are normalised per source and reward models differ in
noise (:func:`dispersion_of`).

The cell's surprise is one-sided, in the direction of contamination (a model doing better
on the prompt than its ability predicts; DualEval's protocol plants it by adding 2.0 to the
z-score of a low-reward cell). Unit: the cell's soft wins :math:`W_{iq}`, on the scale of
its decisive pairs. Null: in each draw :math:`d`, :math:`W^{rep} \sim
N(E_d, \phi V_d)` with :math:`E_d = \sum s` and :math:`V_d = \sum s(1 - s)`;
``p_value`` :math:`= P(W^{rep} \ge W) = \operatorname{mean}_d
\Phi((E_d - W) / \sqrt{\phi V_d})` and ``p_lower`` :math:`= 1 -` ``p_value``. The
cells of a prompt share its pairs (one cell's win is another's loss), so their p-values are
negatively dependent: the cell table adjusts them by Benjamini-Yekutieli. A planted cell
inflates :math:`\phi` (estimated from the same cells), which makes every arena p-value
more conservative, not less.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from bayes_dualeval.checks.budget import PAIR_CHUNK_DRAWS, chunks, replicate_index
from bayes_dualeval.checks.cells import EPS, Cells
from bayes_dualeval.checks.fitted import Decisive, FittedRun
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.grouping import group_matrix

#: Smallest arena dispersion used (guards a degenerate estimate).
MIN_DISPERSION = 1e-3


@dataclass(frozen=True, eq=False)
class ArenaPass:
    """What one pass over the arena data gives (see :func:`arena_pass`)."""

    cells: Cells
    phi: float  # pooled dispersion (NaN under the reward likelihood)
    item_ppp: np.ndarray  # (Q,), NaN for non-arena items and prompts without cells
    rho: float  # overdispersion of prompt discrepancies
    model_observed: np.ndarray  # (M,)
    model_reps: np.ndarray  # (n_rep, M)
    model_count: np.ndarray  # (M,)
    pair_mean: np.ndarray | None  # (P,): posterior mean win probability of the first side
    n_draws: int


def dispersion_of(
    dec: Decisive, mean, var, binom, dispersion: float | None, source=None
) -> tuple[float, np.ndarray]:
    """The arena dispersion: given, or the Pearson (method-of-moments) estimate.

    Estimated per arena source when ``source`` (an integer code per cell) is given:
    rewards are normalised per source, and a noisier reward model scatters the soft
    targets of its prompts more, so one pooled value would make that source's p-values
    too small and the others' too large (on two simulated sources, one with extra reward
    noise, a pooled value gave 9.6% and 1.2% of clean cells ``p_value <= 0.05``).

    Returns
    -------
    phi : float
        The pooled estimate (or the given value), as reported.
    per_cell : numpy.ndarray, shape (cells,)
        The dispersion each cell uses: its source's estimate.
    """
    n = len(mean)
    if dispersion is not None:
        if not dispersion > 0:
            raise InputError(f"dispersion must be positive, got {dispersion}")
        return float(dispersion), np.full(n, float(dispersion))
    used = dec.n_cell > 0
    dev = np.where(used, (dec.observed - mean) ** 2 - var, 0.0)
    weight = np.where(used, binom, 0.0)
    pooled = _ratio(dev.sum(), weight.sum())
    if source is None:
        return pooled, np.full(n, pooled)
    k = int(source.max()) + 1 if n else 0
    num = np.bincount(source, weights=dev, minlength=k)
    den = np.bincount(source, weights=weight, minlength=k)
    per_source = np.array([_ratio(a, b, pooled) for a, b in zip(num, den, strict=True)])
    return pooled, per_source[source]


def _ratio(num: float, den: float, default: float = 1.0) -> float:
    """``num / den`` floored at :data:`MIN_DISPERSION`; ``default`` when ``den`` is 0."""
    return float(max(num / den, MIN_DISPERSION)) if den > 0 else default


def overdispersion(mean: np.ndarray, dof: np.ndarray, ok: np.ndarray) -> float:
    """``rho = sum (Dbar_q - k_q)^2 / sum 2 k_q`` over prompts ``ok``, floored at 1."""
    denom = 2.0 * dof[ok].sum()
    return max(1.0, float(((mean[ok] - dof[ok]) ** 2).sum() / denom)) if denom > 0 else 1.0


def arena_pass(fit: FittedRun, draws: np.ndarray, rng, dispersion: float | None) -> ArenaPass:
    """Arena cells, prompt fit and per-model replicates from one pass over the pairs.

    Pairs likelihood (and Bradley-Terry): for every draw, the expected soft wins
    ``E_d`` of each arena cell and their binomial variance ``V_d`` are computed once (the
    only step that touches every pair) and kept as (cells x draws) arrays; the dispersion,
    the cells' tail probabilities, the prompt discrepancies and the replicated win shares
    per model all follow from them.
    """
    ds = fit.dataset
    dec = fit.decisive
    n_cells, n_items, n_draw = len(ds.arena_z), ds.n_items, len(draws)
    expected = np.zeros((n_cells, n_draw), dtype=np.float32)
    variance = np.zeros((n_cells, n_draw), dtype=np.float32)
    pair_total = np.zeros(dec.n_pairs)
    done = 0
    if dec.n_pairs:
        # several draws at once: the sparse sums are faster per draw on wider blocks
        for d in chunks(draws, max(dec.n_pairs, n_cells), least=PAIR_CHUNK_DRAWS):
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
    source = pd.factorize(ds.item_source[ds.arena_item])[0]
    phi, phi_cell = dispersion_of(dec, mean, var, binom, dispersion, source)

    w = dec.observed
    used = dec.n_cell > 0
    to_item = group_matrix(ds.arena_item, n_items, weights=used)
    # a prompt's soft wins sum to its number of decisive pairs, observed and expected
    # alike: of its k cells' residuals only k - 1 are free
    dof = np.maximum(to_item @ np.ones(n_cells) - 1.0, 0.0)
    upper = np.zeros(n_cells)
    discrepancy = np.zeros((n_items, n_draw))
    for cols in chunks(np.arange(n_draw), n_cells):
        e = expected[:, cols].astype(np.float64)
        sd = np.sqrt(phi_cell[:, None] * np.clip(variance[:, cols], EPS, None))
        upper += special.ndtr((e - w[:, None]) / sd).sum(axis=1)
        discrepancy[:, cols] = to_item @ (((w[:, None] - e) / sd) ** 2)
    upper /= max(n_draw, 1)
    sd = np.sqrt(phi_cell * binom + var)
    resid = np.where(used, (w - mean) / np.where(used, np.maximum(sd, EPS), 1), 0)
    cells = Cells(
        model=ds.arena_model,
        item=ds.arena_item,
        observed=w,
        expected=mean,
        residual=resid,
        p_value=np.where(used, np.clip(upper, 0.0, 1.0), 1.0),
        p_lower=np.where(used, np.clip(1.0 - upper, 0.0, 1.0), 1.0),
        used=used,
    )
    item_ppp, rho = prompt_ppp(fit, discrepancy, dof)

    to_model = group_matrix(ds.arena_model, ds.n_models)
    count = to_model @ dec.n_cell.astype(np.float64)
    observed = to_model @ w
    rep = replicate_index(np.arange(n_draw))
    m_mean = (to_model @ expected.astype(np.float64))[:, rep].T
    m_var = (to_model @ (phi_cell[:, None] * variance.astype(np.float64)))[:, rep].T
    reps = m_mean + np.sqrt(m_var) * rng.standard_normal(m_mean.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ArenaPass(
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


def prompt_ppp(fit: FittedRun, discrepancy: np.ndarray, dof: np.ndarray) -> tuple:
    """Prompt fit ``mean_draws P(rho chi2_{k / rho} >= D)`` from (Q x draws) discrepancies."""
    arena = np.zeros(fit.dataset.n_items, dtype=bool)
    arena[fit.dataset.arena_items] = True
    ok = arena & (dof > 0)
    rho = overdispersion(discrepancy.mean(axis=1), dof, ok)
    k = np.maximum(dof, 1.0) / rho
    out = np.full(fit.dataset.n_items, np.nan)
    out[ok] = special.chdtrc(k[ok, None], discrepancy[ok] / rho).mean(axis=1)
    return out, rho
