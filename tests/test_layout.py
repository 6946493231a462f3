"""Static labels and arena pairs as matrices: the density of the lists, chosen by coverage."""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compiled_trace
from numpyro.infer.util import log_density

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import layout
from bayes_dualeval.inference.buckets import padded_to
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate


def _dataset(missing=0.2, dims=1, arena=6, seed=3):
    static, arena_frame, _ = simulate(
        5, 14, arena, n_domains=2, missing=missing, dims=dims, seed=seed
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena_frame if arena else None)


def _with_repeats(inputs, rows):
    """``inputs`` with the static cells ``rows`` answered a second time, the other way."""
    rows = np.asarray(rows)
    extra = {
        "static_model": inputs.static_model[rows],
        "static_item": inputs.static_item[rows],
        "static_y": 1.0 - inputs.static_y[rows],
        "static_n": inputs.static_n[rows],
    }
    return dataclasses.replace(
        inputs,
        **{k: jnp.concatenate([getattr(inputs, k), v]) for k, v in extra.items()},
    )


def test_the_matrix_counts_every_answer_and_no_padded_cell():
    inputs, _ = build_inputs(_dataset(), ModelConfig())
    inputs = _with_repeats(inputs, [0, 3, 3])  # cell 3 three times in all
    inputs = padded_to(inputs, inputs.static_y.shape[0] + 5, inputs.pair_w.shape[0])
    counts = np.asarray(layout.with_static_matrix(inputs).static_counts)
    assert counts.shape == (2, inputs.n_models, inputs.n_static_items)
    k = np.zeros(counts.shape[1:])
    n = np.zeros(counts.shape[1:])
    column = {int(q): c for c, q in enumerate(np.asarray(inputs.static_items))}
    for m, q, y, w in zip(
        *(np.asarray(x) for x in (inputs.static_model, inputs.static_item, inputs.static_y,
                                  inputs.static_n)),
        strict=True,
    ):  # fmt: skip
        if w > 0:
            k[m, column[int(q)]] += y
            n[m, column[int(q)]] += 1
    np.testing.assert_array_equal(counts[0], k)
    np.testing.assert_array_equal(counts[1], n)
    assert n.max() == 3 and n.sum() == float(np.sum(np.asarray(inputs.static_n)))


#: every branch of the matrix's likelihood: no slope (1PL), floors and ceilings with a
#: weighted static term (4PL), abilities per domain (integer columns) and per dimension
#: (weights), static labels alone; the 2PL is the links of the last three
CONFIGS = {
    "1pl": (ModelConfig(irt="1pl"), {}),
    "4pl, reward, lambda_static 0.5": (
        ModelConfig(irt="4pl", arena_likelihood="reward", lambda_static=0.5),
        {},
    ),
    "domain abilities": (ModelConfig(abilities="domain"), {}),
    "two dimensions": (ModelConfig(dims=2), {"dims": 2}),
    "static only, independent items": (
        ModelConfig(mode="static", item_prior="independent"),
        {"arena": 0},
    ),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_matrix_gives_the_log_joint_of_the_cells(name):
    """The same log joint from the matrix as from the cells, at two prior draws.

    The data have missing cells, a model answering items more than once (either way) and
    padded cells; the log joint from the cells is NumPyro's, with the observed ``static_y``.
    """
    config, data = CONFIGS[name]
    inputs, _ = build_inputs(_dataset(**data), config, centred="auto")
    inputs = _with_repeats(inputs, [1, 2, 2, 7])
    cells = padded_to(inputs, inputs.static_y.shape[0] + 3, inputs.pair_w.shape[0])
    # every label the other way: the matrix must follow the labels, not just match once
    flipped = dataclasses.replace(cells, static_y=1.0 - cells.static_y)
    matrix = layout.with_static_matrix
    layouts = (cells, matrix(cells), flipped, matrix(flipped))

    # one program per layout's structure (the cells, the matrix), each of one log joint:
    # XLA compiles two copies of the model, not one for each of the four layouts
    joint = jax.jit(lambda latent, x: log_density(dualeval_model, (x, config), {}, latent)[0])

    for seed in (0, 1):
        tr = compiled_trace(dualeval_model, cells, config, seed=seed)
        latent = {
            k: v["value"] for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]
        }
        values = np.array([float(joint(latent, x)) for x in layouts])
        assert np.all(np.isfinite(values))
        np.testing.assert_allclose(values[1], values[0], rtol=2e-6)
        np.testing.assert_allclose(values[3], values[2], rtol=2e-6)
        assert abs(values[2] - values[0]) > 1e-2


def test_the_layout_follows_coverage_and_keeps_batches_and_arena_only_data_as_they_are():
    full, _ = build_inputs(_dataset(missing=0.0), ModelConfig())
    sparse, _ = build_inputs(_dataset(missing=0.6), ModelConfig())
    arena_only, _ = build_inputs(_dataset(), ModelConfig(mode="arena"))
    assert layout.static_coverage(full) == 1.0
    assert layout.static_coverage(sparse) < layout.MATRIX_COVERAGE
    assert layout.static_layout(full) == "matrix"
    assert layout.laid_out(full, ModelConfig()).static_counts is not None
    assert layout.static_layout(sparse) == "cells"
    assert layout.laid_out(sparse, ModelConfig()).static_counts is None
    assert layout.static_layout(full.with_batches(8, 0)) == "cells"
    assert layout.static_layout(arena_only) == "none"
    assert layout.laid_out(arena_only, ModelConfig(mode="arena")).static_counts is None
    # padded cells do not count as observed
    padded = padded_to(sparse, 4 * sparse.static_y.shape[0], sparse.pair_w.shape[0])
    assert layout.static_coverage(padded) == pytest.approx(layout.static_coverage(sparse))


def _swapped(inputs, every=1):
    """The same pairs, every ``every``-th stored the other way round (sides swapped, ``1 - t``).

    ``pair_linear`` (``sum w (1 - t)`` where a cell is first, minus where it is second)
    is recomputed from the pairs, so the density is unchanged.
    """
    swap = np.arange(inputs.pair_w.shape[0]) % every == 0
    i = np.where(swap, np.asarray(inputs.pair_j), np.asarray(inputs.pair_i))
    j = np.where(swap, np.asarray(inputs.pair_i), np.asarray(inputs.pair_j))
    w, t = np.asarray(inputs.pair_w), np.asarray(inputs.pair_t)
    t = np.where(swap, 1.0 - t, t)
    linear = np.zeros(inputs.arena_model.shape[0], np.float64)
    np.add.at(linear, i, w * (1.0 - t))
    np.add.at(linear, j, -w * (1.0 - t))
    return dataclasses.replace(
        inputs,
        pair_i=jnp.asarray(i),
        pair_j=jnp.asarray(j),
        pair_t=jnp.asarray(t, jnp.float32),
        pair_linear=jnp.asarray(linear, jnp.float32),
    )


#: every branch the arena matrix reads: the level term with anchored prompts (the
#: default), no slope (1PL) with DualEval's unweighted pairs, no level and both-bad pairs
#: weighted, abilities per domain and per dimension, the arena alone
ARENA_CONFIGS = {
    "2pl, anchored": (ModelConfig(), {}),
    "1pl, pairs-full, no level, lambda_bb 2": (
        ModelConfig(irt="1pl", arena_likelihood="pairs-full", arena_level="none", lambda_bb=2.0),
        {},
    ),
    "domain abilities, lambda_arena 0.5": (
        ModelConfig(abilities="domain", lambda_arena=0.5),
        {},
    ),
    "two dimensions": (ModelConfig(dims=2), {"dims": 2}),
    "arena only": (ModelConfig(mode="arena"), {}),
}


@pytest.mark.parametrize("name", list(ARENA_CONFIGS))
def test_the_arena_matrix_gives_the_log_joint_and_gradient_of_the_lists(name):
    """The same log joint and gradient from the arena matrix as from the lists.

    At two prior draws, with padded pairs, with pairs stored as the data give them
    (first model before second) and with every other pair stored the other way round
    (the matrix's slots hold ``i < j``), and with every soft target reversed (another
    density, which the matrix must follow too).
    """
    config, data = ARENA_CONFIGS[name]
    inputs, _ = build_inputs(_dataset(missing=0.1, arena=8, **data), config, centred="auto")
    lists = padded_to(inputs, inputs.static_y.shape[0], inputs.pair_w.shape[0] + 5)
    mixed = _swapped(lists, every=2)
    models = np.asarray(mixed.arena_model)
    real = np.asarray(mixed.pair_w) > 0
    first, second = models[np.asarray(mixed.pair_i)], models[np.asarray(mixed.pair_j)]
    assert 0 < np.sum(real & (first > second)) < np.sum(real)  # both orientations occur
    reversed_targets = dataclasses.replace(lists, pair_t=1.0 - lists.pair_t)
    reversed_targets = _swapped(_swapped(reversed_targets))  # pair_linear from the targets
    matrix = layout.with_arena_matrix
    layouts = (lists, matrix(lists), matrix(mixed), reversed_targets, matrix(reversed_targets))

    def log_joint(latent, x):
        return log_density(dualeval_model, (x, config), {}, latent)[0]

    # one program per layout's structure (the lists, the matrix), each of one gradient:
    # XLA compiles two copies of the model's gradient, not one for each of the five layouts
    value_and_grad = jax.jit(jax.value_and_grad(log_joint))

    for seed in (0, 1):
        tr = compiled_trace(dualeval_model, lists, config, seed=seed)
        latent = {
            k: v["value"] for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]
        }
        results = [value_and_grad(latent, x) for x in layouts]
        values = np.array([float(v) for v, _ in results])
        assert np.all(np.isfinite(values))
        np.testing.assert_allclose(values[1:3], values[0], rtol=2e-6)
        np.testing.assert_allclose(values[4], values[3], rtol=2e-6)
        assert abs(values[3] - values[0]) > 1e-2
        for k, g in results[0][1].items():
            scale = float(np.max(np.abs(g))) + 1.0
            for other in (1, 2):
                np.testing.assert_allclose(results[other][1][k], g, atol=2e-5 * scale, err_msg=k)
            np.testing.assert_allclose(
                results[4][1][k], results[3][1][k], atol=2e-5 * scale, err_msg=k
            )


def test_the_arena_matrix_holds_every_cell_and_pair_weight_once():
    inputs, _ = build_inputs(_dataset(missing=0.1, arena=8), ModelConfig())
    inputs = padded_to(inputs, inputs.static_y.shape[0], inputs.pair_w.shape[0] + 7)
    matrix = layout.with_arena_matrix(inputs).arena_matrix
    m = inputs.n_models
    assert matrix.weights.shape == (3, len(np.unique(np.asarray(inputs.arena_item))), m)
    assert matrix.slots.shape == (matrix.weights.shape[1], m * (m - 1) // 2)
    weights = np.asarray(matrix.weights, np.float64)
    assert weights[0].sum() == inputs.arena_model.shape[0] and weights[0].max() == 1.0
    np.testing.assert_allclose(weights[1].sum(), np.sum(np.asarray(inputs.bb_count)), rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(matrix.slots).sum(), np.sum(np.asarray(inputs.pair_w)), rtol=1e-6
    )


def test_the_arena_layout_needs_pairs_that_fill_the_matrix():
    full, _ = build_inputs(_dataset(missing=0.0), ModelConfig())
    assert layout.pair_coverage(full) >= layout.least_pair_coverage(full.n_models)
    # the least coverage grows with the models: at 50 and more the matrix never pays
    assert layout.least_pair_coverage(12) == layout.PAIR_COVERAGE
    assert layout.least_pair_coverage(30) == pytest.approx(0.6)
    assert layout.least_pair_coverage(50) >= 1.0
    assert layout.arena_layout(full, ModelConfig()) == "matrix"
    assert layout.laid_out(full, ModelConfig()).arena_matrix is not None
    for config in (ModelConfig(mode="bt"), ModelConfig(arena_likelihood="reward")):
        inputs, _ = build_inputs(_dataset(missing=0.0), config)
        assert layout.arena_layout(inputs, config) == "cells"
        assert layout.laid_out(inputs, config).arena_matrix is None
    assert layout.arena_layout(full.with_batches(0, 8), ModelConfig()) == "cells"
    static_only, _ = build_inputs(_dataset(arena=0), ModelConfig(mode="static"))
    assert layout.arena_layout(static_only, ModelConfig(mode="static")) == "none"
    # a model that answered a prompt twice: the matrix has one place for it
    twice = dataclasses.replace(
        full,
        arena_model=jnp.concatenate([full.arena_model, full.arena_model[:1]]),
        arena_item=jnp.concatenate([full.arena_item, full.arena_item[:1]]),
        arena_z=jnp.concatenate([full.arena_z, full.arena_z[:1]]),
        pair_linear=jnp.concatenate([full.pair_linear, jnp.zeros(1)]),
        bb_count=jnp.concatenate([full.bb_count, jnp.zeros(1)]),
    )
    assert layout.pair_coverage(twice) == 0.0
    # few decisive pairs: the lists
    few = dataclasses.replace(full, pair_w=full.pair_w * (jnp.arange(full.pair_w.shape[0]) < 3))
    assert layout.arena_layout(few, ModelConfig()) == "cells"
