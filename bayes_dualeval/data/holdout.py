"""Held-out cells: a random share of the data left out of a fit, to score its predictions.

``fit --holdout F`` removes a random share ``F`` of the static labels and of the arena
rewards before fitting (:func:`hold_out`) and scores the posterior's predictions of them
afterwards (:mod:`bayes_dualeval.checks.holdout`): a richer model that only fits noise
predicts held-out cells no better. The split depends only on the data, the share and the
split's own seed, never on the sampler's, so runs of different models on the same data with
the same ``--holdout`` leave out the same cells and their scores compare directly.

Arena rewards keep the normalisation computed from all rows (the held-out rows are scored on
the scale the fit saw), and every item keeps at least :data:`MIN_KEPT` fitted cells of each
kind it has, so no item's parameters are left to the prior alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset

#: Fitted cells every item keeps (per kind): held-out cells are put back until it has them.
MIN_KEPT = 2
#: Largest share of cells that may be held out.
MAX_SHARE = 0.5


@dataclass(frozen=True, eq=False)
class HeldOut:
    """The cells a fit left out, on the dataset's model and item axes.

    Attributes
    ----------
    share : float
        The share asked for.
    seed : int
        Seed of the split.
    static_model, static_item : numpy.ndarray of int32
    static_y, static_n : numpy.ndarray of int32
        Correct answers and answers of each held-out static cell (a cell is held out
        with all its repeated answers).
    arena_model, arena_item : numpy.ndarray of int32
    arena_z : numpy.ndarray of float64
        Normalised rewards, on the scale the fitted rows have.
    static_judge : numpy.ndarray of int32
        The judge of each held-out static cell (index into the dataset's judges).
    """

    share: float
    seed: int
    static_model: np.ndarray
    static_item: np.ndarray
    static_y: np.ndarray
    static_n: np.ndarray
    arena_model: np.ndarray
    arena_item: np.ndarray
    arena_z: np.ndarray
    static_judge: np.ndarray

    @property
    def n_static(self) -> int:
        """Held-out static cells."""
        return len(self.static_y)

    @property
    def n_arena(self) -> int:
        """Held-out arena rewards."""
        return len(self.arena_z)


def hold_out(dataset: Dataset, share: float, seed: int = 0) -> tuple[Dataset, HeldOut]:
    """Split ``dataset`` into the cells to fit and a random share ``share`` to hold out.

    Each static cell (with its repeated answers) and each arena reward is held out with
    probability ``share``
    (independently, seeded by ``seed``); held-out cells are then put back, in a random
    order, wherever an item would keep fewer than :data:`MIN_KEPT` cells of a kind.

    Parameters
    ----------
    dataset : Dataset
    share : float
        In ``(0, MAX_SHARE]``.
    seed : int

    Returns
    -------
    fitted : Dataset
        The same models, items and normalisation, with the held-out rows removed.
    held : HeldOut

    Raises
    ------
    ConfigError
        For a share outside ``(0, MAX_SHARE]``, or when nothing could be held out.
    """
    if not 0.0 < share <= MAX_SHARE:
        raise ConfigError(f"holdout must be in (0, {MAX_SHARE}], got {share}")
    rng = np.random.default_rng(seed)
    keep_s = _keep(rng, dataset.static_item, dataset.n_items, share)
    keep_r = _keep(rng, dataset.arena_item, dataset.n_items, share)
    if keep_s.all() and keep_r.all():
        raise ConfigError(
            f"holdout {share:g} left no cell out: every item has too few cells to spare "
            f"(each keeps {MIN_KEPT})"
        )
    fitted = dataclasses.replace(
        dataset,
        static_model=dataset.static_model[keep_s],
        static_item=dataset.static_item[keep_s],
        static_y=dataset.static_y[keep_s],
        static_n=dataset.static_n[keep_s],
        static_judge=dataset.static_judge[keep_s],
        arena_model=dataset.arena_model[keep_r],
        arena_item=dataset.arena_item[keep_r],
        arena_reward=dataset.arena_reward[keep_r],
        arena_n=dataset.arena_n[keep_r],
        arena_judge=dataset.arena_judge[keep_r],
        arena_style=dataset.arena_style[keep_r],
        arena_z=dataset.arena_z[keep_r],
    )
    held = HeldOut(
        share=float(share),
        seed=int(seed),
        static_model=dataset.static_model[~keep_s],
        static_item=dataset.static_item[~keep_s],
        static_y=dataset.static_y[~keep_s],
        static_n=dataset.static_n[~keep_s],
        arena_model=dataset.arena_model[~keep_r],
        arena_item=dataset.arena_item[~keep_r],
        arena_z=dataset.arena_z[~keep_r],
        static_judge=dataset.static_judge[~keep_s],
    )
    return fitted, held


def _keep(rng, item: np.ndarray, n_items: int, share: float) -> np.ndarray:
    """Which cells to fit: a random ``1 - share``, topped up to :data:`MIN_KEPT` per item."""
    keep = rng.random(len(item)) >= share
    need = MIN_KEPT - np.bincount(item[keep], minlength=n_items)
    # put held-out cells of short items back, in a random order, until each has enough:
    # the first ``need`` of each item's held-out cells once shuffled and grouped by item
    held = rng.permutation(np.flatnonzero(~keep & (need[item] > 0)))
    held = held[np.argsort(item[held], kind="stable")]
    starts = np.searchsorted(item[held], item[held], side="left")
    keep[held[np.arange(len(held)) - starts < need[item[held]]]] = True
    return keep
