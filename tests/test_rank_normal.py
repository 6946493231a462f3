"""The vectorised R-hat and ESS agree with ArviZ's, one parameter at a time."""

import warnings

import arviz as az
import numpy as np
import pytest

from bayes_dualeval.posterior.diagnostics import per_parameter
from bayes_dualeval.posterior.rank_normal import diagnose, effective_size


def _chains(rng, n_param, n_chain, n_draw, offset=0.2):
    """AR(1) chains with persistence from anticorrelated to sticky, and chain offsets."""
    phi = np.linspace(-0.6, 0.98, n_param)
    noise = rng.normal(size=(n_param, n_chain, n_draw))
    x = np.empty_like(noise)
    x[..., 0] = noise[..., 0]
    for t in range(1, n_draw):
        x[..., t] = phi[:, None] * x[..., t - 1] + noise[..., t]
    return x + rng.normal(0, offset, size=(n_param, n_chain, 1))


def _arviz(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "rhat": np.array([float(az.rhat(p)) for p in x]),
            "ess_bulk": np.array([float(az.ess(p, method="bulk")) for p in x]),
            "ess_tail": np.array([float(az.ess(p, method="tail")) for p in x]),
        }


@pytest.mark.parametrize("n_chain, n_draw", [(4, 200), (2, 101), (3, 9)])
def test_agrees_with_arviz(n_chain, n_draw):
    rng = np.random.default_rng(n_draw)
    x = _chains(rng, 40, n_chain, n_draw)
    x[0] = 2.5  # constant
    x[1] = np.round(x[1])  # many ties
    x[2] = rng.integers(0, 2, size=(n_chain, n_draw))  # two values
    x[3, 0, :] = x[3, 0, 0]  # a stuck chain
    x[4, 1, 3] = np.nan
    ours, theirs = diagnose(x), _arviz(x)
    for key in ours:
        np.testing.assert_array_equal(np.isnan(ours[key]), np.isnan(theirs[key]), err_msg=key)
        ok = ~np.isnan(theirs[key])
        np.testing.assert_allclose(ours[key][ok], theirs[key][ok], rtol=1e-9, err_msg=key)
    assert np.isnan(ours["ess_bulk"][4]) and ours["ess_bulk"][0] == n_chain * (n_draw // 2) * 2


def test_blocks_and_threads_do_not_change_the_answer():
    x = _chains(np.random.default_rng(3), 100, 4, 60)
    whole = diagnose(x)
    one_by_one = [diagnose(x[i : i + 1]) for i in range(len(x))]
    for key, values in whole.items():
        np.testing.assert_array_equal(values, np.concatenate([d[key] for d in one_by_one]))


def test_one_chain_has_no_rhat_but_has_ess():
    out = diagnose(_chains(np.random.default_rng(4), 5, 1, 100))
    assert np.isnan(out["rhat"]).all() and np.isfinite(out["ess_bulk"]).all()


def test_sticky_chains_have_fewer_effective_draws():
    x = _chains(np.random.default_rng(5), 40, 4, 400, offset=0.0)
    ess = effective_size(x)
    # independent draws give about their number; phi = 0.98 gives about (1 - phi) / (1 + phi)
    assert ess[-1] < 0.05 * x[0].size < ess[len(ess) // 3]


def test_per_parameter_labels_match_the_posterior():
    rng = np.random.default_rng(6)
    idata = az.from_dict(
        posterior={"g": rng.normal(size=(2, 50)), "t": rng.normal(size=(2, 50, 3))},
        coords={"model": ["m1", "m2", "m3"]},
        dims={"t": ["model"]},
    )
    table = per_parameter(idata)
    assert list(table.index) == ["g", "t[m1]", "t[m2]", "t[m3]"]
    expected = _arviz(np.asarray(idata.posterior["t"].values).transpose(2, 0, 1))
    np.testing.assert_allclose(table.loc["t[m2]", "ess_bulk"], expected["ess_bulk"][1])


def test_per_parameter_judges_the_same_draws_once(monkeypatch):
    """The draw-more check and the final verdict read the same draws: the second call
    computes nothing, and a variable whose draws changed is judged again (it alone)."""
    from bayes_dualeval.posterior import rank_normal

    rng = np.random.default_rng(7)
    g, t = rng.normal(size=(2, 60)), _chains(rng, 3, 2, 60).transpose(1, 2, 0)
    first = per_parameter(az.from_dict(posterior={"g": g, "t": t}))
    judged = []
    monkeypatch.setattr(
        rank_normal, "diagnose", lambda x: judged.append(x.shape[0]) or diagnose(x)
    )
    # the verdict's posterior is built apart, with other labels and the variables reordered
    again = per_parameter(
        az.from_dict(posterior={"t": t.copy(), "g": g.copy()}, coords={"k": list("abc")},
                     dims={"t": ["k"]})
    )  # fmt: skip
    assert judged == []
    np.testing.assert_array_equal(again.loc["g"].values, first.loc["g"].values)
    np.testing.assert_array_equal(again.loc["t[b]"].values, first.loc["t[1]"].values)
    t[1, 5, 2] += 1.0  # one draw of one scalar changes
    changed = per_parameter(az.from_dict(posterior={"g": g, "t": t}))
    assert judged == [3]  # t judged again, g read
    expected = _arviz(t.transpose(2, 0, 1))
    np.testing.assert_allclose(changed.loc["t[2]", "rhat"], expected["rhat"][2], rtol=1e-9)
