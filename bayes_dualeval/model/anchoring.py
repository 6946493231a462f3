"""Arena difficulties drawn around the level their mean reward implies.

Under the arena level term (``arena_level = "mean"``) a prompt's mean normalised reward
pins ``c_s + gamma (pbar_q - 1/2)`` to within its standard error ``se_q``, where ``pbar_q``
is the mean success probability of the models that answered it (the mean of the cells'
scores, :func:`~bayes_dualeval.model.arena_term.reward_score`). For given abilities,
discrimination ``a_q``, ``gamma`` and ``c_s`` that fixes ``b_q`` to a narrow interval, and
the interval moves whenever any of them moves: in ``(a_q, b_q)`` the posterior is a thin
curved ridge (the contour of ``pbar_q``), and across prompts every ``b_q`` has to move in
step with ``gamma``, ``c_s`` and the abilities. NUTS with a diagonal mass matrix follows
neither; it takes tiny steps, hits its tree depth, and mixes the globals poorly.

Anchored coordinates remove that coupling. For each anchored prompt the model solves
``pbar_q(b) = t_q`` with ``t_q = 1/2 + (zbar_q - c_s) / gamma`` (clipped into the attainable
range) for the level-implied difficulty ``b*_q``, and draws

``b_q = b*_q + s_q v_q``,   ``v_q`` a standard-normal coordinate,

where ``s_q`` is the conditional standard deviation of ``b_q`` from the level term's
curvature and the prior's, ``s_q^-2 = (gamma a_q w_q / se_q)^2 + sigma_b^-2`` with
``w_q = mean_i p_iq (1 - p_iq)`` at ``b*_q``. Because ``b*_q`` and ``s_q`` depend only on
the other parameters, the map from ``(others, v)`` to ``(others, b)`` is triangular with
Jacobian ``prod_q s_q``: the density of ``v`` is the prior of ``b_q`` times ``s_q``, so the
model, and every posterior it implies, is exactly the same as in plain coordinates. Only
the geometry NUTS explores changes: ``v_q`` stays near standard normal whatever the
globals do.

The anchor reads a capped discrimination, ``a'_q = anchor_slope(a_q)``
(:func:`anchor_slope`; within 1% of ``a_q`` up to 3.5 and 1.5% at 4, and never above
:data:`ANCHOR_SLOPE`), in ``pbar_q``, ``w_q`` and ``s_q`` alike. Any deterministic function
of the other parameters keeps the change of variables exact; the cap only keeps the
anchor smooth. At ``a_q`` of 15-30, which HELM AIR-Bench's arena posterior reaches (65
models x 433 prompts, its rewards 0, 0.5 or 1), ``pbar_q(b)`` is a staircase of the
models' steps: ``b*_q`` and ``s_q`` jumped as ``gamma`` and ``c_s`` moved it across a step.
On a quarter of its prompts (109) with 300 warm-up iterations and 300 draws, the uncapped
anchor (its solve bracketed, :func:`_newton`) ended with 28 divergences, R-hat 1.14 and
33% of transitions at the tree depth cap; capped, with none (docs/validation.md, code K).
The cap is 8, not the 4 that mixed HELM's quarter best (R-hat 1.03 at two seeds, against
1.04 and 1.13 at 8): at 4 the bundled example's arena level lost effective draws, and its
first round passed the convergence check at 15 of 25 seeds, at 8 at 22 of 25
(docs/performance.md).

The level's coordinates. With the prompts anchored, the level block's posterior is a
funnel in ``gamma``: on the bundled example the spread of ``c_s`` given ``gamma`` grew
4-fold from its lowest quarter of ``gamma`` draws to its highest, and the arena group's
``mu_b``, which follows ``c_s`` (correlation 0.95), 2.9-fold. A large ``gamma`` with a low
intercept explains the mean rewards with prompts all on the easy side, so the common level
is loosely pinned there. Anchored inputs therefore sample ``level_u = c_s / k`` and, for
an anchored group, ``mu_b_raw = mu_b / k`` with ``k = gamma ** LEVEL_POWER``
(:func:`level_unit`; ``level_u`` is the target's offset in units of the success
probability: ``t_q = 1/2 + zbar_q / gamma - level_u``), their Normal priors transformed
exactly (``level_u ~ Normal(0, level_loc_scale / k)``). Over the same quarters of
``gamma`` (seed 14) their spreads grow 2.3- and 1.7-fold where ``c_s``'s and ``mu_b``'s
grow 4.0- and 2.9-fold: the funnel is narrowed, not removed. The model is the same;
``tests/test_anchoring.py`` checks the log density against the Jacobian, ``k`` per
source and per anchored group. A power of 1 took the bundled example from 39 to 31
leapfrog steps per draw at a median over 15 seeds, its first round passing about as often
(21 of 25 seeds, against 22); 2 left a divergence in every first round
(docs/performance.md).

With several judges (or style covariates; :mod:`bayes_dualeval.model.facets`) a prompt
has a level per judge (a *unit*), each nearly linear in ``pbar_q``:
``zbar_qk ~ c_s + delta_k + mean offset_qk + gamma_k (pbar_q - 1/2)``. The target is then
the precision-weighted mean of the units' targets,
``t_q = sum_k pi_qk t_qk / sum_k pi_qk`` with ``t_qk = 1/2 + (zbar_qk - c_s - delta_k -
mean offset_qk) / gamma_k`` and ``pi_qk = (gamma_k / se_qk)^2``, and the scale reads every
unit's curvature, ``s_q^-2 = (a_q w_q)^2 sum_k pi_qk + sigma_b^-2``; ``pbar_q`` and
``w_q`` are over the cells of the prompt's unit with the most cells
(``ModelInputs.anchor_unit``). Any deterministic choice keeps the change of variables
exact; anchoring to one judge's level only left the other judges' levels pinning
``v_q`` to the judges' globals (17 divergences and a bulk ESS of 22 in 600 draws on a
three-judge probe, ``scripts/benchmarks/facet_geometry.py``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayes_dualeval.model import links
from bayes_dualeval.model.ability_map import ability_at
from bayes_dualeval.model.arena_matrix import prompt_ability, prompt_sums, to_items
from bayes_dualeval.model.arena_term import reward_score
from bayes_dualeval.model.facets import cell_scores, has_facets
from bayes_dualeval.model.inputs import ModelInputs

#: Most iterations of the safeguarded Newton solve for the level-implied difficulty
#: (vectorised over prompts; a bisection of the bracket takes about 20 of them to 1e-5) ...
NEWTON_STEPS = 40
#: ... which stop once no prompt's last step moved its difficulty by more than this, or
#: its bracket is narrower than twice this (the convergence is quadratic: the error left
#: is then of the order of this squared, or float32's rounding of ``pbar``).
NEWTON_TOL = 1e-5
#: Largest Newton step, in units of ``1 / a_q`` (keeps the solve stable where it saturates).
MAX_STEP = 2.0
#: The bracket's margin beyond the abilities, in units of ``1 / a_q``: past it every
#: model's success probability is beyond the clipped targets' range (``logit(0.99)`` is
#: 4.6), so ``pbar_q - t_q`` has opposite signs at its two ends.
BRACKET = 6.0
#: Targets are clipped into ``[TARGET_EPS, 1 - TARGET_EPS]`` (a mean of probabilities).
TARGET_EPS = 0.01
#: The steepest discrimination the anchor reads (:func:`anchor_slope`).
ANCHOR_SLOPE = 8.0
#: The anchored level's coordinates are in units of ``gamma ** LEVEL_POWER``
#: (:func:`level_unit`).
LEVEL_POWER = 1.0
#: The sites anchored inputs sample in place of the level block's plain ones.
LEVEL_SITES = {"level_c": "level_u", "mu_b": "mu_b_raw"}


def level_unit(gamma):
    """``gamma ** LEVEL_POWER``: the unit of ``level_u`` and an anchored group's ``mu_b_raw``."""
    return gamma**LEVEL_POWER


def level_sites(inputs: ModelInputs) -> dict[str, str]:
    """The site that holds each of ``level_c`` and ``mu_b``: itself, or its anchored unit.

    Anchored inputs (``inputs.n_anchored``) sample :data:`LEVEL_SITES`' coordinates
    (:func:`bayes_dualeval.model.priors.level_parameters`); the others the plain sites.
    """
    if inputs.n_anchored:
        return dict(LEVEL_SITES)
    return {name: name for name in LEVEL_SITES}


def anchor_slope(a):
    """The discrimination the anchor reads: ``a``, smoothly capped at :data:`ANCHOR_SLOPE`.

    ``a / (1 + (a / A)^4)^(1/4)``: within 1% of ``a`` up to ``0.44 A``, 1.5% at ``A / 2``,
    and ``A`` in the limit. A steep prompt's ``pbar_q(b)`` is a staircase of its models'
    steps, and ``b*_q`` and ``s_q`` read from it jump as the globals move it across a step.
    """
    return a / (1.0 + (a / ANCHOR_SLOPE) ** 4) ** 0.25


def _mean_probability(b, a, theta, inputs: ModelInputs, *, slope: bool = False):
    """``pbar_q`` and ``w_q = mean p (1 - p)`` at difficulties ``b``, in prompt space.

    ``b``, ``a`` and the results are over every item with the lists of arena cells, and
    over the arena prompts only with the arena matrix (:func:`_take`). With ``slope``,
    also ``dw_q / db_q = -a_q mean p (1 - p) (1 - 2 p)``, from the same pass over the cells.
    """
    matrix = inputs.arena_matrix
    if matrix is None:
        item = inputs.arena_item
        ability = ability_at(theta, inputs.arena_model, item)
        p = links.probability(links.eta(ability, b[item], a[item]))
    else:  # every model on every arena prompt (NUTS's layout where most are observed)
        ability = prompt_ability(theta, matrix, inputs.n_models)
        p = links.probability(links.eta(ability, b[:, None], a[:, None]))
    n = jnp.maximum(_count(inputs), 1.0)
    pq = p * (1.0 - p)
    pbar = _sums(p, inputs) / n
    w = _sums(pq, inputs) / n
    if not slope:
        return pbar, w
    dw = -a * _sums(pq * (1.0 - 2.0 * p), inputs) / n
    return pbar, w, dw


def _take(values, inputs: ModelInputs):
    """Per-item ``values`` (Q,) in prompt space: all of them, or the arena matrix's prompts."""
    matrix = inputs.arena_matrix
    return values if matrix is None else values[matrix.prompts]


def _put(values, inputs: ModelInputs):
    """Prompt-space ``values`` back over every item (Q,), 0 for items that are not prompts."""
    matrix = inputs.arena_matrix
    if matrix is None:
        return values
    return to_items(values, matrix, inputs.n_items)


def _count(inputs: ModelInputs):
    """Arena cells of each prompt (of its anchoring unit, with facets), in prompt space."""
    if has_facets(inputs):
        return inputs.unit_n[inputs.anchor_unit]
    return _take(inputs.prompt_n, inputs)


def _sums(values, inputs: ModelInputs):
    """Sums of ``values`` over each arena prompt's cells, in prompt space.

    With facets, over the cells of each prompt's anchoring unit (lists only: the arena
    matrix is not read with facets).
    """
    if has_facets(inputs):
        units = inputs.unit_n.shape[0]
        return jax.ops.segment_sum(values, inputs.arena_unit, units)[inputs.anchor_unit]
    matrix = inputs.arena_matrix
    if matrix is None:
        return jax.ops.segment_sum(values, inputs.arena_item, inputs.n_items)
    return prompt_sums(values, matrix)


def _newton(theta, a, target, inputs: ModelInputs):
    """Safeguarded Newton steps towards ``pbar_q(b) = target_q``, in prompt space (:func:`_take`).

    ``pbar_q`` falls as ``b`` grows, so each prompt keeps a bracket that holds the root,
    from :data:`BRACKET` ``/ a_q`` below the least ability to as far above the greatest;
    every step shrinks it to the side of the root its sign shows. A Newton step that
    would leave the bracket bisects it instead. Plain Newton steps stalled where an item
    is steep: at ``a_q`` of 15-30, which HELM AIR-Bench's arena posterior reaches at one
    draw in six, ``pbar_q(b)`` is a staircase of its 65 models' steps, and twelve steps
    of at most ``2 / a_q`` stopped short of the root, on a plateau, where the implicit
    derivative of :func:`level_difficulty` divides by a slope of nearly 0 (the gradient
    was then wrong by orders of magnitude, and NUTS's step size collapsed to 0.0002).

    At most :data:`NEWTON_STEPS`; fewer once every arena prompt's step is below
    :data:`NEWTON_TOL`. Each step is a pass over the arena cells, and at posterior draws
    of the bundled example four or five steps reach single precision (the start is exact
    when the models' abilities are equal), so stopping there saves most of the solve: the
    potential's gradient took 0.88x the time of twelve fixed steps there, 0.81x at the
    paper's scale. The number of steps depends only on the parameters, so ``b*`` stays a
    deterministic function of them and the change of variables stays exact
    (:func:`level_difficulty`).
    """
    prompt_n = _count(inputs)
    n = jnp.maximum(prompt_n, 1.0)
    if inputs.arena_matrix is None:
        ability = ability_at(theta, inputs.arena_model, inputs.arena_item)
    else:
        ability = prompt_ability(theta, inputs.arena_matrix, inputs.n_models)
    # exact when every model has the same ability; Newton refines it
    start = _sums(ability, inputs) / n - jnp.log(target / (1.0 - target)) / a
    used = prompt_n > 0  # the other items' values are placeholders
    low = jnp.min(ability) - BRACKET / a
    high = jnp.max(ability) + BRACKET / a
    start = jnp.clip(start, low, high)

    def step(carry):
        b, low, high, _, k = carry
        pbar, w = _mean_probability(b, a, theta, inputs)
        above = pbar > target  # the root lies above b
        low, high = jnp.where(above, b, low), jnp.where(above, high, b)
        move = jnp.clip((pbar - target) / (a * jnp.maximum(w, 1e-6)), -MAX_STEP / a, MAX_STEP / a)
        # closed: at the root a step too small to change b in float32 lands on the end
        # the last step set, and must not send the solve off to the bracket's middle
        inside = (b + move >= low) & (b + move <= high)
        new = jnp.where(inside, b + move, 0.5 * (low + high))
        # a prompt whose bracket is that narrow is solved: float32 rounding of pbar can
        # make Newton hop between the bracket's ends by just over the tolerance
        unsolved = used & (high - low > 2.0 * NEWTON_TOL)
        return new, low, high, jnp.max(jnp.where(unsolved, jnp.abs(new - b), 0.0)), k + 1

    def going(carry):
        moved, k = carry[3:]
        return (k < NEWTON_STEPS) & (moved > NEWTON_TOL)

    moved = jnp.asarray(jnp.inf, start.dtype)
    return jax.lax.while_loop(going, step, (start, low, high, moved, 0))[0]


def _level(gamma, level_c, inputs: ModelInputs, facets):
    """Each prompt's level target ``t_q`` and its precision, over every item (Q,).

    ``t_q`` is the ``pbar_q`` its mean reward implies, ``1/2 + (zbar_q - c_s) / gamma``; the
    precision ``(gamma / se_q)^2`` is the level term's curvature in ``pbar_q``. With facets,
    the precision-weighted mean over the prompt's units and the sum of their precisions
    (see the module).
    """
    if facets is None:
        # the score is linear in p: its value at p = 0 and its slope gamma
        shift = level_c[inputs.level_group] + reward_score(0.0, gamma)
        return (inputs.prompt_zbar - shift) / gamma, (gamma / inputs.prompt_se) ** 2
    units = inputs.unit_n.shape[0]
    judge = jnp.arange(units) // inputs.n_items
    # each unit's mean score at p = 0 (with the family biases and style), to which its
    # mean score adds gamma_k pbar
    offsets = cell_scores(jnp.zeros(inputs.arena_item.shape[0]), facets, inputs)
    n = jnp.maximum(inputs.unit_n, 1.0)
    mean_offset = jax.ops.segment_sum(offsets, inputs.arena_unit, units) / n
    # the level mean at pbar = 0; its slope in pbar is the judge's gamma
    shift = level_c[inputs.level_group] + facets.level_mean(mean_offset, judge)
    scale = facets.gamma[judge]
    if facets.level_scale is not None:
        scale = facets.level_scale[judge] * scale
    target = (inputs.prompt_zbar - shift) / scale
    precision = jnp.where(inputs.unit_n > 0, (scale / inputs.prompt_se) ** 2, 0.0)
    per_judge = (-1, inputs.n_items)  # units (J Q,) as (J, Q)
    total = precision.reshape(per_judge).sum(axis=0)
    weighted = (precision * target).reshape(per_judge).sum(axis=0)
    return weighted / jnp.maximum(total, 1e-12), total


def level_difficulty(theta, a, gamma, level_c, inputs: ModelInputs, facets=None):
    """The level-implied difficulty ``b*_q`` and the mean ``w_q`` of ``p (1 - p)`` there.

    Parameters
    ----------
    theta : jax.Array of shape (M,), or AbilityMap
        Abilities, or the abilities per domain or dimension
        (:class:`~bayes_dualeval.model.ability_map.AbilityMap`).
    a : jax.Array, shape (Q,)
    gamma : jax.Array, scalar
    level_c : jax.Array, shape (n_level_groups,)
    inputs : ModelInputs
    facets : Facets, optional
        The arena's facets (several judges, style): each prompt is anchored to its
        anchoring unit's level.

    Returns
    -------
    b_star, w : jax.Array, shape (Q,)
        Meaningful for arena prompts only (other items get a finite placeholder).
    """
    target, _ = _level(gamma, level_c, inputs, facets)
    target = jnp.clip(target, TARGET_EPS, 1.0 - TARGET_EPS)
    # The iterations carry no gradient (differentiating through them would store and
    # replay all of them); the derivatives come from the implicit function theorem at
    # the solution instead: b* solves F(b, .) = pbar(b) - target = 0, with
    # dF/db = -a w, so d b* = -dF / (dF/db). The correction below is zero in value and
    # carries exactly that derivative. It is exact at a root; where the iterations stop
    # short of one (a saturated prompt), b* is still a deterministic function of the
    # other parameters, so the change of variables and the posterior stay exact, and
    # only the gradient is approximate there (NUTS stays exact: its acceptance step uses
    # the density itself).
    #
    # ``w`` is wanted at ``b*``, which equals ``solved`` in value: its first-order expansion
    # ``w(solved) + dw/db (b* - solved)`` has the same value and the same first derivatives
    # as ``w(b*)`` (the factor ``b* - solved`` is zero in value, so the derivative of
    # ``dw/db`` never counts), and it comes from the one pass over the arena cells that
    # gives ``pbar`` instead of a second one.
    # in prompt space: the arena matrix's prompts only, where it is set
    a, target = _take(a, inputs), _take(target, inputs)
    solved = _newton(*jax.lax.stop_gradient((theta, a, target)), inputs)
    pbar, w, dw = _mean_probability(solved, a, theta, inputs, slope=True)
    slope = jax.lax.stop_gradient(a * jnp.maximum(w, 1e-6))
    residual = pbar - target
    b_star = solved + (residual - jax.lax.stop_gradient(residual)) / slope
    w = w + jax.lax.stop_gradient(dw) * (b_star - solved)
    return _put(b_star, inputs), _put(w, inputs)


def anchored_scale(a, w, gamma, sigma_b, inputs: ModelInputs, facets=None, level_c=None):
    """Conditional standard deviation ``s_q`` of an anchored difficulty (shape (Q,)).

    ``s_q^-2 = (a_q w_q)^2 P_q + sigma_b^-2``, with ``P_q`` the precision of the prompt's
    level target (:func:`_level`: every unit's, with facets). ``level_c`` is read only
    with facets (the precision does not depend on it).
    """
    if facets is None:
        level_precision = (gamma * a * w / inputs.prompt_se) ** 2
        return 1.0 / jnp.sqrt(level_precision + 1.0 / sigma_b**2)
    level_c = jnp.zeros(inputs.n_level_groups) if level_c is None else level_c
    precision = _level(gamma, level_c, inputs, facets)[1]
    return 1.0 / jnp.sqrt((a * w) ** 2 * precision + 1.0 / sigma_b**2)
