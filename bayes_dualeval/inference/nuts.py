"""NUTS, with rounds that draw more while the draws fail the convergence check.

Chains run in parallel over devices when there are enough (host devices on a CPU, set
with ``numpyro.set_host_device_count`` before JAX starts), vectorised otherwise. A dense
mass matrix is adapted over the model's low-dimensional global block
(:func:`~bayes_dualeval.model.joint.global_sites`) and a diagonal one elsewhere; warm-up
starts that adaptation from the curvature where the chains start when the data are large
enough for that to pay (:mod:`bayes_dualeval.inference.metric`), not from the identity.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import replace

import jax
import numpy as np
from numpyro.infer import MCMC

from bayes_dualeval.core.errors import PerformanceWarning
from bayes_dualeval.inference import drivers
from bayes_dualeval.inference.buckets import padded
from bayes_dualeval.inference.chains import (
    CompiledInitNUTS,
    data_as_argument,
    release_programs,
)
from bayes_dualeval.inference.draws import Draws, timed, to_numpy
from bayes_dualeval.inference.heartbeat import duration as _duration
from bayes_dualeval.inference.heartbeat import heartbeat
from bayes_dualeval.inference.layout import laid_out, layouts_read
from bayes_dualeval.inference.metric import adapted_metric, n_terms, pilot, worth_it
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
#: A round that continues the chains after a near miss draws what the check estimates it
#: needs, in multiples of this many draws per chain (run as chunks of this length, so that
#: every continuation is the same compiled program) ...
CONTINUE_STEP = 50
#: ... and at least this share of a full round.
CONTINUE_MIN_SHARE = 0.25
#: Likelihood terms (:func:`~bayes_dualeval.inference.metric.n_terms`) from which the first
#: round runs in stages: warm-up on its own, then the draws in chunks of
#: :data:`CONTINUE_STEP` (the continuation rounds' program), so that a long round says how
#: far it has got and when it should end, and Ctrl-C stops it at the end of a chunk with the
#: draws made so far. On two CPU cores a round of 100,000 terms takes minutes (BigCodeBench,
#: 174,420 terms: about two), of AlpacaEval's million an hour or more; each stage costs one
#: program more to compile (seconds) and a dispatch per chunk.
STAGED_TERMS = 100_000
_NUTS_FIELDS = ("diverging", "num_steps", "accept_prob", "energy", "potential_energy")


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
        needs), that many (:func:`continuation_draws`): slow mixing needs more draws, a
        near miss only a few. Such a round runs in chunks of :data:`CONTINUE_STEP` draws,
        one compiled program whatever its length (:func:`_one_round`). With divergences,
        more draws of the same
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

        From :data:`STAGED_TERMS` likelihood terms on, the first round runs in stages
        (:func:`staged_chunks`): warm-up on its own, then the draws in chunks of
        :data:`CONTINUE_STEP`, with how many are drawn and when the round should end in
        the heartbeat's lines. The draws are those of a round in one piece.

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
    chunks = staged_chunks(inputs, settings)  # the first round's runs of the driver
    first = replace(settings, draws=CONTINUE_STEP) if chunks > 1 else settings
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
            f" (warm-up, then {chunks} runs of {CONTINUE_STEP} draws)" if chunks > 1 else "",
        )  # fmt: skip
        started = time.perf_counter()
        while True:
            try:
                with (
                    _finish_round_on_interrupt(rounds > 0 or chunks > 1) as asked,
                    heartbeat(logger, f"round {rounds + 1}", lambda: progress.get("draws")),
                ):
                    parts.append(
                        _one_round(
                            mcmc,
                            key,
                            inputs,
                            config,
                            init,
                            chunks,
                            progress,
                            warm_up_apart=rounds == 0 and chunks > 1,
                            stop=asked,
                        )  # fmt: skip
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
            draws = _joined(parts, mcmc)
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
            more = continuation_draws(verdict, settings.draws)
            logger.info(
                "round %d: the convergence check has not passed; %d more draws per chain",
                rounds + 1, more,
            )  # fmt: skip
            # in chunks of one length: one compiled program for every continuation
            chunks = more // CONTINUE_STEP if more % CONTINUE_STEP == 0 else 1
            mcmc = _continued(mcmc, more // chunks)
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


def continuation_draws(verdict, draws: int) -> int:
    """Draws per chain of a round that continues the chains.

    ``verdict`` is what ``until`` returned; when it carries ``more`` (the draws the check
    estimates a near miss needs, :class:`bayes_dualeval.posterior.diagnostics.Verdict`),
    the round draws that many, rounded up to :data:`CONTINUE_STEP` and kept between
    :data:`CONTINUE_MIN_SHARE` of ``draws`` and ``draws``; otherwise ``draws``.
    """
    more = getattr(verdict, "more", None)
    if more is None:
        return draws
    more = int(np.ceil(more / CONTINUE_STEP) * CONTINUE_STEP)
    return int(min(draws, max(more, np.ceil(CONTINUE_MIN_SHARE * draws))))


def _continued(mcmc: MCMC, draws: int) -> MCMC:
    """``mcmc``, set to continue its chains from where they stopped for ``draws`` draws.

    Same kernel (step size, mass matrix, the chains' states); a round of another length is
    a new MCMC driver around it, which takes the data as arguments of its program as the
    first does (without ``jit_model_args`` NumPyro closes the sampler over the data, which
    become constants of the program: every data set compiled its continuation anew).
    """
    if draws != mcmc.num_samples:
        state = mcmc.last_state
        mcmc = MCMC(
            mcmc.sampler,
            num_warmup=mcmc.num_warmup,
            num_samples=draws,
            num_chains=mcmc.num_chains,
            chain_method=mcmc.chain_method,
            progress_bar=mcmc.progress_bar,
            jit_model_args=True,  # as make_mcmc builds every driver
        )
        mcmc.post_warmup_state = state
    else:
        mcmc.post_warmup_state = mcmc.last_state
    return mcmc


@contextmanager
def _finish_round_on_interrupt(active: bool):
    """While ``active``, a first Ctrl-C asks for a stop once the running chunk has finished.

    Yields a dict whose ``"stop"`` turns True on that first interrupt; the handler then
    gives SIGINT back to its previous handler, so a second Ctrl-C raises
    ``KeyboardInterrupt`` as usual. :func:`_one_round` reads it between the runs of its
    driver: a round run in chunks stops after the running one, a round in one piece
    finishes. Chains run in parallel on a CPU cannot be interrupted mid-run anyway (Python
    sees the signal only when the run returns), so finishing it loses nothing there. Only
    the main thread can install a handler; elsewhere this does nothing.
    """
    asked = {"stop": False}
    if not active or threading.current_thread() is not threading.main_thread():
        yield asked
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        asked["stop"] = True
        signal.signal(signal.SIGINT, previous)

    signal.signal(signal.SIGINT, handler)
    try:
        yield asked
    finally:
        signal.signal(signal.SIGINT, previous)


def _one_round(
    mcmc: MCMC,
    key,
    inputs: ModelInputs,
    config: ModelConfig,
    init,
    chunks: int = 1,
    progress: dict | None = None,
    *,
    warm_up_apart: bool = False,
    stop: dict | None = None,
) -> tuple:
    """Run one round of ``mcmc`` and return its ``(samples, extra_fields)`` as NumPy arrays.

    With ``chunks`` > 1 the driver runs that many times in turn, each run continuing the
    chains from where the one before stopped, and the draws are joined: every continuation
    round, whatever its length, is then the same compiled program, read from the compile
    cache once it has been compiled for these shapes. With ``warm_up_apart`` (a first round
    run in stages, :func:`staged_chunks`) warm-up runs first on its own
    (``MCMC.warmup``) and every chunk of draws continues from it. ``progress`` (a dict)
    holds ``"draws"``: what the round has drawn so far and, from its pace, when it should
    end, for :func:`~bayes_dualeval.inference.heartbeat.heartbeat`; a round that ``stop``
    (:func:`_finish_round_on_interrupt`'s dict) cut short also leaves ``"kept"``, its
    draws per chain and the round's. Once ``stop["stop"]`` is set, the round ends after
    the running chunk, with the draws made so far, or, set during a warm-up run apart,
    raises ``KeyboardInterrupt`` (nothing drawn to keep).
    """
    outputs = []
    total = chunks * mcmc.num_samples
    began = time.perf_counter()
    try:
        if warm_up_apart:
            mcmc.warmup(key, inputs, config, extra_fields=_NUTS_FIELDS, init_params=init)
            jax.block_until_ready(mcmc.post_warmup_state)
            logger.info("warm-up finished (%s)", _duration(time.perf_counter() - began))
            init, began = None, time.perf_counter()
            if progress is not None:
                progress["draws"] = f"warm-up done; 0 of {total} draws"
            if stop is not None and stop["stop"]:  # Ctrl-C in warm-up: nothing to keep
                raise KeyboardInterrupt
        for k in range(chunks):
            if k and stop is not None and stop["stop"]:
                if progress is not None:
                    progress["kept"] = (k * mcmc.num_samples, total)
                break
            if k:
                mcmc.post_warmup_state = mcmc.last_state
            if k or warm_up_apart:
                key, init = mcmc.post_warmup_state.rng_key, None
            mcmc.run(key, inputs, config, extra_fields=_NUTS_FIELDS, init_params=init)
            samples = mcmc.get_samples(group_by_chain=True)
            extra = mcmc.get_extra_fields(group_by_chain=True)
            jax.block_until_ready((samples, extra))
            outputs.append((to_numpy(samples), to_numpy(extra)))
            if progress is not None and chunks > 1:
                done = (k + 1) * mcmc.num_samples
                left = (time.perf_counter() - began) / (k + 1) * (chunks - k - 1)
                ending = f", about {_duration(left)} left" if k + 1 < chunks else ""
                progress["draws"] = f"{done} of {total} draws{ending}"
    finally:
        if not drivers.is_shared(mcmc):
            release_programs(mcmc)  # NumPyro keeps drivers alive: their programs go now
        if progress is not None:
            progress.pop("draws", None)
    if len(outputs) == 1:
        return outputs[0]
    return _join([part[0] for part in outputs]), _join([part[1] for part in outputs])


def staged_chunks(inputs: ModelInputs, settings: SamplerSettings) -> int:
    """Runs of draws in a first round run in stages; 1 where it runs in one piece.

    From :data:`STAGED_TERMS` likelihood terms on, where ``settings.draws`` is a multiple of
    :data:`CONTINUE_STEP` (of at least two): warm-up apart, then the draws in chunks of
    :data:`CONTINUE_STEP` (:func:`_one_round`).
    """
    if n_terms(inputs) < STAGED_TERMS or settings.draws % CONTINUE_STEP:
        return 1
    return max(1, settings.draws // CONTINUE_STEP)


def _joined(parts: list, mcmc: MCMC) -> Draws:
    """Join rounds of NUTS output ``[(samples, extra_fields), ...]`` along the draw axis."""
    samples = _join([p[0] for p in parts])
    extra = _join([p[1] for p in parts])
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
    method = mcmc.chain_method if isinstance(mcmc.chain_method, str) else "parallel"
    return Draws(samples=samples, stats=stats, info={"chain_method": method})


def _join(dicts: list[dict]) -> dict:
    """Arrays of the same names, ``(chain, draw, ...)``, joined along the draw axis."""
    return {k: np.concatenate([d[k] for d in dicts], axis=1) for k in dicts[0]}
