"""The data of a simulation-based calibration: drawn from the model's own prior predictive.

Every simulation has the same design (``M`` models each answering ``Q`` static questions
once), so every fit has the same shapes and shares compiled programs. The generator *is*
the model: :func:`prior_predictive` runs the NumPyro function
(:func:`bayes_dualeval.model.joint.dualeval_model`) forward with
:class:`numpyro.infer.Predictive`, every hyperparameter drawn from its prior and the static
labels drawn from the observed site ``static_y`` (whose observed values are set aside by
:func:`unobserved`), all simulations in one vectorised call.

A *perturbed* generator is not the model, so the calibration should fail: a prior setting
of the specification changed for the generator only (``theta_scale=2`` draws abilities
twice as spread as the fitted prior says), or ``flip=0.1`` (each label flipped with that
probability after it is drawn: a likelihood the model does not have).

Only the static labels are a generative site. The arena terms are factors of a
pseudo-likelihood (the soft-target pairs) or a likelihood with a prompt offset integrated
out under a flat prior (rewards), so they have no prior predictive to draw from:
:func:`check_generative` refuses a specification that fits them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model.config import ModelConfig

#: Generator-only keys that are not settings of the specification.
FLIP = "flip"
#: Settings of the specification a perturbed generator may change (numeric priors).
PERTURBABLE = (
    "theta_scale", "b_loc_scale", "b_scale_scale", "loga_loc_scale", "loga_scale_scale",
    "guess_mean", "guess_strength", "guess_spread", "domain_scale",
)  # fmt: skip


def check_generative(config: ModelConfig) -> None:
    """Refuse a specification whose likelihood is not generative.

    Raises
    ------
    ConfigError
        Unless ``mode`` is ``static``: the arena terms are factors with no prior predictive.
    """
    if config.mode != "static":
        raise ConfigError(
            f"simulation-based calibration draws data from the model's prior predictive, and "
            f"only the static labels are a generative likelihood: the arena's soft-target "
            f"pairs are a pseudo-likelihood and the reward likelihood integrates each "
            f"prompt's offset out under a flat prior; use {setting('mode', 'static')} "
            f"(got {setting('mode', config.mode)})"
        )


def parse_perturbation(items) -> dict:
    """``["theta_scale=2", ...]`` as ``{"theta_scale": 2.0}``, checked.

    Raises
    ------
    ConfigError
        An item without ``=``, an unknown key or a value that is not a number.
    """
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or key not in (*PERTURBABLE, FLIP):
            raise ConfigError(
                f"a perturbation is KEY=VALUE with KEY one of {', '.join((*PERTURBABLE, FLIP))}; "
                f"got {item!r}"
            )
        try:
            out[key] = float(value)
        except ValueError:
            raise ConfigError(f"perturbation {key} needs a number; got {value!r}") from None
    if not 0 <= out.get(FLIP, 0.0) <= 1:
        raise ConfigError(f"perturbation flip is a probability; got {out[FLIP]}")
    return out


def design(n_models: int, n_items: int, n_domains: int = 1) -> Dataset:
    """The fixed design: ``n_models`` models each answering ``n_items`` static questions once.

    With ``n_domains`` above 1 the questions take domains ``d0``, ``d1``, ... in turn (for
    specifications with an ability per domain). The labels are placeholders (alternating),
    replaced by each simulation's.
    """
    if n_models < 2 or n_items < 2:
        raise ConfigError(
            f"the design needs 2 models and 2 items at least; got {n_models} and {n_items}"
        )
    if not 1 <= n_domains <= n_items // 2:
        raise ConfigError(
            f"the design's {n_items} questions give 1 to {n_items // 2} domains of two "
            f"questions at least; got {n_domains}"
        )
    model = np.repeat(np.arange(n_models), n_items)
    item = np.tile(np.arange(n_items), n_models)
    frame = pd.DataFrame(
        {
            "model_label": [f"m{k:03d}" for k in model],
            "dataset": "q",
            "sample_index": item,
            "correct": (model + item) % 2,
        }
    )
    if n_domains > 1:
        frame["domain"] = [f"d{k % n_domains}" for k in item]
    return Dataset.from_frames(static=frame, source="sbc")


def unobserved(fn, name: str = "static_y"):
    """``fn`` with its observed site ``name`` drawn instead of read from the data.

    A :class:`numpyro.primitives.Messenger` (imported here: JAX starts on first use).
    """
    from numpyro.primitives import Messenger

    class Unobserved(Messenger):
        def process_message(self, msg):
            if msg["type"] == "sample" and msg["name"] == name:
                msg["value"] = None
                msg["is_observed"] = False

    return Unobserved(fn)


def prior_predictive(
    dataset: Dataset, config: ModelConfig, n: int, seed: int, perturb: dict | None = None
) -> dict:
    """``n`` draws of every parameter and of the static labels from the prior predictive.

    Parameters
    ----------
    dataset : Dataset
        The design (:func:`design`); its labels are not read.
    config : ModelConfig
        The specification fitted; the generator's is ``config`` with the perturbation's
        settings replaced.
    n, seed : int
    perturb : dict, optional
        From :func:`parse_perturbation`.

    Returns
    -------
    dict of str to numpy.ndarray
        Every site and deterministic value with a leading axis of ``n``; ``static_y`` holds
        the labels (0 or 1) of the design's cells in the dataset's order.
    """
    import jax
    from numpyro.infer import Predictive

    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.joint import dualeval_model

    perturb = dict(perturb or {})
    flip = perturb.pop(FLIP, 0.0)
    generator = dataclasses.replace(config, **perturb)
    inputs, _ = build_inputs(dataset, generator, centred="none")
    if not (
        np.array_equal(np.asarray(inputs.static_model), dataset.static_model)
        and np.array_equal(np.asarray(inputs.static_item), dataset.static_item)
    ):  # pragma: no cover - the design has one answer per cell, kept in order
        raise ConfigError("the design's cells are not the model's static cells")
    key, flip_key = jax.random.split(jax.random.PRNGKey(seed))
    predictive = Predictive(unobserved(dualeval_model), num_samples=n)
    out = {k: np.asarray(v) for k, v in predictive(key, inputs, generator).items()}
    y = out["static_y"].round().astype(np.int32)
    if flip:
        flipped = np.asarray(jax.random.bernoulli(flip_key, flip, y.shape))
        y = np.where(flipped, 1 - y, y)
    out["static_y"] = y
    return out


def with_labels(dataset: Dataset, labels: np.ndarray) -> Dataset:
    """The design with one simulation's labels (shape (S,), the dataset's cell order)."""
    return dataclasses.replace(dataset, static_y=np.asarray(labels, dtype=np.int32))
