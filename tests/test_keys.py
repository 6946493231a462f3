"""The miskeyed flag of items.csv (checks/keys.py): planted reversed keys are found.

Seeds 11 and 12 are not used by ``scripts/studies/miskey_study.py`` (3000+). MAP fits keep the test
fast; the study's tables (docs/auditing.md#items) are the measured recall and precision.
"""

import warnings

import numpy as np
import pytest

from bayes_dualeval.checks import CheckOptions, item_table
from bayes_dualeval.checks.keys import MISKEY_Q, bayes_q
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.runs.fit import fit
from bayes_dualeval.validation.audit import reverse_keys

MAP = SamplerSettings(sampler="map", seed=0, progress=False)


def _table(static):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, source="bench")
        result = fit(ds, load_spec("dualeval-2pl").replace(mode="static"), MAP)
    return item_table(result.idata, result.dataset, options=CheckOptions(max_draws=50))


@pytest.fixture(scope="module")
def planted():
    static, _, _ = simulate(30, 200, 0, seed=11)
    reversed_ids = reverse_keys(static, 0.05, np.random.default_rng(11))
    table = _table(static)
    truth = table["item"].str.split("::", n=1).str[1].isin(reversed_ids).to_numpy()
    return table, truth


def test_planted_reversed_keys_are_flagged(planted):
    """30 x 200, 10 reversed keys: recall >= 0.7 and precision >= 0.8 (measured 0.8, 0.89)."""
    table, truth = planted
    flag = table["flags"].str.contains("miskeyed").to_numpy()
    assert truth.sum() == 10
    assert (flag & truth).sum() / truth.sum() >= 0.7
    assert (flag & truth).sum() / max(flag.sum(), 1) >= 0.8
    assert (flag == (table["key_q"].to_numpy() < MISKEY_Q)).all()


def test_key_evidence_ranks_reversed_keys_above_the_correlation(planted):
    """The Bayes factor orders reversed keys at least as well as -key_correlation."""
    from bayes_dualeval.validation.audit import auprc

    table, truth = planted
    ok = table["key_evidence"].notna().to_numpy()
    evidence = auprc(table["key_evidence"].to_numpy()[ok], truth[ok])
    correlation = auprc(-table["key_correlation"].to_numpy()[ok], truth[ok])
    assert evidence >= correlation - 0.02
    assert evidence > 0.8


def test_clean_keys_give_few_flags():
    static, _, _ = simulate(30, 200, 0, seed=12)
    table = _table(static)
    assert table["flags"].str.contains("miskeyed").sum() <= 1
    assert table.loc[table["kind"] == "static", "key_evidence"].notna().mean() > 0.8


def test_bayes_q_is_monotone_and_small_only_with_strong_evidence():
    evidence = np.r_[np.full(95, -3.0), [8.0, 9.0, 10.0, 0.0, np.nan]]
    q = bayes_q(evidence)
    assert np.isnan(q[-1])
    order = np.argsort(-evidence[:-1])
    assert np.all(np.diff(q[:-1][order]) >= -1e-12)
    assert (q[95:98] < 0.05).all()
    assert (q[:95] > 0.5).all()
    assert np.isnan(bayes_q(np.full(3, np.nan))).all()


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (0.25, 1.0), (0.2, 0.9)])
def test_item_mode_finds_the_mode_of_each_items_log_joint(bounds):
    """The Fisher-scoring fits of ``(log a, b)`` per item reach the maximum of the log
    joint ``sum log P(y) + log prior``, with ``P = c + (d - c) sigmoid(a (theta - b))``
    (the floor and ceiling of a 3PL/4PL run), and report its value."""
    from scipy import optimize, special

    from bayes_dualeval.checks.keys import item_mode

    rng = np.random.default_rng(11)
    n_models, k = 25, 6
    theta = np.tile(rng.normal(size=n_models), k)
    item = np.repeat(np.arange(k), n_models)
    c, d = bounds
    true_b = rng.normal(size=k)
    p = c + (d - c) * special.expit(1.3 * (theta - true_b[item]))
    y = (rng.random(len(p)) < p).astype(float)
    y[item == 5] = 1.0 - y[item == 5]  # one reversed item
    prior = (0.1, 0.4, 0.0, 1.0)
    joint, logdet = item_mode(theta, item, y, k, prior, bounds)

    def log_joint(v, q):
        u, b = v
        rows = item == q
        pq = c + (d - c) * special.expit(np.exp(u) * (theta[rows] - b))
        ll = np.sum(y[rows] * np.log(pq) + (1 - y[rows]) * np.log1p(-pq))
        return ll - 0.5 * (((u - prior[0]) / prior[1]) ** 2 + ((b - prior[2]) / prior[3]) ** 2)

    for q in range(k):
        best = optimize.minimize(
            lambda v, q=q: -log_joint(v, q),
            x0=[0.1, 0.0],
            method="Nelder-Mead",
            options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000},
        )
        assert joint[q] == pytest.approx(-best.fun, abs=1e-5)
    assert np.isfinite(logdet).all()


@pytest.mark.parametrize("threads", [1, 3])
def test_items_solved_in_chunks_on_threads_give_the_one_solve(monkeypatch, threads):
    """Above ``CHUNK_LABELS`` labels both hypotheses are solved in chunks of whole items on
    threads; every item's mode, joint and determinant equal those of one solve over every
    label, exactly (items with no label and shuffled rows included)."""
    from bayes_dualeval.checks import budget, keys

    rng = np.random.default_rng(5)
    n_models, k = 40, 23
    item = rng.permutation(np.repeat(np.arange(k), rng.integers(0, 60, k)))  # some empty
    theta = rng.normal(size=n_models)[rng.integers(0, n_models, len(item))]
    b = rng.normal(size=k)
    y = (rng.random(len(item)) < 1 / (1 + np.exp(-(theta - b[item])))).astype(float)
    prior = (0.0, 0.4, 0.0, 1.0)
    whole = [keys.item_mode(theta, item, labels, k, prior) for labels in (y, 1.0 - y)]
    monkeypatch.setattr(keys, "CHUNK_LABELS", 0)
    monkeypatch.setattr(budget, "THREADS", threads)
    chunked = keys.both_modes(theta, item, y, k, prior)
    for one, parts in zip(whole, chunked, strict=True):
        for expected, got in zip(one, parts, strict=True):
            np.testing.assert_array_equal(got, expected)
