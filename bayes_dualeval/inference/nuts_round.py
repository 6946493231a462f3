"""How one round of NUTS runs: in one piece or in chunks, and what Ctrl-C keeps of it.

:func:`bayes_dualeval.inference.nuts.run_nuts` decides how many rounds to run and with which
kernel; this module runs each one. A round is one run of NumPyro's driver, or several: a
round that continues the chains draws in chunks of :data:`CONTINUE_STEP` (one compiled
program for every length), and a first round on large data (:data:`STAGED_TERMS`) runs
warm-up apart and then its draws in such chunks, so that it can say how far it has got and
be stopped between chunks (:func:`finish_round_on_interrupt`) with what it has drawn. The
draws of a round in chunks are those of the same round in one piece: each chunk continues
from the state and key the one before stopped at.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import contextmanager

import jax
import numpy as np
from numpyro.infer import MCMC

from bayes_dualeval.inference import drivers
from bayes_dualeval.inference.chains import release_programs
from bayes_dualeval.inference.draws import Draws, to_numpy
from bayes_dualeval.inference.heartbeat import duration
from bayes_dualeval.inference.metric import n_terms
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs

#: Where a round run in stages says that its warm-up has finished (the command line shows
#: it unless quiet, as it shows :mod:`~bayes_dualeval.inference.nuts`'s lines).
logger = logging.getLogger(__name__)

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
#: What NUTS collects besides the draws (its sample statistics).
FIELDS = ("diverging", "num_steps", "accept_prob", "energy", "potential_energy")


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


def continued(mcmc: MCMC, draws: int) -> MCMC:
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
def finish_round_on_interrupt(active: bool):
    """While ``active``, a first Ctrl-C asks for a stop once the running chunk has finished.

    Yields a dict whose ``"stop"`` turns True on that first interrupt; the handler then
    gives SIGINT back to its previous handler, so a second Ctrl-C raises
    ``KeyboardInterrupt`` as usual. :func:`one_round` reads it between the runs of its
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


def one_round(
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
    (:func:`finish_round_on_interrupt`'s dict) cut short also leaves ``"kept"``, its
    draws per chain and the round's. Once ``stop["stop"]`` is set, the round ends after
    the running chunk, with the draws made so far, or, set during a warm-up run apart,
    raises ``KeyboardInterrupt`` (nothing drawn to keep).
    """
    outputs = []
    total = chunks * mcmc.num_samples
    began = time.perf_counter()
    try:
        if warm_up_apart:
            mcmc.warmup(key, inputs, config, extra_fields=FIELDS, init_params=init)
            jax.block_until_ready(mcmc.post_warmup_state)
            logger.info("warm-up finished (%s)", duration(time.perf_counter() - began))
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
            mcmc.run(key, inputs, config, extra_fields=FIELDS, init_params=init)
            samples = mcmc.get_samples(group_by_chain=True)
            extra = mcmc.get_extra_fields(group_by_chain=True)
            jax.block_until_ready((samples, extra))
            outputs.append((to_numpy(samples), to_numpy(extra)))
            if progress is not None and chunks > 1:
                done = (k + 1) * mcmc.num_samples
                left = (time.perf_counter() - began) / (k + 1) * (chunks - k - 1)
                ending = f", about {duration(left)} left" if k + 1 < chunks else ""
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

    From :data:`STAGED_TERMS` likelihood terms on, the round's draws in :func:`chunks`
    (warm-up apart, :func:`one_round`); below, one piece.
    """
    return chunks(settings.draws) if n_terms(inputs) >= STAGED_TERMS else 1


def chunks(draws: int) -> int:
    """Runs of :data:`CONTINUE_STEP` draws that make ``draws``; 1 where it is no multiple.

    Every round run in chunks (a continuation, a first round in stages) runs them as one
    compiled program of that length, whatever the round's.
    """
    return draws // CONTINUE_STEP if draws % CONTINUE_STEP == 0 and draws else 1


def joined(parts: list, mcmc: MCMC) -> Draws:
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
