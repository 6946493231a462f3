"""Static labels as a models x items matrix: the density of the cells, chosen by coverage."""

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
        "static_mask": inputs.static_mask[rows],
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
                                  inputs.static_mask)),
        strict=True,
    ):  # fmt: skip
        if w > 0:
            k[m, column[int(q)]] += y
            n[m, column[int(q)]] += 1
    np.testing.assert_array_equal(counts[0], k)
    np.testing.assert_array_equal(counts[1], n)
    assert n.max() == 3 and n.sum() == float(np.sum(np.asarray(inputs.static_mask)))


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

    @jax.jit
    def joint(latent, layouts):
        values = [log_density(dualeval_model, (x, config), {}, latent)[0] for x in layouts]
        return jnp.stack(values)

    for seed in (0, 1):
        tr = compiled_trace(dualeval_model, cells, config, seed=seed)
        latent = {
            k: v["value"] for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]
        }
        values = np.asarray(joint(latent, layouts), np.float64)
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
    assert layout.laid_out(full).static_counts is not None
    assert layout.static_layout(sparse) == "cells"
    assert layout.laid_out(sparse).static_counts is None
    assert layout.static_layout(full.with_batches(8, 0)) == "cells"
    assert layout.static_layout(arena_only) == "none"
    assert layout.laid_out(arena_only) is arena_only
    # padded cells do not count as observed
    padded = padded_to(sparse, 4 * sparse.static_y.shape[0], sparse.pair_w.shape[0])
    assert layout.static_coverage(padded) == pytest.approx(layout.static_coverage(sparse))
