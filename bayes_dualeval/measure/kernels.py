r"""Compiled log likelihoods of new models' responses on their grids, per bank draw.

:func:`~bayes_dualeval.measure.grid.loglik` evaluates, for every new model ``k``, grid
point ``g`` and bank draw ``d``, the log likelihood of the model's static labels and arena
pairs. That is the whole cost of a score (tens of new models x thousands of pairs x 49
points x hundreds of draws), so it is written for the machine:

* **model-major, padded layout** (:class:`Layout`): each new model's labels, prompts and
  pairs are rows of ``(K, n_max)`` arrays (padding has weight 0), so a model's sum is a
  dense reduction over one axis, fused with the arithmetic, not a scatter;
* **on the device once**: the layout and the bank's draws are transferred when the layout
  is built; a chunk of draws passes only its draw indices;
* **one log-sigmoid per decisive pair**: the soft-label term
  (:func:`~bayes_dualeval.model.arena_term.pair`)
  :math:`t \log s(x) + (1 - t) \log s(-x) = \log s(x) - (1 - t) x` with
  :math:`x = \gamma (p_{kq} - p_{jq})` is linear in :math:`p_{kq}` apart from
  :math:`\log s(x)`, so its linear part and the both-bad term
  :math:`\lambda_{bb} w \log(1 - p_{kq})` are sums over the model's prompts (a few
  thousand cells, not tens of thousands of pairs), weighted by per-prompt totals of the
  pair weights, as the fit's ``pair_linear`` and ``bb_count`` do. Measured on 40 new
  models x 1,919 pairs x 49 points on this CPU: the per-pair loop with the linear part in
  it cost 14 ns per pair and grid point, without it 5; the new model's probability is
  recomputed in each pair rather than gathered from its prompt (a gather inside the fused
  loop cost 10).

Equal to the term-by-term sums up to float32 rounding (``tests/test_score.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from bayes_dualeval.measure import judged
from bayes_dualeval.measure.bank import shift
from bayes_dualeval.model import arena_term, graders, links
from bayes_dualeval.model.arena_term import ArenaTerm
from bayes_dualeval.model.facets import Facets
from bayes_dualeval.model.facets import scores as facet_scores

#: Largest number of (draws x rows x grid points) one compiled call evaluates.
CHUNK = 16_000_000


def padded_rows(group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Model-major layout of rows grouped by ``group``: ``(index, mask)``, each (K, n_max).

    ``index[k, r]`` is the ``r``-th row of group ``k`` (0 where padded), ``mask`` 1 there
    and 0 in the padding.
    """
    group = np.asarray(group, dtype=np.int64)
    counts = np.bincount(group, minlength=n_groups)
    width = max(int(counts.max()) if len(group) else 0, 1)
    order = np.argsort(group, kind="stable")
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    slot = np.arange(len(group)) - starts[group[order]]
    index = np.zeros((n_groups, width), dtype=np.int64)
    mask = np.zeros((n_groups, width), dtype=np.float32)
    index[group[order], slot] = order
    mask[group[order], slot] = 1.0
    return index, mask


@dataclass(frozen=True)
class Layout:
    """The new models' responses in model-major padded arrays, on the device.

    Built by :func:`layout`. ``static_*`` are (K, S_max), ``pair_*`` the decisive pairs
    (K, P_max), ``cell_*`` the (new model, prompt) cells of the pairs with the summed
    weights of their linear and both-bad terms (K, R_max); padding has zero weight.
    ``draws`` holds the bank's draws of ``theta``, ``b``, ``a``, ``c``, ``d``, ``gamma``
    and ``centre`` (the leaderboard's zero), absent sites None (``gamma`` where no pair
    reads it). ``arena`` is the bank's arena likelihood, whose weights ``pair_*`` and
    ``cell_*`` already hold.

    Where the bank's arena has facets (``facets``: judges, family biases, style), the
    cells' scores are :func:`~bayes_dualeval.model.facets.scores`: ``pair_judge``,
    ``pair_style`` and ``pair_other_style`` (K, P_max, C), ``pair_other_family`` say the
    judge of each pair and both sides' covariates and the bank model's family,
    ``cell_judge`` and ``cell_style`` the same of each cell, ``model_family`` (K,) each
    new model's family; ``draws`` then holds ``gamma_judge``, ``judge_bias`` and
    ``style_coef`` too (None where the bank has no such facet). Without facets these
    arrays are zeros, with no covariate.

    Where the bank's static labels were graded by several judges, ``static_grader``
    (K, S_max) is each label's grader and ``draws["grader_severity"]`` their severities
    (:mod:`bayes_dualeval.model.graders`); otherwise zeros and None.
    """

    static_item: jax.Array
    static_y: jax.Array
    static_n: jax.Array
    cell_item: jax.Array
    cell_linear: jax.Array
    cell_both_bad: jax.Array
    pair_item: jax.Array
    pair_other: jax.Array
    pair_weight: jax.Array
    pair_linear: jax.Array
    pair_judge: jax.Array
    pair_style: jax.Array
    pair_other_family: jax.Array
    pair_other_style: jax.Array
    cell_judge: jax.Array
    cell_style: jax.Array
    model_family: jax.Array
    static_grader: jax.Array
    draws: dict
    has_static: bool
    has_pairs: bool
    arena: ArenaTerm
    facets: bool = False


def layout(bank, resp, pairs) -> Layout:
    """The :class:`Layout` of ``resp`` and its arena ``pairs`` against ``bank``.

    Parameters
    ----------
    bank : Bank
    resp : Responses
    pairs : ArenaPairs or None
        From :func:`~bayes_dualeval.measure.grid.arena_pairs`; None leaves the arena out.
    """
    k = resp.n_models
    s_index, s_mask = padded_rows(resp.static_model, k)
    if len(resp.static_item):
        static_item = np.asarray(resp.static_item, dtype=np.int64)[s_index]
        # a cell's share of correct answers, weighted by its answers (0 for padding)
        static_y = np.asarray(resp.static_share, dtype=np.float32)[s_index] * s_mask
        static_n = np.asarray(resp.static_n, dtype=np.float32)[s_index] * s_mask
    else:
        static_item, static_y, static_n = s_index, s_mask, s_mask
    graded = resp.static_grader is not None and len(resp.static_item) > 0
    static_grader = np.asarray(resp.static_grader)[s_index] if graded else s_index * 0
    term = bank.model.arena
    bt = term.kind == "bt"
    lam_arena, lam_bb = term.weight, term.both_bad_weight
    n = len(pairs) if pairs is not None and term.reads_pairs else 0
    empty = np.zeros(0)
    model = np.asarray(pairs.model[:n] if n else empty, dtype=np.int64)
    item = np.asarray(pairs.item[:n] if n else empty, dtype=np.int64)
    other = np.asarray(pairs.other[:n] if n else empty, dtype=np.int64)
    w = np.asarray(pairs.weight[:n] if n else empty, dtype=np.float64)
    t = np.asarray(pairs.target[:n] if n else empty, dtype=np.float64)
    bad = np.asarray(pairs.both_bad[:n] if n else empty, dtype=bool) & (not bt)
    # decisive pairs, model-major: one row per pair
    p_index, p_mask = padded_rows(model[~bad], k)
    decisive = np.nonzero(~bad)[0]
    rows_d = decisive[p_index] if len(decisive) else np.zeros_like(p_index)
    item_d, other_d = _at(item, rows_d, 0), _at(other, rows_d, 0)
    w_d, t_d = _at(w, rows_d, 0.0) * p_mask, _at(t, rows_d, 0.0)
    # the terms linear in the new model's score, summed per (model, prompt, judge)
    q = bank.dataset.n_items
    judge = np.asarray(pairs.judge[:n] if n else empty, dtype=np.int64)
    n_judges = bank.facets.n_judges if bank.facets is not None else 1
    cells, first, cell_of = np.unique(
        (model * q + item) * n_judges + judge, return_index=True, return_inverse=True
    )
    cells = cells // n_judges
    linear = lam_arena * arena_term.linear_weight(t, w)
    weight_lin = np.bincount(cell_of, weights=np.where(bad, 0.0, linear), minlength=len(cells))
    weight_bb = np.bincount(cell_of, weights=np.where(bad, lam_bb * w, 0.0), minlength=len(cells))
    c_index, c_mask = padded_rows(cells // q, k)
    cell_item = _at(cells % q, c_index, 0)
    cell_lin, cell_bb = (
        _at(weight_lin, c_index, 0.0) * c_mask,
        _at(weight_bb, c_index, 0.0) * c_mask,
    )
    f32 = np.float32
    draws = {name: None for name in links.ITEM_PARAMETERS}
    draws.update(bank.parameters())
    draws["theta"] = bank.draws["theta"]
    draws["gamma"] = bank.draws["gamma"] if n and term.has_items else None
    draws["centre"] = shift(bank)
    draws[graders.SITE] = bank.draws.get(graders.SITE) if graded else None
    facet_rows = judged.layout_rows(
        bank, resp, pairs, n, rows_d, first[c_index] if len(first) else c_index
    )
    if facet_rows["facets"]:
        draws.update({name: bank.draws[name] for name in judged.FACET_DRAWS})
    return Layout(
        static_item=jnp.asarray(static_item, jnp.int32),
        static_y=jnp.asarray(static_y, f32),
        static_n=jnp.asarray(static_n, f32),
        static_grader=jnp.asarray(static_grader, jnp.int32),
        cell_item=jnp.asarray(cell_item, jnp.int32),
        cell_linear=jnp.asarray(cell_lin, f32),
        cell_both_bad=jnp.asarray(cell_bb, f32),
        pair_item=jnp.asarray(item_d, jnp.int32),
        pair_other=jnp.asarray(other_d, jnp.int32),
        pair_weight=jnp.asarray(lam_arena * w_d, f32),
        pair_linear=jnp.asarray(lam_arena * arena_term.linear_weight(t_d, w_d), f32),
        draws={name: None if v is None else jnp.asarray(v, f32) for name, v in draws.items()},
        has_static=len(resp.static_item) > 0,
        has_pairs=n > 0,
        arena=term,
        **facet_rows,
    )


#: The :class:`Layout` fields with one row per new model.
ROW_FIELDS = (
    "static_item", "static_y", "static_n", "cell_item", "cell_linear", "cell_both_bad",
    "pair_item", "pair_other", "pair_weight", "pair_linear", "pair_judge", "pair_style",
    "pair_other_family", "pair_other_style", "cell_judge", "cell_style", "model_family",
    "static_grader",
)  # fmt: skip


def take_models(lay: Layout, index) -> Layout:
    """The rows ``index`` of ``lay``: the same layout for those new models only.

    The widths (and so the compiled program) stay those of ``lay``.
    """
    index = jnp.asarray(np.asarray(index, dtype=np.int32))
    return dataclasses.replace(
        lay, **_rows({name: getattr(lay, name) for name in ROW_FIELDS}, index)
    )


@jax.jit
def _rows(fields: dict, index):
    """``fields[name][index]`` for every field (None stays None), in one compiled call.

    Eagerly, each field's gather was a dispatch of its own: an adaptive test takes one new
    model's rows for every prompt it asks, and 18 gathers were a third of its time.
    """
    return {name: None if value is None else value[index] for name, value in fields.items()}


def _at(values: np.ndarray, index: np.ndarray, fill):
    """``values[index]``, or ``fill`` everywhere when ``values`` is empty."""
    return values[index] if len(values) else np.full(index.shape, fill)


def chunk_size(lay: Layout, n_grid: int) -> int:
    """Draws per compiled call, so that one call evaluates at most :data:`CHUNK` numbers."""
    width = max(lay.static_item.size, lay.pair_item.size, lay.cell_item.size, 1)
    return max(1, CHUNK // (width * n_grid))


def loglik(lay: Layout, grids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Static and pair log likelihood of each new model, (len(rows), K, G).

    ``grids`` (K, G) are abilities relative to the leaderboard's zero; ``rows`` bank
    draws, evaluated in chunks of :func:`chunk_size` draws (the last one padded, so every
    call has one shape and one compiled program).
    """
    return _over_chunks(_loglik_chunk, lay, grids, rows, chunk_size(lay, grids.shape[1]))


def _over_chunks(kernel, lay: Layout, grids: np.ndarray, rows: np.ndarray, size: int, *,
                 total: bool = False):  # fmt: skip
    """The compiled ``kernel(lay, grids, rows)`` over chunks of ``size`` rows.

    The results per row are concatenated, or summed over the rows with ``total``. (XLA
    already spreads one fused loop over the CPU's cores: splitting the chunks among host
    devices with ``pmap`` was measured no faster on 2 cores.)
    """
    rows = np.asarray(rows)
    g = jnp.asarray(grids, jnp.float32)
    out = []
    for start in range(0, len(rows), size):
        part = rows[start : start + size]
        padded = np.r_[part, np.full(size - len(part), part[-1])] if len(part) < size else part
        value = np.asarray(kernel(lay, g, jnp.asarray(padded, jnp.int32)))[: len(part)]
        out.append(value.sum(axis=0, dtype=np.float64) if total else value)
    if total:
        return np.sum(out, axis=0)
    return np.concatenate(out, axis=0) if out else np.zeros((0,) + grids.shape)


@jax.jit
def _loglik_chunk(lay: Layout, grids, rows):
    draws = lay.draws
    theta = grids[None] + draws["centre"][rows][:, None, None]  # (D, K, G)
    total = jnp.zeros(theta.shape, jnp.float32)
    if lay.has_static:
        total = total + _static(lay, draws, theta, rows)
    if lay.has_pairs:
        arena = _bt if lay.arena.kind == "bt" else _pairs
        total = total + arena(lay, draws, theta, rows)
    return total


def _take(draws, name, rows, index):
    value = draws[name]
    return None if value is None else value[rows][:, index][..., None]  # (D, K, n, 1)


def _static_difficulty(lay, draws, rows, a):
    """The static labels' difficulties (D, K, S, 1), carrying their graders' severities."""
    b = _take(draws, "b", rows, lay.static_item)
    if draws[graders.SITE] is None:
        return b
    return graders.difficulty(b, a, _take(draws, graders.SITE, rows, lay.static_grader))


def _static(lay, draws, theta, rows):
    a = _take(draws, "a", rows, lay.static_item)
    b = _static_difficulty(lay, draws, rows, a)
    eta = links.eta(theta[:, :, None, :], b, a)  # (D, K, S, G)
    c, d = _take(draws, "c", rows, lay.static_item), _take(draws, "d", rows, lay.static_item)
    ll = links.bernoulli_loglik(lay.static_y[None, :, :, None], eta, c, d)
    return jnp.sum(ll * lay.static_n[None, :, :, None], axis=2)


def _pairs(lay, draws, theta, rows):
    """:func:`~bayes_dualeval.model.arena_term.pair` of every pair, and the both-bad terms.

    The scores are ``gamma (p - 1/2)`` (:meth:`~bayes_dualeval.model.arena_term.ArenaTerm.score`).
    """
    b, a = _take(draws, "b", rows, lay.pair_item), _take(draws, "a", rows, lay.pair_item)
    family = jnp.broadcast_to(lay.model_family[:, None], lay.pair_judge.shape)
    p_mine = links.probability(links.eta(theta[:, :, None, :], b, a))  # (D, K, P, G)
    mine = _scores(lay, draws, rows, p_mine, lay.pair_judge, family, lay.pair_style)
    theta_o = draws["theta"][rows][:, lay.pair_other][..., None]
    p_other = links.probability(links.eta(theta_o, b, a))  # (D, K, P, 1)
    other = _scores(
        lay, draws, rows, p_other, lay.pair_judge, lay.pair_other_family, lay.pair_other_style
    )
    weight = lay.pair_weight[None, :, :, None]
    decisive = jnp.sum(arena_term.pair_nonlinear(mine - other, weight), axis=2)
    # the linear part -(1 - t) w (s_mine - s_other): the bank side is constant in the grid
    # (kept, so the value is exact); the new model's side and the both-bad term per
    # (model, prompt)
    offset = jnp.sum(lay.pair_linear[None, :, :, None] * other, axis=2)
    eta = links.eta(
        theta[:, :, None, :], _take(draws, "b", rows, lay.cell_item),
        _take(draws, "a", rows, lay.cell_item),
    )  # fmt: skip
    family = jnp.broadcast_to(lay.model_family[:, None], lay.cell_judge.shape)
    score = _scores(
        lay, draws, rows, links.probability(eta), lay.cell_judge, family, lay.cell_style
    )
    cells = -lay.cell_linear[None, :, :, None] * score
    cells = cells + arena_term.both_bad(eta, lay.cell_both_bad[None, :, :, None])
    return decisive + offset + jnp.sum(cells, axis=2)


def _scores(lay, draws, rows, p, judge, family, style):
    """The scores of cells with success probabilities ``p`` (D, K, N, G), at draws ``rows``.

    ``gamma (p - 1/2)`` (:meth:`~bayes_dualeval.model.arena_term.ArenaTerm.score`); with facets
    :func:`~bayes_dualeval.model.facets.scores`, of the cells' ``judge``, ``family`` (K, N)
    and ``style`` (K, N, C): ``gamma_k (p - 1/2)`` plus offsets that do not depend on the grid.
    """
    gamma = draws["gamma"][rows]  # (D,)
    if not lay.facets:
        return lay.arena.score(p, gamma[:, None, None, None])
    k, n = judge.shape
    shared = gamma[:, None] if draws["gamma_judge"] is None else draws["gamma_judge"][rows]
    drawn = Facets(
        gamma=shared,
        bias=None if draws["judge_bias"] is None else draws["judge_bias"][rows],
        style=None if draws["style_coef"] is None else draws["style_coef"][rows],
    )
    flat = (judge.reshape(-1), family.reshape(-1), style.reshape(k * n, -1))
    offset = facet_scores(jnp.zeros((len(rows), k * n), p.dtype), drawn, *flat)
    slope = jnp.take(shared, judge, axis=-1)  # (D, K, N)
    return slope[..., None] * p + offset.reshape(len(rows), k, n)[..., None]


def _bt(lay, draws, theta, rows):
    """:func:`~bayes_dualeval.model.arena_term.pair` of every pair; the scores are abilities."""
    theta_o = draws["theta"][rows][:, lay.pair_other]  # (D, K, P)
    x = theta[:, :, None, :] - theta_o[..., None]
    soft = jnp.sum(arena_term.pair_nonlinear(x, lay.pair_weight[None, :, :, None]), axis=2)
    # the linear part -(1 - t) w x, summed over each model's pairs outside the pair loop
    # (inside it, it tripled the loop's time): -L_k theta + sum (1 - t) w theta_other
    total = jnp.sum(lay.pair_linear, axis=1)[None, :, None]
    offset = jnp.sum(lay.pair_linear[None] * theta_o, axis=2)[..., None]
    return soft - total * theta + offset


jax.tree_util.register_dataclass(
    Layout,
    data_fields=[*ROW_FIELDS, "draws"],
    meta_fields=["has_static", "has_pairs", "arena", "facets"],
)


def mean_success(lay: Layout, grids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each static label's success probability at its model's grid, averaged over ``rows``.

    Returns
    -------
    numpy.ndarray, shape (K, S_max, G)
        In the layout's padded rows (:func:`padded_rows` of the labels' models).
    """
    size = max(1, CHUNK // max(lay.static_item.size * grids.shape[1], 1))
    return _over_chunks(_success_chunk, lay, grids, rows, size, total=True) / len(rows)


@jax.jit
def _success_chunk(lay: Layout, grids, rows):
    draws = lay.draws
    theta = grids[None] + draws["centre"][rows][:, None, None]  # (D, K, G)
    item = lay.static_item
    a = _take(draws, "a", rows, item)
    eta = links.eta(theta[:, :, None, :], _static_difficulty(lay, draws, rows, a), a)
    return links.probability(eta, _take(draws, "c", rows, item), _take(draws, "d", rows, item))
