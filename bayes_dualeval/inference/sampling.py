"""Inference for the DualEval model: NUTS, SVI (autoguides) and MAP.

Each sampler returns a :class:`Draws`: arrays shaped ``(chain, draw, ...)`` for every
sampled and deterministic site, sampler statistics, and timings with compilation measured
apart from sampling (through JAX's compile-time monitoring events, so the split is exact
even though compilation happens inside the first call).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.infer import MCMC, NUTS, SVI, Predictive, Trace_ELBO, init_to_uniform
from numpyro.infer.autoguide import AutoLowRankMultivariateNormal, AutoNormal
from numpyro.infer.util import initialize_model

from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.joint import dualeval_model, global_sites


@dataclass
class Draws:
    """Posterior draws and what the sampler reports about them.

    Attributes
    ----------
    samples : dict of str to numpy.ndarray
        Each site's draws, shape ``(chain, draw, *site_shape)``.
    stats : dict of str to numpy.ndarray
        Sampler statistics, shape ``(chain, draw)`` (NUTS: ``diverging``, ``tree_depth``,
        ``n_steps``, ``acceptance_rate``, ``step_size``, ``energy``, ``lp``).
    timings : dict of str to float
        Seconds: ``compile`` and ``sampling`` (plus ``total``).
    info : dict
        Sampler-specific facts (SVI: losses, steps, converged; MAP: iterations, status).
    """

    samples: dict
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)


class _CompileClock:
    """Accumulates JAX compile-time events while active."""

    _EVENTS = (
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )

    def __init__(self):
        self.seconds = 0.0
        self.active = False

    def __call__(self, event, duration, **kwargs):
        if self.active and event in self._EVENTS:
            self.seconds += duration


_CLOCK = _CompileClock()
jax.monitoring.register_event_duration_secs_listener(_CLOCK)


@contextlib.contextmanager
def _timed(timings: dict):
    _CLOCK.seconds, _CLOCK.active = 0.0, True
    start = time.perf_counter()
    try:
        yield
    finally:
        total = time.perf_counter() - start
        _CLOCK.active = False
        timings["compile"] = round(_CLOCK.seconds, 3)
        timings["sampling"] = round(max(total - _CLOCK.seconds, 0.0), 3)
        timings["total"] = round(total, 3)


def _to_numpy(tree):
    return {k: np.asarray(v) for k, v in jax.device_get(tree).items()}


def make_mcmc(inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings) -> MCMC:
    """The NUTS sampler used by :func:`run_nuts`.

    A dense mass matrix is adapted over the low-dimensional global block
    (:func:`~bayes_dualeval.model.joint.global_sites`) and a diagonal one elsewhere. To fit many
    equally sized datasets with one compilation use :func:`reusable_nuts` instead
    (NumPyro's ``MCMC`` re-traces the model for each new dataset).
    """
    kernel = NUTS(
        dualeval_model,
        target_accept_prob=settings.target_accept,
        max_tree_depth=settings.max_tree_depth,
        init_strategy=init_to_uniform(radius=0.5),
        dense_mass=[global_sites(config, inputs)],
    )
    n_dev = jax.local_device_count()
    method = "parallel" if settings.chains <= n_dev or settings.chains == 1 else "vectorized"
    return MCMC(
        kernel,
        num_warmup=settings.warmup,
        num_samples=settings.draws,
        num_chains=settings.chains,
        chain_method=method,
        progress_bar=settings.progress,
    )


def reusable_nuts(inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings):
    """A NUTS sampler compiled once and reusable for any data of the same shapes.

    NumPyro's :class:`~numpyro.infer.MCMC` re-traces the model for each new dataset. This
    builds the same sampler (same kernel settings, dense mass over the global block) from
    NumPyro's functional ``hmc`` API with the data as an argument of one jitted function,
    so validation studies that fit hundreds of equally sized datasets compile once.

    Parameters
    ----------
    inputs : ModelInputs
        A prototype: every later dataset must have arrays of the same shapes.
    config : ModelConfig
    settings : SamplerSettings
        ``chains`` (vectorised), ``warmup``, ``draws``, ``target_accept``,
        ``max_tree_depth``.

    Returns
    -------
    callable
        ``run(inputs, seed) -> (samples, diverging)``: constrained draws (including
        deterministic sites) shaped ``(chain, draw, ...)`` and the divergence flags
        ``(chain, draw)``, as NumPy arrays.
    """
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import constrain_fn, potential_energy

    proto = initialize_model(
        jax.random.PRNGKey(0),
        dualeval_model,
        model_args=(inputs, config),
        init_strategy=init_to_uniform(radius=0.5),
    ).param_info.z
    init_kernel, sample_kernel = hmc(
        potential_fn_gen=lambda data: (
            lambda z: potential_energy(dualeval_model, (data, config), {}, z)
        ),
        algo="NUTS",
    )
    dense = [global_sites(config, inputs)]
    n_warm, n_draw = settings.warmup, settings.draws

    def one_chain(data, key):
        k_init, k_run = jax.random.split(key)
        z0 = jax.tree.map(
            lambda x: jax.random.uniform(k_init, jnp.shape(x), minval=-0.5, maxval=0.5), proto
        )
        state = init_kernel(
            z0,
            n_warm,
            dense_mass=dense,
            target_accept_prob=settings.target_accept,
            max_tree_depth=settings.max_tree_depth,
            model_args=(data,),
            rng_key=k_run,
        )

        def step(state, _):
            state = sample_kernel(state, model_args=(data,))
            return state, (state.z, state.diverging)

        state, _ = jax.lax.scan(step, state, None, length=n_warm)
        _, (zs, div) = jax.lax.scan(step, state, None, length=n_draw)
        values = jax.vmap(
            lambda z: constrain_fn(
                dualeval_model, (data, config), {}, z, return_deterministic=True
            )
        )(zs)
        return values, div

    @jax.jit
    def run_all(data, key):
        keys = jax.random.split(key, settings.chains)
        return jax.vmap(one_chain, in_axes=(None, 0))(data, keys)

    def run(data: ModelInputs, seed: int):
        values, div = run_all(data, jax.random.PRNGKey(seed))
        values = {k: np.asarray(v) for k, v in values.items() if k not in ("static", "arena")}
        return values, np.asarray(div)

    return run


#: Target acceptance of the fresh round that follows draws with divergent transitions.
DIVERGENCE_TARGET_ACCEPT = 0.95
_NUTS_FIELDS = ("diverging", "num_steps", "accept_prob", "energy", "potential_energy")


def run_nuts(
    inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings, *, until=None
) -> Draws:
    """Sample the posterior with NUTS, drawing more while the draws are not good enough.

    Chains run in parallel over devices when there are enough (host devices on a CPU, set
    with ``numpyro.set_host_device_count`` before JAX starts), vectorised otherwise.

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    settings : SamplerSettings
        ``extend`` bounds the extra rounds.
    until : callable, optional
        ``until(draws) -> bool``: True when the draws so far are good enough (e.g. they
        pass the convergence check). While it is False, up to ``settings.extend`` more
        rounds are run. Without divergences, a round continues the chains from where they
        stopped (same step size and mass matrix) and appends ``settings.draws`` draws per
        chain: slow mixing needs more draws. With divergences, more draws of the same
        kernel would only add more, so the round starts afresh with a smaller step size
        (target acceptance :data:`DIVERGENCE_TARGET_ACCEPT`) and replaces the draws.
        ``info["rounds"]`` counts the rounds run, ``info["target_accept"]`` the final
        target acceptance.
    """
    timings: dict = {}
    rounds, parts = 0, []
    current = settings
    mcmc = make_mcmc(inputs, config, current)
    with _timed(timings):
        key = jax.random.PRNGKey(settings.seed)
        while True:
            mcmc.run(key, inputs, config, extra_fields=_NUTS_FIELDS)
            samples = mcmc.get_samples(group_by_chain=True)
            extra = mcmc.get_extra_fields(group_by_chain=True)
            jax.block_until_ready((samples, extra))
            parts.append((_to_numpy(samples), _to_numpy(extra)))
            rounds += 1
            draws = _nuts_draws(parts, mcmc)
            if until is None or rounds > settings.extend or until(draws):
                break
            diverged = draws.stats["diverging"].any()
            if diverged and current.target_accept < DIVERGENCE_TARGET_ACCEPT:
                current = replace(current, target_accept=DIVERGENCE_TARGET_ACCEPT)
                mcmc, parts = make_mcmc(inputs, config, current), []
                key = jax.random.fold_in(jax.random.PRNGKey(settings.seed), rounds)
            else:
                mcmc.post_warmup_state = mcmc.last_state
                key = mcmc.post_warmup_state.rng_key
    draws.timings = timings
    draws.info.update(rounds=rounds, target_accept=current.target_accept)
    return draws


def _nuts_draws(parts: list, mcmc: MCMC) -> Draws:
    """Join rounds of NUTS output ``[(samples, extra_fields), ...]`` along the draw axis."""

    def join(dicts):
        return {k: np.concatenate([d[k] for d in dicts], axis=1) for k in dicts[0]}

    samples = join([p[0] for p in parts])
    extra = join([p[1] for p in parts])
    n_steps = extra["num_steps"].astype(np.int64)
    step_size = np.asarray(mcmc.last_state.adapt_state.step_size)
    stats = {
        "diverging": extra["diverging"].astype(bool),
        "n_steps": n_steps,
        "tree_depth": np.floor(np.log2(np.maximum(n_steps, 1))).astype(np.int64) + 1,
        "acceptance_rate": extra["accept_prob"],
        "energy": extra["energy"],
        "lp": -extra["potential_energy"],
        "step_size": np.broadcast_to(np.reshape(step_size, (-1, 1)), n_steps.shape).copy(),
    }
    return Draws(samples=samples, stats=stats, info={"chain_method": mcmc.chain_method})


def run_svi(inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings) -> Draws:
    """Fit an autoguide by SVI until the ELBO stops improving, then draw from it."""
    guide_cls = AutoNormal if settings.guide == "normal" else AutoLowRankMultivariateNormal
    guide = guide_cls(dualeval_model, init_loc_fn=init_to_uniform(radius=0.5))
    svi = SVI(dualeval_model, guide, numpyro.optim.Adam(settings.svi_lr), Trace_ELBO())
    key_fit, key_draw = jax.random.split(jax.random.PRNGKey(settings.seed))
    window = min(500, settings.svi_steps)
    timings: dict = {}
    losses = []
    converged = False
    with _timed(timings):
        state = svi.init(key_fit, inputs, config)

        def body(state, _):
            state, loss = svi.stable_update(state, inputs, config)
            return state, loss

        step = jax.jit(lambda s: jax.lax.scan(body, s, None, length=window))
        done = 0
        previous = None
        progress = _progress(settings.progress, settings.svi_steps, "SVI")
        while done < settings.svi_steps:
            state, chunk = step(state)
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
        progress(None, None)
        params = svi.get_params(state)
        pred = Predictive(
            dualeval_model,
            guide=guide,
            params=params,
            num_samples=settings.draws,
            return_sites=_posterior_sites(inputs, config),
        )
        draws = pred(key_draw, inputs, config)
        jax.block_until_ready(draws)
    samples = {k: v[None] for k, v in _to_numpy(draws).items()}
    losses = np.concatenate(losses)
    info = {
        "guide": settings.guide,
        "steps": int(len(losses)),
        "converged": bool(converged),
        "final_loss": float(losses[-window:].mean()),
        "losses": losses,
    }
    return Draws(samples=samples, timings=timings, info=info)


def _posterior_sites(inputs: ModelInputs, config: ModelConfig) -> list[str]:
    """Names of the model's latent and deterministic sites (not the likelihood factors)."""
    from numpyro.handlers import seed, trace

    tr = trace(seed(dualeval_model, 0)).get_trace(inputs, config)
    return [
        name
        for name, site in tr.items()
        if (site["type"] == "sample" and not site["is_observed"])
        or site["type"] == "deterministic"
    ]


def run_map(inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings) -> Draws:
    """Posterior mode that keeps the latent scale (:func:`~bayes_dualeval.inference.mode.run_map`).

    The mode of the marginal posterior of abilities and hyperparameters, with the item
    parameters integrated out and the ability contrasts in polar coordinates.
    """
    from bayes_dualeval.inference.mode import run_map as marginal_mode

    return marginal_mode(inputs, config, settings)


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


RUNNERS = {"nuts": run_nuts, "svi": run_svi, "map": run_map}


def sample(
    inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings, *, until=None
) -> Draws:
    """Run the sampler named in ``settings`` on the model.

    ``until`` (NUTS only) is the check that decides whether to draw more; see
    :func:`run_nuts`.
    """
    if settings.sampler == "nuts":
        return run_nuts(inputs, config, settings, until=until)
    return RUNNERS[settings.sampler](inputs, config, settings)
