"""Rank-normalised split R-hat and bulk and tail ESS for many parameters at once.

The estimators are those of Vehtari, Gelman, Simpson, Carpenter and Bürkner (2021),
"Rank-normalization, folding, and localization: an improved R-hat for assessing
convergence of MCMC", as Stan and ArviZ compute them: chains split in halves, draws
replaced by the normal scores of their ranks, autocorrelations summed over Geyer's
initial monotone sequence. ArviZ evaluates them one parameter at a time in Python; a
posterior of the bundled example has about 1,600 scalars and the check runs after every
round of draws, so here every step is one NumPy operation over a ``(parameter, chain,
draw)`` array (autocovariances by one batched FFT, the Geyer truncation by cumulative
minima). The results agree with ``arviz.rhat`` and ``arviz.ess`` to rounding
(``tests/test_rank_normal.py``).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import special, stats

#: Parameters per block of :func:`diagnose` ...
CHUNK = 32
#: ... and at most this many threads work on the blocks.
THREADS = 4
#: Normal scores of ranks use the Blom offset: ``(rank - 3/8) / (n + 1/4)``.
_BLOM = 0.375


def split_chains(draws: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as separate chains (a middle draw is dropped).

    Parameters
    ----------
    draws : numpy.ndarray
        Shape ``(parameter, chain, draw)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(parameter, 2 chain, draw // 2)``.
    """
    half = draws.shape[2] // 2
    return np.concatenate([draws[:, :, :half], draws[:, :, draws.shape[2] - half :]], axis=1)


def normal_scores(draws: np.ndarray) -> np.ndarray:
    """Replace each parameter's draws by the normal scores of their ranks (ties averaged)."""
    flat = draws.reshape(draws.shape[0], -1)
    ranks = stats.rankdata(flat, method="average", axis=1)
    scores = special.ndtri((ranks - _BLOM) / (flat.shape[1] + 1 - 2 * _BLOM))
    return scores.reshape(draws.shape)


def potential_scale_reduction(draws: np.ndarray) -> np.ndarray:
    """Gelman-Rubin R-hat of each parameter over the chains as given (no splitting)."""
    n = draws.shape[2]
    within = draws.var(axis=2, ddof=1).mean(axis=1)
    between = n * draws.mean(axis=2).var(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def effective_size(draws: np.ndarray) -> np.ndarray:
    """Effective sample size of each parameter's draws, chains as given.

    The autocorrelation at lag ``t`` combines within-chain autocovariances with the
    between-chain variance; their sum is truncated where a pair of consecutive lags first
    sums to zero or less (Geyer's initial positive sequence), and the pair sums before it
    are made non-increasing (the initial monotone sequence).

    Parameters
    ----------
    draws : numpy.ndarray
        Shape ``(parameter, chain, draw)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(parameter,)``; the number of draws for a constant parameter, NaN where
        the draws are not finite.
    """
    n_param, n_chain, n = draws.shape
    total = n_chain * n
    centred = draws - draws.mean(axis=2, keepdims=True)
    size = 1 << int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(centred, n=size, axis=2)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=2)[:, :, :n] / n
    mean_var = acov[:, :, 0].mean(axis=1) * n / (n - 1)
    var_plus = mean_var * (n - 1) / n
    if n_chain > 1:
        var_plus = var_plus + draws.mean(axis=2).var(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]
    rho[:, 0] = 1.0
    # Pair k holds lags 2k and 2k + 1; the sequence may run to pair n_pairs - 1.
    n_pairs = 1 + len(range(1, n - 3, 2))
    pairs = rho[:, : 2 * n_pairs].reshape(n_param, n_pairs, 2).sum(axis=2)
    stop = pairs <= 0
    last = np.where(stop.any(axis=1), stop.argmax(axis=1), n_pairs - 1)
    kept = np.arange(n_pairs)[None, :] < last[:, None]
    monotone = np.minimum.accumulate(np.where(kept, pairs, np.inf), axis=1)
    head = np.where(kept, monotone, 0.0).sum(axis=1)
    even = rho[np.arange(n_param), 2 * last]
    tail = np.where(pairs[np.arange(n_param), last] >= 0, even, np.maximum(even, 0.0))
    tau = np.maximum(-1.0 + 2.0 * head + tail, 1.0 / np.log10(total))
    ess = total / tau
    ess = np.where(np.isnan(rho).any(axis=1), np.nan, ess)
    constant = np.ptp(draws.reshape(n_param, -1), axis=1) < np.finfo(float).resolution
    return np.where(constant, float(total), ess)


def diagnose(draws: np.ndarray) -> dict[str, np.ndarray]:
    """Rank-normalised split R-hat and bulk and tail ESS of every parameter.

    Parameters are taken :data:`CHUNK` at a time (the arrays of a block stay in cache),
    the blocks spread over a few threads (NumPy's sorts and FFTs release the GIL): about
    four times faster than one pass over all parameters on a 2-core CPU.

    Parameters
    ----------
    draws : numpy.ndarray
        Shape ``(parameter, chain, draw)`` with at least 4 draws.

    Returns
    -------
    dict
        ``rhat`` (the larger of the bulk and the folded R-hat; NaN with one chain),
        ``ess_bulk`` and ``ess_tail`` (the smaller of the 5% and 95% quantile ESS), each of
        shape ``(parameter,)`` and NaN where a parameter has a non-finite draw.
    """
    draws = np.asarray(draws, dtype=float)
    blocks = [draws[i : i + CHUNK] for i in range(0, draws.shape[0], CHUNK)]
    if len(blocks) == 1:
        return _diagnose_block(draws)
    with ThreadPoolExecutor(min(THREADS, os.cpu_count() or 1)) as pool:
        parts = list(pool.map(_diagnose_block, blocks))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def diagnose_each(variables: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """:func:`diagnose` of each variable, reading the figures of draws judged before.

    The check that decides whether NUTS draws more and the run's final verdict read the same
    draws (about a second each on the bundled example's 1,650 scalars), so the figures of
    the last :data:`KNOWN_MAX` variables are kept, keyed by shape and a digest of the
    draws; the variables not seen before are judged together in one :func:`diagnose`.

    Parameters
    ----------
    variables : list of numpy.ndarray
        Each of shape ``(parameter, chain, draw)``.

    Returns
    -------
    list of dict
        :func:`diagnose` of each variable, in order.
    """
    keys = [_draws_key(values) for values in variables]
    fresh = {}
    for key, values in zip(keys, variables, strict=True):
        if key not in _KNOWN:
            fresh.setdefault(key, values)
    if fresh:
        stats, start = diagnose(np.concatenate(list(fresh.values()))), 0
        for key, values in fresh.items():
            stop = start + values.shape[0]
            _KNOWN[key] = {k: v[start:stop] for k, v in stats.items()}
            start = stop
    each = [_KNOWN[key] for key in keys]
    while len(_KNOWN) > KNOWN_MAX:  # the oldest first, once this call has read its own
        del _KNOWN[next(iter(_KNOWN))]
    return each


#: Variables whose figures :func:`diagnose_each` keeps.
KNOWN_MAX = 64
_KNOWN: dict[tuple, dict[str, np.ndarray]] = {}


def _draws_key(values: np.ndarray) -> tuple:
    """A variable's draws as a key: their shape and a digest of their bytes."""
    digest = hashlib.blake2b(np.ascontiguousarray(values).view(np.uint8), digest_size=16)
    return values.shape, digest.hexdigest()


def _diagnose_block(draws: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`diagnose` of one block of parameters."""
    bad = ~np.isfinite(draws).all(axis=(1, 2))
    draws = np.where(bad[:, None, None], 0.0, draws)
    split = split_chains(draws)
    scores = normal_scores(split)
    ess_bulk = effective_size(scores)
    flat = draws.reshape(draws.shape[0], -1)
    low, high = np.quantile(flat, [0.05, 0.95], axis=1)
    ess_tail = np.minimum(
        effective_size(split_chains((draws <= low[:, None, None]).astype(float))),
        effective_size(split_chains((draws <= high[:, None, None]).astype(float))),
    )
    if draws.shape[1] > 1:
        median = np.median(split.reshape(split.shape[0], -1), axis=1)
        folded = np.abs(split - median[:, None, None])
        bulk = potential_scale_reduction(scores)
        # the folded R-hat is undefined when every half-chain's folded draws are constant
        # (two-valued draws): the bulk one then stands alone, as in ArviZ
        rhat = np.where(
            np.isnan(bulk), np.nan, np.fmax(bulk, potential_scale_reduction(normal_scores(folded)))
        )
    else:
        rhat = np.full(draws.shape[0], np.nan)
    nan = np.where(bad, np.nan, 0.0)
    return {"rhat": rhat + nan, "ess_bulk": ess_bulk + nan, "ess_tail": ess_tail + nan}
