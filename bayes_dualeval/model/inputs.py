"""Turn a :class:`~bayes_dualeval.data.dataset.Dataset` into the arrays the model functions read.

Everything that does not depend on parameters is computed here once, in NumPy, so the
log density evaluated thousands of times per chain does as little as possible:

* the soft-label pair term ``t log s + (1 - t) log(1 - s)`` with ``s = sigmoid(x)`` equals
  ``log_sigmoid(x) - (1 - t) x``, and ``x = gamma (p_i - p_j)`` is linear in the cell
  probabilities, so the second part collapses to ``gamma * sum_c lin_c p_c`` over arena
  cells (``pair_linear`` is a precomputed signed sum of pair weights). Only one
  ``log_sigmoid`` per pair remains;
* the both-bad term ``log(1 - p_i) + log(1 - p_j)`` is a weighted sum over cells, with the
  number of both-bad pairs a cell takes part in as its weight.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import Pairs, distill
from bayes_dualeval.model.arena_matrix import ArenaMatrix
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.dif import dif_groups
from bayes_dualeval.model.facets import arena_facets
from bayes_dualeval.model.graders import graders
from bayes_dualeval.model.pilot import centring, prompt_level
from bayes_dualeval.model.spec import DualEvalModel

#: Field metadata of :class:`ModelInputs`: a size (static metadata of the pytree), an array
#: with one entry per static cell, or one per decisive pair. Padding
#: (:mod:`bayes_dualeval.inference.buckets`), splitting across devices
#: (:mod:`bayes_dualeval.inference.sharding`) and taking a batch of cells read the fields
#: of a kind from here (:func:`fields_of`).
SIZE, STATIC_CELL, PAIR = {"axis": "size"}, {"axis": "static_cell"}, {"axis": "pair"}


@dataclass(frozen=True)
class ModelInputs:
    """Arrays read by :func:`bayes_dualeval.model.joint.dualeval_model` (a JAX pytree).

    Shapes use ``M`` models, ``Q`` items, ``G`` item groups, ``S`` static cells, ``R``
    arena cells and ``P`` decisive pairs. Arrays of a kind that is not used have length 0.

    Attributes
    ----------
    n_models, n_items, n_groups, n_level_groups, n_static_items : int
    n_anchored, n_centred, n_domains, n_judges, n_families, n_graders : int
        Sizes (static metadata of the pytree); ``n_level_groups`` counts the item groups
        holding arena prompts (the sources of the arena level term), ``n_static_items``
        the items with static labels, ``n_anchored`` the arena prompts whose ``b`` is
        anchored (marked by :attr:`b_anchored`), ``n_centred`` the entries of
        :attr:`b_centred` and :attr:`log_a_centred` that are not 0 (at 0 the model draws every
        item non-centred without reading them: SVI's and MAP's layout, and
        ``centred="none"``; whoever replaces ``centring`` sets both counts with it),
        ``n_domains`` the item domains that have
        abilities of their own under ``abilities = "domain"``, or loading profiles of
        their own with ``dims > 1`` (else 0); ``n_judges`` counts the arena's judges,
        ``n_graders`` the judges of the static labels (:mod:`bayes_dualeval.model.graders`).
    item_group : jax.Array of int32, shape (Q,)
    item_domain : jax.Array of int32, shape (Q,)
        Each item's domain, ``n_domains`` for an item without one: its column in the
        table of domain abilities
        (:func:`~bayes_dualeval.model.ability_map.domain_map`), or its loading profile;
        all 0 under a single ability.
    static_model, static_item : jax.Array of int32, shape (S,)
    static_y : jax.Array of float32, shape (S,)
        The share of each static cell's answers that are correct (``k / n``; the label
        itself where a model answered an item once).
    static_n : jax.Array of float32, shape (S,)
        Answers of each static cell (repeated samples), 0 for the cells NUTS pads its
        inputs with (:mod:`bayes_dualeval.inference.buckets`). A Bernoulli log likelihood
        is affine in its label, so ``n * loglik(k / n)`` is the density of the cell's
        ``n`` answers, ``k`` of them correct
        (:class:`~bayes_dualeval.model.likelihood.IRTBernoulli` weighs by it); a padded
        cell adds nothing.
    static_grader : jax.Array of int32, shape (S,)
        Each static cell's grader among the ``n_graders`` (all 0 with one grader; read
        only with two or more: :func:`~bayes_dualeval.model.graders.shift`).
    static_items : jax.Array of int32, shape (n_static_items,)
        The items that have static labels (where 3PL/4PL floors and ceilings live).
    arena_model, arena_item : jax.Array of int32, shape (R,)
    arena_z : jax.Array of float32, shape (R,)
        Normalised rewards (used by the reward likelihood).
    pair_i, pair_j : jax.Array of int32, shape (P,)
        Arena cell index of each side of a decisive pair (model index in ``bt`` mode).
    pair_w : jax.Array of float32, shape (P,)
        Pair weight (``2 / n_q`` or 1).
    pair_t : jax.Array of float32, shape (P,)
        Soft target of each decisive pair (pointwise log likelihood only).
    pair_item : jax.Array of int32, shape (P,)
        Prompt of each decisive pair (pointwise log likelihood only).
    pair_linear : jax.Array of float32, shape (R,) (shape (M,) in ``bt`` mode)
        ``sum w (1 - t)`` over pairs where the cell is first minus where it is second.
    bb_count : jax.Array of float32, shape (R,)
        Weighted number of both-bad pairs each arena cell is in.
    prompt_n : jax.Array of float32, shape (Q,)
        Arena cells per item (reward likelihood, anchoring).
    unit_n : jax.Array of float32, shape (U,)
        Arena cells per *unit*, a prompt as one judge scored it: unit ``q + Q k`` is
        prompt ``q`` of judge ``k``, ``U = Q n_judges`` (with one judge the units are the
        items, and ``unit_n`` is ``prompt_n``). Pairs are formed within a unit, and the
        level term reads one mean reward per unit.
    prompt_zbar : jax.Array of float32, shape (U,)
        Mean normalised reward of each unit (0 for units without arena cells).
    prompt_se : jax.Array of float32, shape (U,)
        Standard error of each unit's mean reward (1 for units without arena cells); see
        :func:`prompt_level`.
    level_group : jax.Array of int32, shape (U,)
        Arena source (index among the ``n_level_groups`` arena item groups) of each unit;
        0 for units without arena cells (masked by ``unit_n``).
    arena_judge : jax.Array of int32, shape (R,)
        Each arena cell's judge (all 0 with one judge).
    arena_unit : jax.Array of int32, shape (R,)
        Each arena cell's unit (``item + Q judge``).
    anchor_unit : jax.Array of int32, shape (Q,)
        The unit whose mean reward anchors each item's difficulty
        (:mod:`bayes_dualeval.model.anchoring`): with several judges, the prompt's unit
        with the most cells (the first judge's among equals); the item itself with one.
    model_family : jax.Array of int32, shape (M,)
        Each model's family among the ``n_families`` (``n_families`` for a model without
        one); all 0 without judge x family biases.
    arena_style : jax.Array of float32, shape (R, C)
        Style covariates of the arena cells, standardised over the cells (``C = 0``
        without; :mod:`bayes_dualeval.model.facets`).
    centring : jax.Array of float32, shape (3, Q)
        How each item's coordinates are laid out (:func:`centring`), read by name through
        :attr:`b_centred`, :attr:`log_a_centred` and :attr:`b_anchored`: the weight in [0, 1]
        by which an item's ``b`` (``log a``) is centred, 1 centred and 0 non-centred
        (hierarchical item prior); 1 where an arena prompt's ``b`` is anchored to its level
        (:mod:`bayes_dualeval.model.anchoring`). One array rather than three: XLA folds a
        separate all-zero array into the compiled program of parallel chains (where the
        data are constants), which changes float32 rounding, so the same seed would no
        longer give the same draws as earlier releases.
    item_features : jax.Array of float32, shape (Q, F)
        Regressors of the item prior (:mod:`bayes_dualeval.data.features`: whitened
        principal components of the item features; a row of zeros for an item without
        features); ``F = 0`` without features.
    static_batch, pair_batch : int
        Static cells and arena pairs per random batch of the likelihood
        (:mod:`bayes_dualeval.model.subsample`; minibatch SVI), 0 for every one (static
        metadata; set by :meth:`with_batches`).
    static_counts : jax.Array of float32, shape (2, M, n_static_items), or None
        The static labels as a models x items matrix, set by
        :func:`bayes_dualeval.inference.layout.with_static_matrix` (NUTS's layout when most
        cells are observed):
        correct answers (row 0) and answers (row 1) of each model to each item of
        :attr:`static_items`, in that order; 0 and 0 where a model has no label. When
        set, the joint model reads the static likelihood from it (the same density,
        :func:`~bayes_dualeval.model.likelihood.static_matrix_loglik`); the cells stay for
        every other reader. None by default.
    arena_matrix : ArenaMatrix or None
        The arena's cells and decisive pairs laid out by prompt, set by
        :func:`bayes_dualeval.inference.layout.with_arena_matrix` (NUTS's layout when most
        pairs of models meet on most prompts; :mod:`bayes_dualeval.model.arena_matrix`).
        When set, the joint model reads the arena term and the anchoring solve from it
        (the same density); the lists stay for every other reader. None by default.
    """

    n_models: int = dataclasses.field(metadata=SIZE)
    n_items: int = dataclasses.field(metadata=SIZE)
    n_groups: int = dataclasses.field(metadata=SIZE)
    n_level_groups: int = dataclasses.field(metadata=SIZE)
    n_static_items: int = dataclasses.field(metadata=SIZE)
    n_anchored: int = dataclasses.field(metadata=SIZE)
    n_centred: int = dataclasses.field(metadata=SIZE)
    n_domains: int = dataclasses.field(metadata=SIZE)
    n_judges: int = dataclasses.field(metadata=SIZE)
    n_families: int = dataclasses.field(metadata=SIZE)
    n_graders: int = dataclasses.field(metadata=SIZE)
    item_group: jax.Array
    item_domain: jax.Array
    static_model: jax.Array = dataclasses.field(metadata=STATIC_CELL)
    static_item: jax.Array = dataclasses.field(metadata=STATIC_CELL)
    static_y: jax.Array = dataclasses.field(metadata=STATIC_CELL)
    static_n: jax.Array = dataclasses.field(metadata=STATIC_CELL)
    static_grader: jax.Array = dataclasses.field(metadata=STATIC_CELL)
    static_items: jax.Array
    arena_model: jax.Array
    arena_item: jax.Array
    arena_z: jax.Array
    pair_i: jax.Array = dataclasses.field(metadata=PAIR)
    pair_j: jax.Array = dataclasses.field(metadata=PAIR)
    pair_w: jax.Array = dataclasses.field(metadata=PAIR)
    pair_t: jax.Array = dataclasses.field(metadata=PAIR)
    pair_item: jax.Array = dataclasses.field(metadata=PAIR)
    pair_linear: jax.Array
    bb_count: jax.Array
    prompt_n: jax.Array
    unit_n: jax.Array
    prompt_zbar: jax.Array
    prompt_se: jax.Array
    level_group: jax.Array
    arena_judge: jax.Array
    arena_unit: jax.Array
    anchor_unit: jax.Array
    model_family: jax.Array
    arena_style: jax.Array
    centring: jax.Array
    item_features: jax.Array
    static_batch: int = dataclasses.field(default=0, metadata=SIZE)
    pair_batch: int = dataclasses.field(default=0, metadata=SIZE)
    static_counts: jax.Array | None = None
    arena_matrix: ArenaMatrix | None = None
    n_dif_groups: int = dataclasses.field(default=0, metadata=SIZE)
    model_dif_group: jax.Array | None = None

    def with_batches(self, static: int, pairs: int) -> ModelInputs:
        """The same inputs, their likelihood estimated from random batches of this size.

        Parameters
        ----------
        static, pairs : int
            Static cells and arena pairs per batch (0 or more than there are: all, as
            :func:`~bayes_dualeval.model.subsample.batch` reads them).
        """
        return dataclasses.replace(self, static_batch=int(static), pair_batch=int(pairs))

    def static_cells(self, rows) -> ModelInputs:
        """The inputs with only the static cells ``rows`` (None: all of them)."""
        if rows is None:
            return self
        cells = {name: getattr(self, name)[rows] for name in fields_of("static_cell")}
        return dataclasses.replace(self, **cells)

    @property
    def b_centred(self) -> jax.Array:
        """How centred each item's ``b`` is sampled, 0 to 1 (row 0 of ``centring``)."""
        return self.centring[0]

    @property
    def log_a_centred(self) -> jax.Array:
        """How centred each item's ``log a`` is sampled, 0 to 1 (row 1 of ``centring``)."""
        return self.centring[1]

    @property
    def b_anchored(self) -> jax.Array:
        """1 where an arena prompt's ``b`` is anchored (row 2 of ``centring``)."""
        return self.centring[2]

    @property
    def has_static(self) -> bool:
        """True when static cells enter the likelihood."""
        return self.static_y.shape[0] > 0

    @property
    def has_arena(self) -> bool:
        """True when arena cells enter the likelihood."""
        return self.arena_z.shape[0] > 0


def fields_of(axis: str) -> tuple[str, ...]:
    """The :class:`ModelInputs` fields of one kind: ``size``, ``static_cell`` or ``pair``."""
    return tuple(f.name for f in dataclasses.fields(ModelInputs) if f.metadata.get("axis") == axis)


jax.tree_util.register_dataclass(
    ModelInputs,
    data_fields=[
        f.name for f in dataclasses.fields(ModelInputs) if f.name not in fields_of("size")
    ],
    meta_fields=list(fields_of("size")),
)


# A configuration is static to JAX (hashable, no array leaves), so it can be passed as a
# model argument to jitted samplers.
jax.tree_util.register_static(ModelConfig)


def pair_weights(pairs: Pairs, arena_likelihood: str) -> np.ndarray:
    """Per-pair weights: ``2 / n_q`` (``pairs``) or 1 (``pairs-full``).

    A prompt answered by ``n_q`` models yields ``n_q (n_q - 1) / 2`` pairs but only
    ``n_q - 1`` independent contrasts; weight ``2 / n_q`` makes its pairs count as that many.
    With several judges ``n_q`` counts the models of the pair's unit (the prompt as its
    judge scored it).
    """
    return contrast_weight(pairs.unit_models, arena_likelihood)


def contrast_weight(prompt_models, arena_likelihood: str) -> np.ndarray:
    """The weight of a pair on a prompt answered by ``prompt_models`` models (see above)."""
    n = np.asarray(prompt_models, dtype=np.float64)
    if arena_likelihood == "pairs-full":
        return np.ones(n.shape, dtype=np.float32)
    return (2.0 / n).astype(np.float32)


def build_inputs(
    dataset: Dataset,
    config: ModelConfig,
    pairs: Pairs | None = None,
    *,
    centred: str = "none",
    features=None,
) -> tuple[ModelInputs, Pairs | None]:
    """Precompute the model's arrays.

    Parameters
    ----------
    dataset : Dataset
    config : ModelConfig
    pairs : Pairs, optional
        Distilled pairs; computed with the configuration's ratios when not given.
    centred : {"none", "auto", "all"}
        How centred to sample each item's coordinates (:func:`centring`).
    features : FeatureDesign, optional
        Item features (:func:`bayes_dualeval.data.features.design`), aligned to the items
        by id.

    Returns
    -------
    inputs : ModelInputs
    pairs : Pairs or None
        The pairs used (None when the arena term does not use pairs).
    """
    use_static, use_arena = DualEvalModel(config).kinds(dataset)
    f32, i32 = np.float32, np.int32
    empty_i, empty_f = np.zeros(0, i32), np.zeros(0, f32)
    s_model = dataset.static_model if use_static else empty_i
    s_item = dataset.static_item if use_static else empty_i
    s_y = dataset.static_share.astype(f32) if use_static else empty_f
    s_n = dataset.static_n.astype(f32) if use_static else empty_f
    grader_names, s_grader = graders(dataset) if use_static else (np.array([""]), empty_i)
    r_model = dataset.arena_model if use_arena else empty_i
    r_item = dataset.arena_item if use_arena else empty_i
    r_z = dataset.arena_z.astype(f32) if use_arena else empty_f
    term = DualEvalModel(config).arena
    facet = arena_facets(dataset, use_arena)
    if facet.present and term.kind != "pairs":
        raise ConfigError(
            "several judges and style covariates enter the pairs likelihood (arena_likelihood "
            f"'pairs' or 'pairs-full'); this specification fits mode {config.mode!r} with "
            f"arena_likelihood {config.arena_likelihood!r}"
        )
    n_units = dataset.n_items * facet.n_judges
    r_unit = r_item + dataset.n_items * facet.judge
    # the static questions, answered or known only by their features (3PL/4PL floors)
    static_items = (dataset.static_items if use_static else empty_i).astype(i32)
    prompt_n = np.bincount(r_item, minlength=dataset.n_items).astype(f32)
    unit_n = np.bincount(r_unit, minlength=n_units).astype(f32)
    prompt_zbar, prompt_se, group_of_item, n_level_groups = prompt_level(
        r_model, r_unit, r_z, np.tile(np.asarray(dataset.item_group), facet.n_judges),
        dataset.n_models,
    )  # fmt: skip
    n_cells = len(r_z)
    pair_i = pair_j = empty_i
    pair_w = pair_t = empty_f
    pair_item = empty_i
    pair_linear = np.zeros(n_cells, f32)
    bb = np.zeros(n_cells, f32)
    model = DualEvalModel(config)
    if use_arena and model.arena_term != "reward":
        if pairs is None:
            pairs = distill(dataset, bb_ratio=config.bb_ratio, tie_ratio=config.tie_ratio)
        w = pair_weights(pairs, config.arena_likelihood)
        dec = ~pairs.both_bad
        if term.kind == "bt":
            # Both-bad pairs have no meaning without success probabilities: BT uses
            # decisive pairs only, on model indices.
            ci, cj, size = pairs.i[dec], pairs.j[dec], dataset.n_models
        else:
            ci, cj, size = pairs.row_i[dec], pairs.row_j[dec], n_cells
            bb = (
                np.bincount(pairs.row_i[~dec], weights=w[~dec], minlength=n_cells)
                + np.bincount(pairs.row_j[~dec], weights=w[~dec], minlength=n_cells)
            ).astype(f32)
        wd = w[dec]
        loss = wd * (1.0 - pairs.target[dec])
        pair_linear = (
            np.bincount(ci, weights=loss, minlength=size)
            - np.bincount(cj, weights=loss, minlength=size)
        ).astype(f32)
        pair_i, pair_j, pair_w = ci.astype(i32), cj.astype(i32), wd.astype(f32)
        pair_t, pair_item = pairs.target[dec].astype(f32), pairs.item[dec].astype(i32)
    else:
        pairs = None
    if term.kind == "bt" and len(pair_w) == 0:
        raise ConfigError("mode 'bt' found no decisive arena pairs to fit")
    item_centring = centring(
        dataset,
        use_static,
        centred,
        arena_level=use_arena and config.arena_level == "mean" and term.has_items,
    )
    n_domains, item_domain = _domains(dataset, config)
    x_features = np.zeros((dataset.n_items, 0), f32)
    if features is not None:
        _check_features(config)
        x_features = features.aligned(dataset.items)
    inputs = ModelInputs(
        n_models=dataset.n_models,
        n_items=dataset.n_items,
        n_groups=len(dataset.groups),
        n_level_groups=n_level_groups,
        n_static_items=len(static_items),
        n_anchored=int(item_centring[2].sum()),
        n_centred=int(np.count_nonzero(item_centring[:2])),
        n_domains=n_domains,
        n_judges=facet.n_judges,
        n_families=facet.n_families,
        n_graders=len(grader_names),
        item_group=jnp.asarray(dataset.item_group, dtype=jnp.int32),
        item_domain=jnp.asarray(item_domain, dtype=jnp.int32),
        static_model=jnp.asarray(s_model, dtype=jnp.int32),
        static_item=jnp.asarray(s_item, dtype=jnp.int32),
        static_y=jnp.asarray(s_y),
        static_n=jnp.asarray(s_n),
        static_grader=jnp.asarray(s_grader, dtype=jnp.int32),
        static_items=jnp.asarray(static_items),
        arena_model=jnp.asarray(r_model, dtype=jnp.int32),
        arena_item=jnp.asarray(r_item, dtype=jnp.int32),
        arena_z=jnp.asarray(r_z),
        pair_i=jnp.asarray(pair_i),
        pair_j=jnp.asarray(pair_j),
        pair_w=jnp.asarray(pair_w),
        pair_t=jnp.asarray(pair_t),
        pair_item=jnp.asarray(pair_item),
        pair_linear=jnp.asarray(pair_linear),
        bb_count=jnp.asarray(bb),
        prompt_n=jnp.asarray(prompt_n),
        unit_n=jnp.asarray(unit_n),
        prompt_zbar=jnp.asarray(prompt_zbar),
        prompt_se=jnp.asarray(prompt_se),
        level_group=jnp.asarray(group_of_item),
        arena_judge=jnp.asarray(facet.judge, dtype=jnp.int32),
        arena_unit=jnp.asarray(r_unit, dtype=jnp.int32),
        anchor_unit=jnp.asarray(anchor_units(unit_n, dataset.n_items), dtype=jnp.int32),
        model_family=jnp.asarray(facet.family, dtype=jnp.int32),
        arena_style=jnp.asarray(facet.style, dtype=jnp.float32),
        centring=jnp.asarray(item_centring),
        item_features=jnp.asarray(x_features),
        **dif_groups(dataset, config.dif, use_static),
    )
    return inputs, pairs


def anchor_units(unit_n: np.ndarray, n_items: int) -> np.ndarray:
    """Each item's anchoring unit (see :attr:`ModelInputs.anchor_unit`), shape (Q,)."""
    per_judge = np.asarray(unit_n).reshape(-1, n_items)  # (judges, Q)
    return (np.argmax(per_judge, axis=0) * n_items + np.arange(n_items)).astype(np.int32)


def _check_features(config: ModelConfig) -> None:
    """Raise :class:`ConfigError` unless the specification can take item features."""
    if not DualEvalModel(config).arena.has_items:
        raise ConfigError("item features need item parameters, which mode 'bt' does not have")
    if config.item_prior != "hierarchical":
        raise ConfigError(
            "item features shift the hierarchical item prior's location; "
            f"item_prior is {config.item_prior!r}"
        )


def _domains(dataset: Dataset, config: ModelConfig) -> tuple[int, np.ndarray]:
    """``n_domains`` and ``item_domain`` of :class:`ModelInputs` (see there).

    Raises
    ------
    ConfigError
        With ``abilities = "domain"``, when no fitted item names a domain.
    """
    if config.dims > 1:  # the loadings' groups: domains, and items without one
        return len(dataset.domains), dataset.domain_index
    if config.abilities != "domain":
        return 0, np.zeros(dataset.n_items, np.int32)
    if len(dataset.domains) == 0:
        raise ConfigError(
            "abilities 'domain' needs a domain per item, and no item in the data names one "
            "(add a 'domain' or 'category' field to the input rows)"
        )
    return len(dataset.domains), dataset.domain_index
