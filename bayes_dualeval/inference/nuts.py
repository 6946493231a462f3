"""NUTS, with rounds that draw more while the draws fail the convergence check.

Chains run in parallel over devices when there are enough (host devices on a CPU, set
with ``numpyro.set_host_device_count`` before JAX starts), vectorised otherwise. A dense
mass matrix is adapted over the model's low-dimensional global block
(:func:`~bayes_dualeval.model.joint.global_sites`) and a diagonal one elsewhere; warm-up
starts that adaptation from the curvature where the chains start when the data are large
enough for that to pay (:mod:`bayes_dualeval.inference.metric`), not from the identity.
How each round runs, in one piece or in chunks, is :mod:`bayes_dualeval.inference.nuts_round`'s.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import replace

import jax
import numpy as np
from numpyro.infer import MCMC

from bayes_dualeval.core.errors import PerformanceWarning
from bayes_dualeval.inference import drivers, nuts_round
from bayes_dualeval.inference.buckets import padded
from bayes_dualeval.inference.chains import (
    CompiledInitNUTS,
    data_as_argument,
)
from bayes_dualeval.inference.draws import Draws, timed
from bayes_dualeval.inference.heartbeat import heartbeat
from bayes_dualeval.inference.layout import laid_out, layouts_read
from bayes_dualeval.inference.metric import adapted_metric, pilot, worth_it
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.inference.start import init_strategy
from bayes_dualeval.inference.warm import WarmStart, adaptation
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.joint import dualeval_model, global_sites

#: Where a run says what each round does, and that a long round is still running
#: (:mod:`~bayes_dualeval.inference.heartbeat`; the command line shows both unless quiet).
#: Chains run in parallel here have no per-iteration bar: NumPyro refuses one for a
#: callable ``chain_method``, and its bars' host callbacks would keep the sampler out of
#: JAX's persistent compilation cache (a second run compiled 10.8 s instead of 1.6 s).
logger = logging.getLogger(__name__)

#: Target acceptances of the fresh rounds that follow draws with divergent transitions,
#: in turn: a round that diverges at 0.95 restarts at 0.99 (heavy-tailed discriminations
#: of near-deterministic items on 8 models still diverge at 0.95 and stop at 0.99).
DIVERGENCE_TARGET_ACCEPTS = (0.95, 0.99)
#: Trajectory depth each fresh round after divergences adds: a higher target acceptance
#: roughly halves the adapted step size, so one more doubling keeps the trajectories as
#: long in parameter space as before (the cap otherwise cuts them short and costs the
#: effective draws the restart was for).
DIVERGENCE_EXTRA_DEPTH = 1
#: The deepest trajectory cap the divergence restart raises to (2**10 - 1 leapfrog steps).
DIVERGENCE_MAX_DEPTH = 10
#: Warm-up iterations of a round after divergences: the chains continue from where they
#: stopped with the mass matrix they adapted (pooled over chains), so only the step size is
#: tuned again, to the higher target acceptance (NumPyro's schedule for 200 iterations
#: ends in Stan's 50-iteration final buffer of step-size adaptation).
RETUNE_WARMUP = 200


def make_mcmc(
    inputs: ModelInputs,
    config: ModelConfig,
    settings: SamplerSettings,
    metric=None,
    *,
    adapt_metric: bool = True,
    step_size: float = 1.0,
) -> MCMC:
    """The NUTS sampler used by :func:`run_nuts` (one round of ``settings.draws`` draws).

    ``metric`` is the inverse mass matrix warm-up starts from (NumPyro's block dictionary,
    see :func:`bayes_dualeval.inference.metric.start_metric`); None starts from the
    identity. With ``adapt_metric=False`` it is kept as it is and warm-up tunes only the
    step size, starting from ``step_size``.
    """
    kernel = CompiledInitNUTS(
        dualeval_model,
        step_size=step_size,
        target_accept_prob=settings.target_accept,
        max_tree_depth=settings.max_tree_depth,
        init_strategy=init_strategy(config, inputs),
        dense_mass=[global_sites(config, inputs)],
        inverse_mass_matrix=None if metric is None else dict(metric),
        adapt_mass_matrix=adapt_metric,
    )
    n_dev = jax.local_device_count()
    method = "parallel" if settings.chains <= n_dev or settings.chains == 1 else "vectorized"
    if method == "parallel" and settings.chains > 1:
        method = data_as_argument
    if method == "vectorized" and jax.default_backend() == "cpu":
        warnings.warn(
            f"{settings.chains} chains share {n_dev} CPU device(s) and run vectorised, "
            "several times slower than in parallel: call "
            f"bayes_dualeval.inference.device.configure(chains={settings.chains}) before "
            "JAX starts (the command line does)",
            PerformanceWarning,
            stacklevel=2,
        )
    return MCMC(
        kernel,
        num_warmup=settings.warmup,
        num_samples=settings.draws,
        num_chains=settings.chains,
        chain_method=method,
        progress_bar=settings.progress,
        jit_model_args=True,
    )


def run_nuts(
    inputs: ModelInputs,
    config: ModelConfig,
    settings: SamplerSettings,
    *,
    until=None,
    warm: WarmStart | None = None,
) -> Draws:
    """Sample the posterior with NUTS, drawing more while the draws are not good enough.

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    settings : SamplerSettings
        ``extend`` bounds the extra rounds.
    until : callable, optional
        ``until(draws)``: true when the draws so far are good enough (e.g. they pass
        the convergence check; :func:`bayes_dualeval.posterior.diagnostics.draws_verdict`).
        While it is false, up to ``settings.extend`` more rounds are run. Without
        divergences, a round continues the chains from where they stopped (same step size
        and mass matrix) and appends ``settings.draws`` draws per chain, or, when the
        answer carries ``more`` (a near miss: the further draws the check estimates it
        needs), that many (:func:`~.nuts_round.continuation_draws`): slow mixing needs more
        draws, a near miss only a few. Such a round runs in chunks of
        :data:`~.nuts_round.CONTINUE_STEP` draws, one compiled program whatever its length
        (:func:`~.nuts_round.one_round`). With divergences, more draws of the same
        kernel would only add more, so the round tunes a smaller step size for the next
        target acceptance of :data:`DIVERGENCE_TARGET_ACCEPTS` above the current one (past
        the last, the chains continue), with a trajectory cap
        :data:`DIVERGENCE_EXTRA_DEPTH` deeper (at most :data:`DIVERGENCE_MAX_DEPTH`), and
        replaces the draws. That round keeps what the chains learnt: they continue from
        where they stopped, with the mass matrix they adapted (pooled over chains, see
        :func:`~bayes_dualeval.inference.metric.adapted_metric`), and its warm-up of
        :data:`RETUNE_WARMUP` iterations tunes only the step size. ``info["rounds"]``
        counts the rounds run, ``info["target_accept"]`` and ``info["max_tree_depth"]``
        are those of the final round (``until`` sees the depth of the draws it judges),
        ``info["start_metric"]`` says where warm-up's metric started ("curvature" or
        "identity"; "warm" for a warm start), ``info["static_layout"]`` how the static
        labels were read ("matrix", "cells" or "none"; :mod:`~bayes_dualeval.inference.layout`).
        ``draws.adaptation`` holds what the chains adapted, for a later warm start
        (:func:`~bayes_dualeval.inference.warm.adaptation`).

        From :data:`~.nuts_round.STAGED_TERMS` likelihood terms on, the first round runs
        in stages (:func:`~.nuts_round.staged_chunks`): warm-up on its own, then the draws
        in chunks of :data:`~.nuts_round.CONTINUE_STEP`, with how many are drawn and when
        the round should end in the heartbeat's lines. The draws are those of a round in
        one piece.

        Once a round has finished, Ctrl-C keeps what was drawn. A first Ctrl-C during an
        extra round, or during a first round run in stages once its warm-up has finished,
        lets the running chunk (a round in one piece: the round) finish and stops there; a
        second one (or a ``KeyboardInterrupt`` from elsewhere) abandons the running round
        and keeps the rounds before it. The draws kept are returned with
        ``info["interrupted_round"]``, the round during which the interrupt came, and for a
        round cut short ``info["interrupted_draws"]``, its draws per chain kept and asked
        for; they did not pass ``until``, or were not judged. Otherwise an interrupt during
        the first round is raised as usual.
    warm : WarmStart, optional
        Start from a previous fit's metric, step size and posterior means, with the short
        warm-up it says (:mod:`bayes_dualeval.inference.warm`), instead of the curvature
        or the identity and the full warm-up.

    Returns
    -------
    Draws
    """
    timings: dict = {}
    rounds, parts = 0, []
    current = settings
    large = worth_it(inputs)  # judged on the data as they are
    chunks = nuts_round.staged_chunks(inputs, settings)  # the first round's runs of the driver
    first = replace(settings, draws=nuts_round.CONTINUE_STEP) if chunks > 1 else settings
    inputs = padded(inputs)  # shapes in buckets: the same program for similar data
    inputs = laid_out(inputs, config)  # matrices where most of them are observed
    with timed(timings):
        metric = init = None
        warmup = settings.warmup
        if warm is not None:
            metric, init, warmup = (
                warm.metric,
                _chain_starts(warm.init, settings.chains),
                warm.warmup,
            )
            mcmc = make_mcmc(
                inputs, config, replace(first, warmup=warmup), metric,
                adapt_metric=warm.adapt_metric, step_size=warm.step_size,
            )  # fmt: skip
        elif large:
            # warm-up's starting metric, and the chains' starts with their potential and
            # gradient: the chains' program then needs no search for valid starts
            dense = global_sites(config, inputs)
            metric, init = pilot(inputs, config, dense, settings.seed, settings.chains)
        if warm is None:
            mcmc = _first_driver(inputs, config, first, metric)
        key, draws = jax.random.PRNGKey(settings.seed), None
        progress = {}  # what the running round has drawn
        logger.info(
            "round 1: %d chain(s), %d warm-up iterations and %d draws each%s",
            settings.chains, warmup, settings.draws,
            f" (warm-up, then {chunks} runs of {first.draws} draws)" if chunks > 1 else "",
        )  # fmt: skip
        started = time.perf_counter()
        while True:
            try:
                with (
                    nuts_round.finish_round_on_interrupt(rounds > 0 or chunks > 1) as asked,
                    heartbeat(logger, f"round {rounds + 1}", lambda: progress.get("draws")),
                ):
                    parts.append(
                        nuts_round.one_round(
                            mcmc,
                            key,
                            inputs,
                            config,
                            init,
                            chunks,
                            progress,
                            warm_up_apart=rounds == 0 and chunks > 1,
                            stop=asked,
                        )
                    )
            except KeyboardInterrupt:
                if not rounds:  # nothing finished: nothing to keep
                    raise
                draws.info["interrupted_round"] = rounds + 1
                break
            init = None
            rounds += 1
            elapsed = time.perf_counter() - started
            if "kept" in progress:
                logger.info(
                    "round %d stopped after %d of its %d draws per chain (%.0f s of sampling)",
                    rounds, *progress["kept"], elapsed,
                )  # fmt: skip
            else:
                logger.info("round %d finished (%.0f s of sampling so far)", rounds, elapsed)
            draws = nuts_round.joined(parts, mcmc)
            draws.info.update(
                max_tree_depth=current.max_tree_depth, target_accept=current.target_accept
            )
            if asked["stop"]:
                draws.info["interrupted_round"] = rounds
                if "kept" in progress:  # cut short: the chunks it had drawn
                    draws.info["interrupted_draws"] = list(progress.pop("kept"))
                break
            if until is None or rounds > settings.extend:
                break
            try:
                verdict = until(draws)
                if verdict:
                    break
            except KeyboardInterrupt:  # the round had finished: keep it
                draws.info["interrupted_round"] = rounds + 1
                break
            diverged = draws.stats["diverging"].any()
            higher = [t for t in DIVERGENCE_TARGET_ACCEPTS if t > current.target_accept]
            if diverged and higher:
                depth = max(
                    current.max_tree_depth,
                    min(current.max_tree_depth + DIVERGENCE_EXTRA_DEPTH, DIVERGENCE_MAX_DEPTH),
                )
                current = replace(current, target_accept=higher[0], max_tree_depth=depth)
                state = mcmc.last_state
                retune = replace(current, warmup=min(current.warmup, RETUNE_WARMUP))
                mcmc = make_mcmc(
                    inputs,
                    config,
                    retune,
                    adapted_metric(state, settings.chains),
                    adapt_metric=False,
                    step_size=float(np.mean(state.adapt_state.step_size)),
                )
                init, parts, chunks = state.z, [], 1
                key = jax.random.fold_in(jax.random.PRNGKey(settings.seed), rounds)
                logger.info(
                    "round %d: divergent transitions; warm-up again (%d iterations) at target "
                    "acceptance %.2f, then %d draws per chain",
                    rounds + 1, retune.warmup, current.target_accept, retune.draws,
                )  # fmt: skip
                continue
            more = nuts_round.continuation_draws(verdict, settings.draws)
            logger.info(
                "round %d: the convergence check has not passed; %d more draws per chain",
                rounds + 1, more,
            )  # fmt: skip
            chunks = nuts_round.chunks(more)  # one compiled program for every continuation
            mcmc = nuts_round.continued(mcmc, more // chunks)
            key = mcmc.post_warmup_state.rng_key
    draws.timings = timings
    start = "warm" if warm is not None else "curvature"
    draws.info.update(
        rounds=rounds, start_metric="identity" if metric is None else start, **layouts_read(inputs)
    )
    if "interrupted_round" not in draws.info:
        draws.adaptation = adaptation(
            mcmc.last_state, draws.samples, inputs, config, settings.chains
        )
    return draws


def _chain_starts(point: dict, chains: int) -> dict:
    """One starting point for every chain: a leading chain axis when there are several."""
    point = {k: np.asarray(v, np.float32) for k, v in point.items()}
    if chains == 1:
        return point
    return {k: np.broadcast_to(v, (chains, *v.shape)).copy() for k, v in point.items()}


def _first_driver(inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings, metric):
    """The first round's driver: a shared one within :func:`~.drivers.shared_drivers`, else new."""
    if metric is not None:
        return make_mcmc(inputs, config, settings, metric)
    return drivers.driver(
        (config, replace(settings, seed=0)), inputs, lambda: make_mcmc(inputs, config, settings)
    )
