"""The pilot that chooses each item's coordinates: the spread of ``log a`` it reads."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import pilot
from bayes_dualeval.model.simulate import simulate


def _dataset(n_models, n_static, log_a_sd, seed, n_arena=0):
    static, arena, _ = simulate(n_models, n_static, n_arena, log_a_sd=log_a_sd, seed=seed)
    return Dataset.from_frames(static=static, arena=arena if n_arena else None)


@pytest.mark.parametrize(("log_a_sd", "low", "high"), [(0.7, 0.55, 0.85), (0.3, 0.3, 0.5)])
def test_the_spread_of_log_a_is_estimated_from_the_items(log_a_sd, low, high):
    # an empirical-Bayes estimate on proxy abilities: rough, so the bounds are wide, but
    # they keep a spread of 0.3 apart from one of 0.7 (it read 0.45 and 0.68 here)
    spread = pilot.spread_log_a(_dataset(40, 600, log_a_sd, 0))
    assert np.unique(spread).size == 1
    assert low <= spread[0] <= high


def test_few_models_or_items_keep_the_typical_prior():
    for ds in (_dataset(12, 300, 0.7, 0), _dataset(40, 60, 0.7, 0)):
        assert np.all(pilot.spread_log_a(ds) == pilot.PRIOR_SD_LOG_A)


def test_a_spread_below_the_typical_prior_is_floored_at_it():
    spread = pilot.spread_log_a(_dataset(40, 600, 0.05, 0))
    assert np.all(spread == pilot.PRIOR_SD_LOG_A)


def test_arena_prompts_keep_the_typical_prior():
    ds = _dataset(40, 600, 0.7, 0, n_arena=30)
    spread = pilot.spread_log_a(ds)
    arena = np.asarray(ds.item_kind == "arena")
    assert np.all(spread[arena] == pilot.PRIOR_SD_LOG_A)
    assert np.all(spread[~arena] > 0.55)


def test_a_wider_spread_centres_more_discriminations():
    ds = _dataset(40, 600, 0.7, 0)
    spread = pilot.spread_log_a(ds)
    _, info_log_a = pilot.item_information(ds, True)
    centred = pilot.centring(ds, True)[1]
    np.testing.assert_array_equal(centred, info_log_a * spread**2 >= 1.0)
    assert centred.sum() > np.sum(info_log_a * pilot.PRIOR_SD_LOG_A**2 >= 1.0)
