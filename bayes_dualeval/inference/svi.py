"""SVI: fit a NumPyro autoguide until the ELBO stops improving, then draw from it."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.infer import SVI, Predictive
from numpyro.infer.autoguide import AutoLowRankMultivariateNormal, AutoNormal

from bayes_dualeval.inference.buckets import data_terms
from bayes_dualeval.inference.draws import Draws, timed, to_numpy
from bayes_dualeval.inference.elbo import OrderedELBO
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.inference.sites import model_sites
from bayes_dualeval.inference.start import init_strategy
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.joint import dualeval_model

#: Optimisation steps per compiled call; the stopping rule compares successive windows.
WINDOW = 500


def run_svi(inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings) -> Draws:
    """Fit an autoguide by SVI until the ELBO stops improving, then draw from it.

    Steps run in windows of :data:`WINDOW` (one compiled ``lax.scan`` each). SVI stops
    when the mean loss of a window differs from the previous window's by less than twice
    their combined standard error (the noise) or by less than ``settings.svi_rtol``
    relative, or after ``settings.svi_steps`` steps.

    With more static cells or decisive pairs than ``settings.subsample`` allows
    (:meth:`~bayes_dualeval.inference.settings.SamplerSettings.batch_size`), each step
    reads a random batch of them weighted up to the whole
    (:mod:`bayes_dualeval.model.subsample`), so a step costs the same at ten million cells
    as at a quarter of a million; the stopping rule's noise then includes the batches'.
    The guide is then the average of one more window's iterates, which settles the
    jitter a fixed step size leaves under random batches.

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    settings : SamplerSettings
        ``guide`` (``normal``: :class:`~numpyro.infer.autoguide.AutoNormal`, ``lowrank``:
        :class:`~numpyro.infer.autoguide.AutoLowRankMultivariateNormal`), ``svi_lr``
        (Adam), ``svi_steps``, ``svi_rtol``, ``draws`` and ``seed``.

    Returns
    -------
    Draws
        One chain of ``settings.draws`` draws from the fitted guide; ``info`` holds
        ``guide``, ``static_batch`` and ``pair_batch`` (terms per step, 0: all),
        ``steps``, ``converged``, ``final_loss`` and ``losses``.
    """
    n_static, n_pairs = data_terms(inputs)  # padding left out (inference/buckets.py)
    inputs = inputs.with_batches(settings.batch_size(n_static), settings.batch_size(n_pairs))
    batched = bool(inputs.static_batch or inputs.pair_batch)
    guide_cls = AutoNormal if settings.guide == "normal" else AutoLowRankMultivariateNormal
    guide = guide_cls(dualeval_model)  # its start is set from the traced inputs, below
    svi = SVI(dualeval_model, guide, numpyro.optim.Adam(settings.svi_lr), OrderedELBO())
    key_fit, key_draw = jax.random.split(jax.random.PRNGKey(settings.seed))
    window = min(WINDOW, settings.svi_steps)
    timings: dict = {}
    losses = []
    converged = False
    with timed(timings):
        # Compiled as one program: run eagerly, NumPyro's initialisation (the guide's
        # prototype trace and its search for a valid start) compiles every primitive of
        # the model on its own, hundreds of small programs (16 of the 21 s of an SVI fit
        # at paper scale). The guide keeps the prototype it traced here; afterwards it
        # reads only its site names, shapes and supports, never its values. Every program
        # takes the data as an argument (closed over, JAX would write them into the
        # program as constants: a program per data set, and the whole data in its text).
        state = jax.jit(partial(_init, svi))(key_fit, inputs, config)

        step = _window(svi, config, window)
        done = 0
        previous = None
        progress = _progress(settings.progress, settings.svi_steps, "SVI")
        while done < settings.svi_steps:
            state, chunk = step(state, inputs)
            chunk = np.asarray(chunk)
            losses.append(chunk)
            done += window
            progress(window, float(chunk.mean()))
            current = (chunk.mean(), chunk.std() / np.sqrt(len(chunk)))
            if previous is not None and np.isfinite(current[0]):
                change = abs(current[0] - previous[0])
                noise = 2.0 * np.hypot(current[1], previous[1])
                if change < max(noise, settings.svi_rtol * abs(current[0])):
                    converged = True
                    break
            previous = current
        if batched:
            # random batches keep the iterate jittering around the optimum by about the
            # step size: the guide is the average of one more window's iterates
            state, chunk, params = _averaged_window(svi, config, window)(state, inputs)
            chunk = np.asarray(chunk)
            losses.append(chunk)
            progress(window, float(chunk.mean()))
        else:
            params = svi.get_params(state)
        progress(None, None)
        sites = posterior_sites(inputs, config)

        def predict(key, params, inputs):
            pred = Predictive(
                dualeval_model,
                guide=guide,
                params=params,
                num_samples=settings.draws,
                return_sites=sites,
            )
            return pred(key, inputs, config)

        draws = jax.jit(predict)(key_draw, params, inputs)  # one program, as above
        jax.block_until_ready(draws)
    samples = {k: v[None] for k, v in to_numpy(draws).items()}
    losses = np.concatenate(losses)
    info = {
        "guide": settings.guide,
        "static_batch": inputs.static_batch,
        "pair_batch": inputs.pair_batch,
        "steps": int(len(losses)),
        "converged": bool(converged),
        "final_loss": float(losses[-window:].mean()),
        "losses": losses,
    }
    return Draws(samples=samples, timings=timings, info=info)


def _init(svi: SVI, key, inputs: ModelInputs, config: ModelConfig):
    """``svi.init``, the guide starting where the chains would (:func:`init_strategy`).

    The start is made from the inputs being traced: made from the data outside, its
    data-derived values (the level term's ``gamma`` and ``level_c``) would be constants of
    the program, a new program for every data set.
    """
    svi.guide.init_loc_fn = init_strategy(config, inputs)
    return svi.init(key, inputs, config)


def _window(svi: SVI, config: ModelConfig, length: int):
    """One compiled program: ``length`` SVI steps in a ``lax.scan``, returning their losses.

    Called as ``(state, inputs)``; returns the last state and the losses.
    """

    def run(state, inputs: ModelInputs):
        def body(state, _):
            return svi.stable_update(state, inputs, config)

        return jax.lax.scan(body, state, None, length=length)

    return jax.jit(run)


def _averaged_window(svi: SVI, config: ModelConfig, length: int):
    """As :func:`_window`, also returning the mean of the iterates' (constrained) parameters.

    Averaging the iterates of a stochastic optimiser (Polyak-Ruppert) removes the jitter
    that a fixed step size leaves around the optimum.
    """

    def run(state, inputs: ModelInputs):
        def body(carry, _):
            state, total = carry
            state, loss = svi.stable_update(state, inputs, config)
            total = jax.tree.map(jnp.add, total, svi.get_params(state))
            return (state, total), loss

        zero = jax.tree.map(jnp.zeros_like, svi.get_params(state))
        (state, total), losses = jax.lax.scan(body, (state, zero), None, length=length)
        return state, losses, jax.tree.map(lambda x: x / length, total)

    return jax.jit(run)


def posterior_sites(inputs: ModelInputs, config: ModelConfig) -> list[str]:
    """Names of the model's latent and deterministic sites (not the observed ones)."""
    sites = model_sites(inputs, config)
    return [n for n, s in sites.items() if s.latent or s.kind == "deterministic"]


def _progress(enabled: bool, total: int, label: str):
    """A tiny tqdm wrapper: call with (n, loss) to advance, (None, None) to close."""
    if not enabled:
        return lambda n, loss: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=label, unit="step", leave=False)

    def update(n, loss):
        if n is None:
            bar.close()
            return
        bar.update(n)
        bar.set_postfix(loss=f"{loss:.4g}")

    return update
