"""How many posterior draws a check pass uses, and the chunks it works in.

A pass uses at most ``max_draws`` posterior draws and at most :data:`CHECK_ELEMENTS` cell
or pair evaluations: for large data (say AlpacaEval's million decisive pairs) it keeps
fewer, evenly spaced draws (never fewer than :data:`MIN_CHECK_DRAWS`), which changes
p-values only within Monte Carlo noise. Arrays of (draws x cells) are processed in chunks
of at most :data:`CHUNK_ELEMENTS` numbers.
"""

from __future__ import annotations

import os

import numpy as np

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.thinning import evenly_spaced

#: At least this many replicated data sets are drawn (several per draw for short runs and
#: MAP, where the check is a plug-in check at the point estimate).
MIN_REPLICATES = 200
#: Largest number of elements of one (draws x cells) array held at once.
CHUNK_ELEMENTS = 4_000_000
#: Largest number of cell (or arena pair) evaluations of one check pass over one kind of
#: data: beyond it a pass uses fewer posterior draws (evenly spaced among those selected).
#: 1e8 evaluations take a few seconds on a laptop core; at 500 draws the budget starts to
#: bite above 200,000 static cells or arena pairs (DualEval's paper scale has 35,000).
CHECK_ELEMENTS = 100_000_000
#: Largest (cells x draws) array kept by the arena pass (float32, two of them).
STORE_ELEMENTS = 25_000_000
#: Fewest posterior draws a check pass uses when the run has them (the budget's floor).
MIN_CHECK_DRAWS = 50
#: Fewest draws per chunk of the arena pass (its arrays are pairs x draws).
PAIR_CHUNK_DRAWS = 8
#: Threads a pass runs its independent chunks on (NumPy releases the interpreter lock in
#: its array loops): one per core, at most 4, since each holds a chunk's arrays at once.
THREADS = min(os.cpu_count() or 1, 4)


def select_draws(n: int, max_draws: int, rng: np.random.Generator) -> np.ndarray:
    """All draws, or a seeded random subset of ``max_draws`` of them (sorted)."""
    if max_draws < 1:
        raise InputError(f"max_draws must be at least 1, got {max_draws}")
    if n <= max_draws:
        return np.arange(n)
    return np.sort(rng.choice(n, size=max_draws, replace=False))


def budget(draws: np.ndarray, width: int, store: int = 0) -> np.ndarray:
    """The draws a check pass over ``width`` elements per draw can afford.

    At most :data:`CHECK_ELEMENTS` evaluations (``len(result) * width``) and, when the pass
    keeps a (``store`` x draws) array, at most :data:`STORE_ELEMENTS` numbers in it; never
    fewer than :data:`MIN_CHECK_DRAWS` draws. The subset is evenly spaced in ``draws``.
    """
    n = CHECK_ELEMENTS // max(width, 1)
    if store:
        n = min(n, STORE_ELEMENTS // store)
    n = max(n, MIN_CHECK_DRAWS)
    if n >= len(draws):
        return draws
    return draws[evenly_spaced(len(draws), n)]


def replicate_index(draws: np.ndarray) -> np.ndarray:
    """Draw index of each replicated data set: every draw, cycled to reach the minimum."""
    return np.resize(draws, max(len(draws), MIN_REPLICATES))


def chunks(index: np.ndarray, n_cols: int, least: int = 1):
    """Consecutive pieces of ``index``: :data:`CHUNK_ELEMENTS` // ``n_cols`` entries each.

    At least ``least`` entries per piece (the last may be shorter).
    """
    width = max(least, CHUNK_ELEMENTS // max(n_cols, 1))
    for start in range(0, len(index), width):
        yield index[start : start + width]
