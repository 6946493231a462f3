"""Every site of the model is declared once (bayes_dualeval.model.parameters).

The model is traced (abstractly: shapes only) under every kind of specification, and
each of its latent and deterministic sites must have its line in the declaration, with
as many dimensions as the site has axes; the lists the package derives from the
declaration and from the fields of ``ModelInputs`` are checked against what they replace.
"""

from __future__ import annotations

import dataclasses
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.buckets import padded_to
from bayes_dualeval.inference.sites import model_sites
from bayes_dualeval.model import parameters
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs, build_inputs, fields_of
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.posterior.idata import _site_dims


def _dataset(judges=0):
    extra = {"judges": judges, "self_preference": 1.0, "style_effect": 0.5} if judges else {}
    extra["graders"] = 3 if judges else 1  # the static labels' judges too
    static, arena, _ = simulate(6, 10, 7, missing=0.15, n_domains=2, seed=1, **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        style = ("length",) if judges else ()
        return Dataset.from_frames(static=static, arena=arena, style=style)


SPECS = {
    "2pl": (ModelConfig(), 0),
    "4pl hierarchical": (ModelConfig(irt="4pl"), 0),
    "3pl independent": (ModelConfig(irt="3pl", item_prior="independent"), 0),
    "domain abilities": (ModelConfig(abilities="domain"), 0),
    "two dimensions": (ModelConfig(dims=2), 0),
    "reward": (ModelConfig(arena_likelihood="reward"), 0),
    "bt": (ModelConfig(mode="bt"), 0),
    "item features": (ModelConfig(), "features"),
    "judges, families, style, graders, dif": (ModelConfig(dif="family"), 3),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_every_site_the_model_samples_is_declared_with_its_dimensions(name):
    config, extra = SPECS[name]
    ds = _dataset(judges=extra if isinstance(extra, int) else 0)
    inputs, _ = build_inputs(ds, config)
    if extra == "features":
        rng = np.random.default_rng(0)
        features = rng.normal(size=(ds.n_items, 2)).astype(np.float32)
        inputs = dataclasses.replace(inputs, item_features=jnp.asarray(features))
    sites = model_sites(inputs, config)
    seen = [
        n
        for n, s in sites.items()
        if (s.kind == "sample" and not s.observed and n not in ("arena", "static"))
        or s.kind == "deterministic"
    ]
    assert seen
    for n in seen:
        parameters.dims_of(n)  # declared
        # as many dimensions as axes (the posterior adds chain and draw)
        assert _site_dims(n, 2 + len(sites[n].shape)) is not None, (n, sites[n].shape)
    if extra == 3:
        assert set(parameters.FACET_VALUES + parameters.STATIC_SITES) <= set(seen)


def test_an_undeclared_site_is_an_error():
    with pytest.raises(KeyError, match="not declared"):
        parameters.dims_of("theta_new")


def test_the_derived_lists_are_those_the_package_kept_by_hand():
    assert parameters.LIKELIHOOD_SITES == (
        "theta", "theta_domain", "theta_dims", "loading", "b", "a", "c", "d", "gamma",
        "sigma", "level_c", "grader_severity", "dif_shift", "gamma_judge", "severity",
        "level_scale", "judge_bias", "style_coef",
    )  # fmt: skip
    assert parameters.STATIC_SITES == ("grader_severity", "dif_shift")
    assert parameters.ARENA_SITES == (
        "gamma",
        "sigma",
        "level_c",
        "gamma_judge",
        "severity",
        "level_scale",
        "judge_bias",
        "style_coef",
    )
    assert fields_of("static_cell") == (
        "static_model", "static_item", "static_y", "static_n", "static_grader",
    )  # fmt: skip
    assert fields_of("pair") == ("pair_i", "pair_j", "pair_w", "pair_t", "pair_item")
    sizes = fields_of("size")
    assert "n_models" in sizes and "pair_batch" in sizes and "static_y" not in sizes
    assert all(f.metadata for f in dataclasses.fields(ModelInputs) if f.type == "int")


def test_padding_reads_the_declared_fields():
    inputs, _ = build_inputs(_dataset(), ModelConfig())
    s, p = inputs.static_y.shape[0], inputs.pair_w.shape[0]
    padded = padded_to(inputs, s + 3, p + 5)
    for name in fields_of("static_cell"):
        assert getattr(padded, name).shape[0] == s + 3, name
    for name in fields_of("pair"):
        assert getattr(padded, name).shape[0] == p + 5, name
    assert float(jnp.sum(padded.static_n[s:])) == 0 and float(jnp.sum(padded.pair_w[p:])) == 0
