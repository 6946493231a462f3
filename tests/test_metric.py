"""NUTS's starting metric (``bayes_dualeval.inference.metric``).

The Hessian diagonal is read off a few Hessian-vector products on the assumption that,
given the global sites, different items' parameters do not interact. These tests check
that diagonal against the full Hessian of the joint model (static and anchored arena
items, hierarchical priors), so a model change that couples items makes them fail.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from numpyro.infer.util import potential_energy

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import metric
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model, global_sites
from bayes_dualeval.model.simulate import simulate


@pytest.fixture(scope="module")
def setup():
    static, arena, _ = simulate(6, 12, 10, prompt_offset_sd=0.0, seed=4)
    dataset = Dataset.from_frames(static=static, arena=arena)
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(dataset, config, centred="auto")
    return config, inputs


def test_probes_cover_every_coordinate_once():
    sizes = {"a": 2, "b": 3, "c": 1}
    spans, reads = metric._probes(sizes, ["b"])
    # a: two unit vectors, b: one indicator of its three coordinates, c: one unit vector
    np.testing.assert_array_equal(spans, [[0, 1], [1, 2], [2, 5], [5, 6]])
    np.testing.assert_array_equal(reads, [[0, 0], [1, 1], [2, 2], [2, 3], [2, 4], [3, 5]])


def test_diagonal_matches_the_full_hessian(setup):
    """Exact products in float32: agree to 1e-3 relative (1e-3 absolute)."""
    config, inputs = setup
    key = jax.random.PRNGKey(3)
    start = metric.start_point(inputs, config, key)
    # anchored: the level sampled in units of gamma (model/anchoring.py, LEVEL_SITES)
    assert inputs.n_anchored > 0 and "log_a_raw" in start and "level_u" in start
    flat, unravel = ravel_pytree(start)

    def potential(x):
        return potential_energy(dualeval_model, (inputs, config), {}, unravel(x))

    full = np.asarray(jax.jit(jax.hessian(potential))(flat))
    # items interact only through the global sites: no entry between two items of a site
    names = sorted(start)
    offsets = dict(zip(names, np.cumsum([0] + [np.size(start[k]) for k in names]), strict=False))
    for site in ("log_a_raw", "b_raw"):
        lo = offsets[site]
        block = full[lo : lo + np.size(start[site]), lo : lo + np.size(start[site])]
        assert np.abs(block - np.diag(np.diag(block))).max() < 1e-4 * np.abs(block).max()
    diagonal = ravel_pytree(metric.hessian_diagonal(inputs, config, key))[0]
    np.testing.assert_allclose(np.asarray(diagonal), np.diag(full), rtol=1e-3, atol=1e-3)


def test_start_metric_is_numpyros_block_dictionary(setup):
    config, inputs = setup
    dense = global_sites(config, inputs)
    start = metric.start_point(inputs, config, jax.random.PRNGKey(0))
    result = metric.start_metric(inputs, config, dense, seed=0)
    rest = tuple(sorted(set(start) - set(dense)))
    assert list(result) == [dense, rest]
    n_dense = sum(np.size(start[k]) for k in dense)
    block = result[dense]
    assert block.shape == (n_dense, n_dense)
    np.testing.assert_array_equal(block, np.diag(np.diag(block)))
    assert result[rest].shape == (sum(np.size(start[k]) for k in rest),)
    values = np.concatenate([np.diag(block), result[rest]])
    # floored at the identity: never more room than the identity, and some far less
    assert np.all((values > 0) & (values <= 1.0))
    assert values.min() < 0.2


def test_only_large_data_start_from_the_curvature(setup, monkeypatch):
    """Which data the pilot runs for. That NUTS then starts from the curvature (a single
    chain and parallel chains, with ``MIN_TERMS`` at 0) is read in test_compiled's
    compile-once fits, and that small data start from the identity in test_recovery's
    shared fit: a fit of its own here compiled 20 s of programs no other test used."""
    config, inputs = setup
    assert not metric.worth_it(inputs)  # a few hundred terms
    assert metric.n_terms(inputs) < metric.MIN_TERMS
    monkeypatch.setattr(metric, "MIN_TERMS", metric.n_terms(inputs))
    assert metric.worth_it(inputs)


def test_pilot_gives_each_chain_a_start_with_its_potential_and_gradient(setup):
    """The starts NUTS is given instead of searching for them in its own program: one per
    chain, each with the potential and gradient NumPyro would compute there (float32: to
    1e-4 relative), and the metric of the curvature at the first chain's start."""
    config, inputs = setup
    dense = global_sites(config, inputs)
    chains = 3
    result = metric.pilot(inputs, config, dense, seed=5, chains=chains)
    starts = result.starts
    assert starts is not None
    keys = jax.random.split(jax.random.PRNGKey(5), chains)

    def potential(z):
        return potential_energy(dualeval_model, (inputs, config), {}, z)

    value_and_grad = jax.jit(jax.value_and_grad(potential))
    for c in range(chains):
        z = {k: v[c] for k, v in starts.z.items()}
        for k, v in metric.start_point(inputs, config, keys[c]).items():
            np.testing.assert_array_equal(np.asarray(z[k]), np.asarray(v))  # the key's start
        energy, gradient = value_and_grad(z)
        np.testing.assert_allclose(float(starts.potential_energy[c]), float(energy), rtol=1e-4)
        for k in z:
            np.testing.assert_allclose(
                np.asarray(starts.z_grad[k][c]), np.asarray(gradient[k]), rtol=1e-4, atol=1e-3
            )
    first = ravel_pytree({k: v[0] for k, v in starts.z.items()})[0]
    assert not np.allclose(first, ravel_pytree({k: v[1] for k, v in starts.z.items()})[0])
    curvature = metric.hessian_diagonal(inputs, config, keys[0])
    inverse = {
        k: 1.0 / np.maximum(np.asarray(v, np.float64), metric.FLOOR) for k, v in curvature.items()
    }
    rest = tuple(sorted(set(inverse) - set(dense)))
    np.testing.assert_allclose(
        np.diag(result.metric[dense]),
        np.concatenate([np.ravel(inverse[k]) for k in dense]),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        result.metric[rest], np.concatenate([np.ravel(inverse[k]) for k in rest]), rtol=1e-5
    )
    # one chain: its start without the chain axis, as NumPyro takes it
    one = metric.pilot(inputs, config, dense, seed=5, chains=1).starts
    assert np.ndim(one.potential_energy) == 0
    assert all(np.shape(one.z[k]) == np.shape(starts.z[k])[1:] for k in starts.z)


def test_pilot_leaves_the_starts_to_numpyro_where_a_gradient_is_not_finite(setup, monkeypatch):
    """A start whose potential or gradient is not finite is no start: NumPyro's own search
    then finds the chains' starts, as it does without the pilot."""
    config, inputs = setup
    dense = global_sites(config, inputs)
    real = metric._pilot

    def broken(keys, inputs, config):
        curvature, starts, energy, gradient = real(keys, inputs, config)
        name = sorted(gradient)[0]
        gradient = dict(gradient, **{name: gradient[name].at[-1].set(np.nan)})
        return curvature, starts, energy, gradient

    monkeypatch.setattr(metric, "_pilot", broken)
    result = metric.pilot(inputs, config, dense, seed=5, chains=3)
    assert result.starts is None
    assert np.isfinite(np.diag(result.metric[dense])).all()  # the metric stands
