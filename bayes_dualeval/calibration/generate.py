"""The data of a simulation-based calibration: drawn from the model's own prior predictive.

Every simulation has the same design (``M`` models each answering ``Q`` static questions
once, and scored once on each of ``P`` arena prompts), so every fit has the same shapes and
shares compiled programs. The generator *is* the model: :func:`prior_predictive` runs the
NumPyro function (:func:`bayes_dualeval.model.joint.dualeval_model`) forward with
:class:`numpyro.infer.Predictive`, every hyperparameter drawn from its prior and the static
labels drawn from the observed site ``static_y`` (whose observed values are set aside by
:func:`unobserved`), all simulations in one vectorised call.

*Rewards.* The reward likelihood (``arena_likelihood = "reward"``) is a factor, not a
site, so its data are drawn here from the density it evaluates: ``z_iq = c_q + gamma
(p_iq - 1/2) + sigma e_iq`` with standard normal ``e``
(:func:`~bayes_dualeval.model.arena_term.reward_score`, the model's own ``p_iq``). Without
the level term (``arena_level = "none"``) the likelihood integrates each prompt's offset
``c_q`` out under a flat prior, which is the exact density of the rewards' contrasts within
a prompt whatever ``c_q`` is; the generator draws ``c_q ~ Normal(0, 1)`` (any value gives
the same posterior). With the level term (``arena_level = "mean"``) every prompt's offset
is its source's intercept ``level_c`` (drawn from its prior): the level term's standard
error is then the model's ``sigma / sqrt(n_q)``
(:func:`~bayes_dualeval.model.arena_term.mean_se`), and rewards and level together are that
Gaussian density. The rewards are not z-normalised after they are drawn: the fit reads
them as drawn (normalising would rescale ``gamma`` and ``sigma`` away from their prior).

A *perturbed* generator is not the model, so the calibration should fail: a prior setting
of the specification changed for the generator only (``theta_scale=2`` draws abilities
twice as spread as the fitted prior says), ``flip=0.1`` (each label flipped with that
probability after it is drawn: a likelihood the model does not have), or ``reward_df=3``
(the rewards' noise Student-t with 3 degrees of freedom, scaled to the same standard
deviation ``sigma``: heavier tails than the reward likelihood's).

The soft-target pairs (the default arena term) and Bradley-Terry pairs are factors of a
pseudo-likelihood with no data-generating density: :func:`check_generative` refuses them.
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
FLIP, REWARD_DF = "flip", "reward_df"
#: Settings of the specification a perturbed generator may change (numeric priors).
PERTURBABLE = (
    "theta_scale", "b_loc_scale", "b_scale_scale", "loga_loc_scale", "loga_scale_scale",
    "guess_mean", "guess_strength", "guess_spread", "domain_scale", "gamma_loc",
    "gamma_scale", "sigma_scale",
)  # fmt: skip
#: Every key a perturbation may name.
KEYS = (*PERTURBABLE, FLIP, REWARD_DF)


def check_generative(config: ModelConfig) -> None:
    """Refuse a specification whose likelihood is not generative (see the module).

    Raises
    ------
    ConfigError
        An arena term other than the reward likelihood.
    """
    if config.mode == "static":
        return
    if config.arena_likelihood != "reward" or config.mode == "bt":
        raise ConfigError(
            f"simulation-based calibration draws data from the model's prior predictive, and "
            f"the arena's pairs are a pseudo-likelihood with no density to draw from: use "
            f"{setting('mode', 'static')}, or the reward likelihood (the specification "
            f"dualeval-reward; got {setting('arena_likelihood', config.arena_likelihood)} in "
            f"{setting('mode', config.mode)})"
        )


def key_values(items, keys, what: str = "a perturbation") -> dict:
    """``["KEY=VALUE", ...]`` as ``{KEY: float(VALUE)}``, each key one of ``keys``.

    The one reader of ``--perturb`` items (the fits' calibration here, the measure
    stage's in :mod:`~bayes_dualeval.calibration.measure`); each caller checks its ranges.

    Raises
    ------
    ConfigError
        An item without ``=``, a key outside ``keys`` or a value that is not a number.
    """
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or key not in keys:
            raise ConfigError(
                f"{what} is KEY=VALUE with KEY one of {', '.join(keys)}; got {item!r}"
            )
        try:
            out[key] = float(value)
        except ValueError:
            raise ConfigError(f"perturbation {key} needs a number; got {value!r}") from None
    return out


def parse_perturbation(items) -> dict:
    """``["theta_scale=2", ...]`` as ``{"theta_scale": 2.0}``, checked.

    Raises
    ------
    ConfigError
        An item without ``=``, an unknown key, a value that is not a number, a ``flip``
        outside [0, 1] or a ``reward_df`` of 2 or less.
    """
    out = key_values(items, KEYS)
    if not 0 <= out.get(FLIP, 0.0) <= 1:
        raise ConfigError(f"perturbation flip is a probability; got {out[FLIP]}")
    if out.get(REWARD_DF, 3.0) <= 2:
        raise ConfigError(
            f"perturbation reward_df needs more than 2 degrees of freedom (a finite "
            f"variance); got {out[REWARD_DF]:g}"
        )
    return out


def design(
    n_models: int, n_items: int, n_domains: int = 1, n_prompts: int = 0, n_graders: int = 1
) -> Dataset:
    """The fixed design: ``n_models`` models each answering ``n_items`` static questions once.

    With ``n_domains`` above 1 the questions take domains ``d0``, ``d1``, ... in turn (for
    specifications with an ability per domain). With ``n_prompts`` every model is also
    scored once on each of that many arena prompts (one judge). With ``n_graders`` above 1
    every static answer is labelled by each of that many graders (``g0``, ``g1``, ...). The
    labels and rewards are placeholders, replaced by each simulation's (:func:`with_data`).
    """
    if n_models < 2 or n_items + n_prompts < 2 or n_items == 1 or n_prompts == 1:
        raise ConfigError(
            f"the design needs 2 models and 2 static questions or arena prompts at least "
            f"(none or 2 or more of each); got {n_models} models, {n_items} questions and "
            f"{n_prompts} prompts"
        )
    if n_domains > 1 and not 2 <= n_domains <= n_items // 2:
        raise ConfigError(
            f"the design's {n_items} questions give 1 to {max(n_items // 2, 1)} domains of "
            f"two questions at least; got {n_domains}"
        )
    if n_graders < 1 or (n_graders > 1 and not n_items):
        raise ConfigError(
            f"graders label static answers: the design needs 1 grader or more, and static "
            f"questions for more than one; got {n_graders} graders and {n_items} questions"
        )
    static = arena = None
    if n_items:
        model = np.repeat(np.arange(n_models), n_items)
        item = np.tile(np.arange(n_items), n_models)
        static = pd.DataFrame(
            {
                "model_label": [f"m{k:03d}" for k in model],
                "dataset": "q",
                "sample_index": item,
                "correct": (model + item) % 2,
            }
        )
        if n_domains > 1:
            static["domain"] = [f"d{k % n_domains}" for k in item]
        if n_graders > 1:
            static = pd.concat(
                [static.assign(judge=f"g{k}") for k in range(n_graders)], ignore_index=True
            )
    if n_prompts:
        model = np.repeat(np.arange(n_models), n_prompts)
        prompt = np.tile(np.arange(n_prompts), n_models)
        arena = pd.DataFrame(
            {
                "model_label": [f"m{k:03d}" for k in model],
                "item_id": [f"p{k:03d}" for k in prompt],
                "reward": ((model + prompt) % 3).astype(float),
            }
        )
    return Dataset.from_frames(static=static, arena=arena, source="sbc")


def feature_table(dataset: Dataset, n_features: int, seed: int = 0) -> pd.DataFrame:
    """Item features for the design: ``n_features`` standard normal columns per item.

    Fixed by ``seed`` and shared by every simulation (the regressors are data the model
    conditions on, not drawn from it); in the form
    :func:`~bayes_dualeval.data.features.read_features` returns.
    """
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"item": np.asarray(dataset.items, dtype=str)})
    for k in range(n_features):
        frame[f"f{k}"] = rng.normal(size=len(frame))
    return frame


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
    dataset: Dataset,
    config: ModelConfig,
    n: int,
    seed: int,
    perturb: dict | None = None,
    features: pd.DataFrame | None = None,
) -> dict:
    """``n`` draws of every parameter, the static labels and the rewards from the prior.

    Parameters
    ----------
    dataset : Dataset
        The design (:func:`design`); its labels and rewards are not read.
    config : ModelConfig
        The specification fitted; the generator's is ``config`` with the perturbation's
        settings replaced.
    n, seed : int
    perturb : dict, optional
        From :func:`parse_perturbation`.
    features : pandas.DataFrame, optional
        Item features (:func:`feature_table`): the item prior's regression on them.

    Returns
    -------
    dict of str to numpy.ndarray
        Every site and deterministic value with a leading axis of ``n``; ``static_y`` holds
        the labels (0 or 1) of the design's static cells and ``arena_z`` the rewards of its
        arena cells (where the specification fits them), in the dataset's order.
    """
    import jax
    from numpyro.infer import Predictive

    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.joint import dualeval_model

    perturb = dict(perturb or {})
    flip = perturb.pop(FLIP, 0.0)
    df = perturb.pop(REWARD_DF, None)
    generator = dataclasses.replace(config, **perturb)
    regressors = None
    if features is not None:
        from bayes_dualeval.data.features import design as feature_design

        dataset, regressors = feature_design(features, dataset)
    inputs, _ = build_inputs(dataset, generator, centred="none", features=regressors)
    if not (
        np.array_equal(np.asarray(inputs.static_model), dataset.static_model)
        and np.array_equal(np.asarray(inputs.static_item), dataset.static_item)
    ):  # pragma: no cover - the design has one answer per cell, kept in order
        raise ConfigError("the design's cells are not the model's static cells")
    key, flip_key, reward_key = jax.random.split(jax.random.PRNGKey(seed), 3)
    predictive = Predictive(unobserved(dualeval_model), num_samples=n)
    out = {k: np.asarray(v) for k, v in predictive(key, inputs, generator).items()}
    if "static_y" in out:
        y = out["static_y"].round().astype(np.int32)
        if flip:
            flipped = np.asarray(jax.random.bernoulli(flip_key, flip, y.shape))
            y = np.where(flipped, 1 - y, y)
        out["static_y"] = y
    if inputs.has_arena:
        out["arena_z"] = _rewards(out, inputs, generator, reward_key, df)
    return out


def _rewards(values: dict, inputs, config: ModelConfig, key, df: float | None) -> np.ndarray:
    """Each draw's rewards of the arena cells (see the module), shape (n, R)."""
    import jax
    import jax.numpy as jnp

    from bayes_dualeval.calibration.quantities import SITES
    from bayes_dualeval.model import links
    from bayes_dualeval.model.arena_term import reward_score
    from bayes_dualeval.model.likelihood import cell_eta
    from bayes_dualeval.model.spec import DualEvalModel

    model = DualEvalModel(config)
    arrays = {k: jnp.asarray(values[k]) for k in SITES if values.get(k) is not None}
    n = next(iter(arrays.values())).shape[0]
    cells, prompts = inputs.arena_model.shape[0], inputs.n_items
    source = np.asarray(inputs.level_group)[np.asarray(inputs.arena_unit)]

    def one(draw, k):
        par = model.item_parameters(draw)
        eta = cell_eta(
            model.abilities(draw, inputs), par["a"], par["b"], inputs.arena_model,
            inputs.arena_item,
        )  # fmt: skip
        offset_key, noise_key = jax.random.split(k)
        if "level_c" in draw:  # the level term: the source's intercept, no offset of its own
            offset = jnp.reshape(draw["level_c"], (-1,))[source]
        else:
            offset = jax.random.normal(offset_key, (prompts,))[inputs.arena_item]
        if df is None:
            noise = jax.random.normal(noise_key, (cells,))
        else:  # unit variance, heavier tails
            noise = jax.random.t(noise_key, df, (cells,)) * jnp.sqrt((df - 2.0) / df)
        gamma, sigma = jnp.reshape(draw["gamma"], ()), jnp.reshape(draw["sigma"], ())
        return offset + reward_score(links.probability(eta), gamma) + sigma * noise

    return np.asarray(jax.vmap(one)(arrays, jax.random.split(key, n)), np.float64)


def with_data(dataset: Dataset, values: dict, sim: int) -> Dataset:
    """The design with simulation ``sim``'s labels and rewards (:func:`prior_predictive`)."""
    out = {}
    if "static_y" in values and len(dataset.static_y):
        out["static_y"] = np.asarray(values["static_y"][sim], dtype=np.int32)
    if "arena_z" in values:
        rewards = np.asarray(values["arena_z"][sim], dtype=np.float64)
        # read as drawn: not normalised again (see the module)
        out.update(arena_reward=rewards, arena_z=rewards)
    return dataclasses.replace(dataset, **out)
