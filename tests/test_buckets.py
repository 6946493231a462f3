"""Shape buckets: NUTS's padded inputs give the same posterior density as the data."""

import warnings

import jax
import numpy as np
import pytest
from numpyro.infer.util import initialize_model, potential_energy

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.buckets import STEP, bucket, padded
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate


def test_buckets_are_few_and_tight():
    sizes = [bucket(n) for n in range(1, 20001)]
    assert bucket(0) == 0
    assert all(s >= n for n, s in zip(range(1, 20001), sizes, strict=True))
    # at most STEP - 1 (19%) of padding beyond the smallest bucket, plus alignment
    assert all(s <= max(64, n * STEP + 8) for n, s in zip(range(1, 20001), sizes, strict=True))
    assert len(set(sizes)) <= 40  # 1 to 20,000 in 35 programs, not 20,000
    assert sizes == sorted(sizes)


# 3PL: static cells with floors, pairs and the anchored level term; BT: pairs of models
@pytest.mark.parametrize("spec", ["dualeval-3pl", "bradley-terry"])
def test_padded_inputs_have_the_same_density_and_gradient(spec):
    static, arena, _ = simulate(7, 30, 12, missing=0.2, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena)
    config = load_spec(spec)
    inputs, _ = build_inputs(ds, config, centred="auto")
    wide = padded(inputs)
    assert wide.pair_w.shape[0] > inputs.pair_w.shape[0]  # something was padded
    if inputs.has_static:
        assert wide.static_y.shape[0] > inputs.static_y.shape[0]
        assert float(wide.static_n.sum()) == inputs.static_y.shape[0]

    # a valid point, found inside one compiled program (eagerly it takes many seconds)
    z = jax.jit(
        lambda x: (
            initialize_model(
                jax.random.PRNGKey(0), dualeval_model, model_args=(x, config)
            ).param_info.z
        )
    )(inputs)

    @jax.jit
    def grad(point, x):
        return jax.value_and_grad(lambda u: potential_energy(dualeval_model, (x, config), {}, u))(
            point
        )

    rng = np.random.default_rng(0)
    for _ in range(3):
        point = {k: v + rng.normal(0, 0.3, np.shape(v)).astype(np.float32) for k, v in z.items()}
        v, g = grad(point, inputs)
        v_wide, g_wide = grad(point, wide)
        np.testing.assert_allclose(float(v_wide), float(v), rtol=1e-5)
        for k in g:
            np.testing.assert_allclose(g_wide[k], g[k], rtol=1e-4, atol=1e-4)
