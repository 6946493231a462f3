"""Posterior summaries that need no fit: the pairwise table, in blocks and whole."""

import arviz as az
import numpy as np

from bayes_dualeval.posterior import summaries


def _idata(n_models, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(np.linspace(1, -1, n_models), 0.7, size=(2, 50, n_models))
    labels = [f"m{k}" for k in range(n_models)]
    return az.from_dict(
        posterior={"theta_centred": theta},
        coords={"model": labels},
        dims={"theta_centred": ["model"]},
    )


def test_pairwise_in_blocks_is_the_whole_comparison(monkeypatch):
    idata = _idata(9)
    theta = idata.posterior["theta_centred"].values.reshape(100, 9)
    order = np.argsort(-theta.mean(0), kind="stable")
    t = theta[:, order]
    whole = (t[:, :, None] > t[:, None, :]).mean(0)
    np.fill_diagonal(whole, np.nan)
    for block in (100 * 9, 100 * 9 * 4, 10**9):  # one row, four rows, every row at once
        monkeypatch.setattr(summaries, "PAIRWISE_BLOCK", block)
        table = summaries.pairwise(idata)
        np.testing.assert_array_equal(table.to_numpy(), whole)
        assert list(table.index) == [f"m{k}" for k in order] == list(table.columns)
    # complementary off the diagonal (continuous draws never tie)
    off = ~np.eye(9, dtype=bool)
    np.testing.assert_allclose((table.to_numpy() + table.to_numpy().T)[off], 1.0)
