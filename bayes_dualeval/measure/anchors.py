r"""Representative items: a short form chosen to predict accuracy rather than to rank.

The informative short form of :func:`~bayes_dualeval.measure.compress.compress` keeps the
items with the most Fisher information; those are the discriminating items near the bank
models' abilities, which rank models well but are not a sample of the benchmark: the
accuracy a model would have on the whole benchmark is then an extrapolation to items unlike
the ones it answered. For accuracy the short form should look like the benchmark.

Here every item is described by its *success profile*: the bank's posterior mean
probability that each bank model answers it correctly,
:math:`\bar p_{q} = (\bar p_{1q}, \dots, \bar p_{Mq})` (the IRT model's smoothing of the
bank's response matrix, as tinyBenchmarks clusters items by their correctness across
models). Within each source the items are grouped into as many clusters as items are to
be kept (k-means, Euclidean, k-means++ starts, seeded), and the item nearest each cluster's
centre stands for the cluster, with the cluster's size as its weight. Items whose profiles
are alike (the same models get them right) are interchangeable for predicting accuracy,
so one per cluster covers the benchmark's mix of easy, hard and model-specific items.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.model import links

#: Lloyd iterations of the k-means (it stops earlier once no item changes cluster).
ITERATIONS = 100
#: Bank draws averaged into the success profiles.
PROFILE_DRAWS = 200


def success_profiles(bank: Bank, items: np.ndarray) -> np.ndarray:
    """Posterior mean success probability of every bank model on ``items``, (len(items), M).

    Arena prompts use the 2PL probability without asymptotes (as their information does).
    """
    from bayes_dualeval.core.thinning import evenly_spaced

    rows = evenly_spaced(bank.n_draws, PROFILE_DRAWS)
    par = bank.parameters(rows, items)
    arena = (bank.items["kind"].to_numpy(dtype=str) == "arena")[items]
    theta = bank.draws["theta"][rows][:, :, None]  # (D, M, 1)
    a = None if par["a"] is None else par["a"][:, None, :]
    c = None if par["c"] is None else np.where(arena, 0.0, par["c"])[:, None, :]
    d = None if par["d"] is None else np.where(arena, 1.0, par["d"])[:, None, :]
    p = links.probability(links.eta(theta, par["b"][:, None, :], a), c, d)  # (D, M, n)
    return p.mean(axis=0).T


def kmeans(points: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Cluster label of each point: Lloyd's k-means from k-means++ starts.

    Parameters
    ----------
    points : numpy.ndarray, shape (n, m)
    k : int
        Clusters, at most ``n``.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of int, shape (n,)
        Labels in ``0 .. k - 1``; every cluster keeps at least one point.
    """
    n = len(points)
    centres = [points[rng.integers(n)]]
    nearest = ((points - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):  # k-means++: far points are likelier starts
        total = nearest.sum()
        pick = rng.choice(n, p=nearest / total) if total > 0 else rng.integers(n)
        centres.append(points[pick])
        nearest = np.minimum(nearest, ((points - points[pick]) ** 2).sum(axis=1))
    centres = np.array(centres)
    labels = np.full(n, -1)
    for _ in range(ITERATIONS):
        dist = _squared_distances(points, centres)  # (n, k)
        new = dist.argmin(axis=1)
        empty = np.setdiff1d(np.arange(k), new)
        for j in empty:  # an empty cluster takes the point farthest from its centre
            far = dist[np.arange(n), new].argmax()
            new[far] = j
            dist[far] = 0.0
        if np.array_equal(new, labels):
            break
        labels = new
        centres = np.array([points[labels == j].mean(axis=0) for j in range(k)])
    return labels


def _squared_distances(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """``|x - c|^2`` for every point and centre, (n, k), without an (n, k, m) array."""
    cross = points @ centres.T
    sq = (points**2).sum(axis=1)[:, None] + (centres**2).sum(axis=1)[None, :] - 2 * cross
    return np.maximum(sq, 0.0)


def representatives(profiles: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` representative rows of ``profiles`` and the size of the cluster each stands for.

    Returns
    -------
    chosen : numpy.ndarray of int
        Row indices (the member nearest each cluster's centre).
    sizes : numpy.ndarray of int
        The clusters' sizes, in the order of ``chosen``.
    """
    n = len(profiles)
    if k >= n:
        return np.arange(n), np.ones(n, dtype=int)
    labels = kmeans(profiles, k, np.random.default_rng(seed))
    chosen, sizes = [], []
    for j in range(k):
        members = np.nonzero(labels == j)[0]
        centre = profiles[members].mean(axis=0)
        chosen.append(members[((profiles[members] - centre) ** 2).sum(axis=1).argmin()])
        sizes.append(len(members))
    return np.array(chosen), np.array(sizes)
