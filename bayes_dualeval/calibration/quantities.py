r"""The quantities a simulation-based calibration ranks, and the ranks of the truth.

Each quantity is a function of the parameters (and the data), applied alike to the truth
and to every posterior draw, so its rank is uniform when the fits are calibrated:

* ``theta_best``, ``theta_worst``: the largest and smallest centred ability
  (:math:`\theta_i - \bar\theta`), whichever model holds it in that draw;
* ``theta_centred[0]``, ``theta_centred[1]``: two models' centred abilities, and their
  contrast ``theta_contrast[0-1]``;
* ``b_rel[0]``, ``b_rel[1]``: two items' difficulties relative to the models' mean ability
  (the likelihood's identified location), ``log_a[0]``, ``log_a[1]`` their log
  discriminations (2PL and above);
* ``sigma_b``, ``sigma_log_a``: the item spreads of the first item group (hierarchical
  item prior); ``mu_c`` the guessing level, ``mu_d`` the ceiling level (3PL, 4PL);
  ``gamma`` where the arena term is fitted, ``sigma`` the reward noise, the first arena
  prompt's ``b_rel[prompt]`` and ``log_a[prompt]`` (the reward likelihood), and with the
  level term ``level_c``, the arena source's intercept;
* with graders of the static labels: ``grader_severity[0]`` (and ``[1]`` with three or
  more), the first graders' severities (they sum to zero over graders);
* with an ability per domain: ``domain_dev[0,0]``, ``domain_dev[1,1]``, two models'
  deviations from their overall ability in a domain (model 0 in domain 0, model 1 in
  domain 1), and ``tau_domain[0]``, the first domain's spread of deviations;
* with ability dimensions: ``loading_max[0]``, ``loading_max[1]``, two items' largest
  loading, and ``sigma_loading``, the spread of the loadings' logits; every quantity is
  unchanged by a relabelling of the dimensions (which the data cannot identify), and the
  abilities ranked are ``theta``, each model's ability on the average item;
* with item features: ``beta_b[0]``, ``beta_log_a[0]``, the first regressor's
  coefficients on the difficulties and the log discriminations, and their scales
  ``tau_beta_b``, ``tau_beta_log_a``;
* ``loglik``: the joint log likelihood of the simulated data (Modrák et al. 2023: a test
  quantity that depends on the data too): the static labels' and the arena's.
"""

from __future__ import annotations

import numpy as np

#: Items and models whose parameters are ranked one by one.
FIRST = (0, 1)
#: The sites the quantities and the log likelihood read: the one list the study collects
#: from each fit's posterior and the generator hands the rewards' density.
SITES = (
    "theta", "theta_domain", "theta_dims", "loading", "a", "b", "c", "d", "beta_b",
    "beta_log_a", "grader_severity", "gamma", "sigma", "level_c", "sigma_b", "sigma_log_a",
    "mu_c", "mu_d", "tau_domain", "sigma_loading", "tau_beta_b", "tau_beta_log_a",
)  # fmt: skip


def quantities(values: dict, loglik: np.ndarray, prompt: int | None = None) -> dict:
    """The ranked quantities of a set of parameter values, with a leading draw axis.

    Parameters
    ----------
    values : dict of str to numpy.ndarray
        Sites with a leading axis of draws (``theta`` (n, M), ``b``, ``a`` (n, Q), and the
        group-level sites (n, G) where the model has them).
    loglik : numpy.ndarray, shape (n,)
        The joint log likelihood of the data at each draw.
    prompt : int, optional
        The item index of the first arena prompt, whose parameters are ranked too (unless
        it is one of the items ranked anyway: an arena-only design).

    Returns
    -------
    dict of str to numpy.ndarray, each of shape (n,)
        In a fixed order; sites the model lacks are left out.
    """
    theta = np.asarray(values["theta"])
    centred = theta - theta.mean(axis=-1, keepdims=True)
    out = {"theta_best": centred.max(axis=-1), "theta_worst": centred.min(axis=-1)}
    for k in FIRST:
        out[f"theta_centred[{k}]"] = centred[:, k]
    out["theta_contrast[0-1]"] = theta[:, 0] - theta[:, 1]
    b_rel = np.asarray(values["b"]) - theta.mean(axis=-1, keepdims=True)
    for k in FIRST:
        out[f"b_rel[{k}]"] = b_rel[:, k]
    if values.get("a") is not None:
        log_a = np.log(np.asarray(values["a"]))
        for k in FIRST:
            out[f"log_a[{k}]"] = log_a[:, k]
    if values.get("theta_domain") is not None:
        deviation = np.asarray(values["theta_domain"]) - theta[:, :, None]  # (n, M, D)
        for k in FIRST:
            out[f"domain_dev[{k},{k}]"] = deviation[:, k, k % deviation.shape[-1]]
        out["tau_domain[0]"] = np.asarray(values["tau_domain"]).reshape(theta.shape[0], -1)[:, 0]
    if prompt is not None and prompt not in FIRST:  # else ranked above already
        out["b_rel[prompt]"] = b_rel[:, prompt]
        if values.get("a") is not None:
            out["log_a[prompt]"] = np.log(np.asarray(values["a"]))[:, prompt]
    if values.get("loading") is not None:
        largest = np.asarray(values["loading"]).max(axis=-1)  # (n, Q)
        for k in FIRST:
            out[f"loading_max[{k}]"] = largest[:, k]
    for name in ("beta_b", "beta_log_a"):
        if values.get(name) is not None:
            out[f"{name}[0]"] = np.asarray(values[name]).reshape(theta.shape[0], -1)[:, 0]
    for name in ("sigma_b", "sigma_log_a", "mu_c", "mu_d", "sigma_loading", "tau_beta_b",
                 "tau_beta_log_a", "gamma", "sigma", "level_c"):  # fmt: skip
        if name in values:
            out[name] = np.asarray(values[name]).reshape(theta.shape[0], -1)[:, 0]
    if values.get("grader_severity") is not None:  # they sum to zero: the last is the rest
        severity = np.asarray(values["grader_severity"]).reshape(theta.shape[0], -1)
        for k in FIRST[: severity.shape[1] - 1]:
            out[f"grader_severity[{k}]"] = severity[:, k]
    out["loglik"] = np.asarray(loglik)
    return out


def ranks(truth: dict, draws: dict, rng: np.random.Generator) -> dict:
    """The rank of each true quantity among its draws: draws below it, ties split at random.

    Parameters
    ----------
    truth : dict of str to numpy.ndarray of shape (1,)
    draws : dict of str to numpy.ndarray of shape (L,)
    rng : numpy.random.Generator
        Breaks ties (a quantity the data pin down exactly, or one the draws repeat).

    Returns
    -------
    dict of str to int
        Each in ``0, ..., L``.
    """
    out = {}
    for name, value in truth.items():
        d = np.asarray(draws[name])
        below = int(np.sum(d < value[0]))
        ties = int(np.sum(d == value[0]))
        out[name] = below + int(rng.integers(0, ties + 1))
    return out


def joint_loglik(model, values: dict, inputs) -> np.ndarray:
    """The log likelihood of ``inputs``' labels and rewards at each draw of ``values``: (n,).

    Parameters
    ----------
    model : bayes_dualeval.model.spec.DualEvalModel
        Says which sites the likelihood reads (:meth:`~DualEvalModel.static_loglik`,
        :meth:`~DualEvalModel.arena_loglik`).
    values : dict of str to numpy.ndarray
        Sites with a leading draw axis.
    inputs : bayes_dualeval.model.inputs.ModelInputs
        The fitted data.
    """
    import jax
    import jax.numpy as jnp

    arrays = {k: jnp.asarray(values[k]) for k in SITES if values.get(k) is not None}

    def one(v):
        total = jnp.sum(model.static_loglik(v, inputs)) if inputs.has_static else 0.0
        if inputs.has_arena:
            total = total + jnp.sum(model.arena_loglik(v, inputs))
        return total

    return np.asarray(jax.vmap(one)(arrays), dtype=np.float64)
