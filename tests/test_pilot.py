"""The pilot that chooses each item's coordinates: its centring weights of ``b`` and ``log a``."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import pilot
from bayes_dualeval.model.simulate import simulate


def _dataset(n_models, n_static, log_a_sd=0.3, seed=0, n_arena=0):
    static, arena, _ = simulate(n_models, n_static, n_arena, log_a_sd=log_a_sd, seed=seed)
    return Dataset.from_frames(static=static, arena=arena if n_arena else None)


def test_weights_lie_in_the_unit_interval_and_arena_prompts_are_non_centred():
    ds = _dataset(25, 120, n_arena=20)
    rows = pilot.centring(ds, True)
    arena = np.asarray(ds.item_kind == "arena")
    assert rows.shape == (3, ds.n_items) and rows.dtype == np.float32
    assert np.all((rows >= 0) & (rows <= 1))
    np.testing.assert_array_equal(rows[:2, arena], 0.0)
    np.testing.assert_array_equal(rows[2], 0.0)  # no level term, nothing anchored
    # static items get weights strictly inside: neither layout is right for all of them
    assert 0.05 < np.median(rows[0, ~arena]) < 0.95
    assert 0.0 < np.median(rows[1, ~arena]) < 0.9


def test_anchored_prompts_are_marked_under_the_level_term():
    ds = _dataset(25, 60, n_arena=20)
    rows = pilot.centring(ds, True, arena_level=True)
    arena = np.asarray(ds.item_kind == "arena")
    np.testing.assert_array_equal(rows[2], arena.astype(np.float32))
    np.testing.assert_array_equal(rows[0, arena], 1.0)


def test_the_b_weight_is_the_share_of_prior_variance_the_pilot_information_removes():
    ds = _dataset(20, 80)
    info_b = pilot.b_information(ds, True)
    r = pilot.PILOT_SHARE_B * info_b * pilot.PRIOR_SD_B**2
    np.testing.assert_allclose(pilot.centring(ds, True)[0], r / (1 + r), rtol=1e-6)


def test_more_models_measure_each_slope_better():
    # the same 200 items, answered by 60 models or by the first 15 of them
    static, _, _ = simulate(60, 200, 0, seed=1)
    few = static[static["model_label"].isin(sorted(static["model_label"].unique())[:15])]
    w_many = pilot.log_a_weights(Dataset.from_frames(static=static))
    w_few = pilot.log_a_weights(Dataset.from_frames(static=few))
    assert np.median(w_many) > np.median(w_few) + 0.1


@pytest.mark.parametrize("n_models", [40, 12])
def test_a_wider_spread_of_log_a_centres_more_where_it_can_be_read(n_models):
    """With 20+ models the group's spread is estimated, so a wider one raises the weights;
    with fewer it stays at the typical prior's 0.3 and the weights barely move."""
    narrow = pilot.log_a_weights(_dataset(n_models, 300, log_a_sd=0.3))
    wide = pilot.log_a_weights(_dataset(n_models, 300, log_a_sd=0.8))
    gap = np.median(wide) - np.median(narrow)
    if n_models >= pilot.SPREAD_MIN_MODELS:
        assert gap > 0.15
    else:
        assert abs(gap) < 0.15


def test_other_layouts_and_a_bad_name():
    ds = _dataset(8, 20)
    np.testing.assert_array_equal(pilot.centring(ds, True, "none"), 0.0)
    np.testing.assert_array_equal(pilot.centring(ds, True, "all")[:2], 1.0)
    with pytest.raises(ConfigError, match="auto, none or all"):
        pilot.centring(ds, True, "some")
