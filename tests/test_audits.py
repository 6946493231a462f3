"""The psychometric audits: benchmarks.csv, item fit, model fit and local dependence.

Planted truths from :mod:`bayes_dualeval.validation.psychometrics`, fitted by MAP (fast;
the checks are then plug-in checks at the point estimate). Seeds 21-27 are not used by
``scripts/studies/audit_study.py`` (5000+), whose tables are in docs/auditing.md.
"""

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayes_dualeval.checks import CheckOptions, item_table
from bayes_dualeval.checks.dependence import clusters, dependence_table, q3_matrix
from bayes_dualeval.checks.fitted import resolve
from bayes_dualeval.checks.model_fit import below_chance, model_fit_table
from bayes_dualeval.checks.saturation import OVERALL, benchmarks
from bayes_dualeval.core.errors import DataWarning, InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.runs.fit import fit
from bayes_dualeval.validation import psychometrics as planted

MAP = SamplerSettings(sampler="map", seed=0, progress=False)
OPTIONS = CheckOptions(seed=0, max_draws=50)


def _fit(frame: pd.DataFrame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=frame)
        return fit(ds, load_spec("dualeval-2pl").replace(mode="static"), MAP)


@pytest.fixture(scope="module")
def inverted():
    frame, bad = planted.inverted_model(40, 150, seed=21)
    return _fit(frame), bad


@pytest.mark.study
def test_an_easy_benchmark_is_saturated_and_a_matched_one_is_not():
    """Easy: info at the top < 1/4 of the matched one's, ceiling share > 0.5."""
    frame, _ = planted.two_benchmarks(30, 150, seed=22)
    result = _fit(frame)
    table = benchmarks(result.idata, result.dataset, ci=0.95, options=OPTIONS)
    rows = table.set_index("source")
    easy, matched = rows.loc["easy"], rows.loc["matched"]
    assert list(table["source"]) == ["easy", "matched", OVERALL]
    assert easy["info_at_top"] < 0.25 * matched["info_at_top"]
    assert easy["ceiling_share"] > 0.5 and matched["ceiling_share"] < 0.2
    assert easy["verdict"].startswith("saturated") and np.isfinite(easy["saturated_above"])
    assert matched["verdict"].startswith("measures the top")
    assert easy["top_separated"] <= matched["top_separated"]
    assert (table["reliability"].between(0, 1)).all()
    assert rows.loc[OVERALL, "items"] == 300 and (table["models"] == 30).all()
    curves = table.attrs["curves"]
    assert curves.info.shape == (3, len(curves.grid)) and len(curves.top) == 5
    # the overall curve is the benchmarks' sum
    np.testing.assert_allclose(curves.info[2], curves.info[0] + curves.info[1], rtol=1e-9)


def test_the_inverted_model_has_the_lowest_fit_p_and_is_named(inverted):
    result, bad = inverted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = model_fit_table(result.idata, result.dataset, options=OPTIONS)
    assert table.sort_values("fit_p")["model"].iloc[0] == bad
    clean = table[table["model"] != bad]
    assert (clean["fit_p"] < 0.01).mean() <= 0.05
    assert clean["outfit"].median() == pytest.approx(1.0, abs=0.25)
    messages = [str(w.message) for w in caught if issubclass(w.category, DataWarning)]
    assert any(bad in m for m in messages)
    assert not any(m in text for text in messages for m in clean["model"])


def test_below_chance_is_a_binomial_test_and_bad_levels_are_one_error(inverted):
    result, _ = inverted
    run = resolve(result.idata, result.dataset, None, None, None)
    table = below_chance(run, {"bench": 0.6})
    ds = result.dataset
    k = np.bincount(ds.static_model, ds.static_y, minlength=ds.n_models)
    n = np.bincount(ds.static_model, ds.static_n, minlength=ds.n_models)
    np.testing.assert_allclose(table["p_value"], stats.binom.cdf(k, n, 0.6))
    assert table["flagged"].any() and (table.loc[table["flagged"], "accuracy"] < 0.6).all()
    assert below_chance(run).empty  # a 2PL has no floor: no level without one given
    for chance, words in (({"other": 0.5}, "no static source"), ({"bench": 1.5}, "in (0, 1)")):
        with pytest.raises(InputError, match=re.escape(words)):
            below_chance(run, chance)


@pytest.mark.study
def test_items_with_a_guessing_floor_misfit_more_than_clean_items():
    """10 of 200 questions with a floor of 0.4 under a 2PL fit rank above the clean ones.

    Only above: the issue's top decile is not reached (docs/auditing.md#item-fit: a 2PL
    absorbs most of a floor). Median rank fraction of the planted questions below 0.35
    (measured 0.24; clean questions: about 0.5), of those harder than the median model,
    where a floor shows, below 0.4 (measured 0.30).
    """
    frame, floored = planted.floor_items(60, 200, 10, seed=27)
    result = _fit(frame)
    items = item_table(result.idata, result.dataset, options=OPTIONS)
    rank = items["fit_ppp"].rank(method="average") / len(items)
    truth = items["item"].map(floored)
    hard = (truth > 0).to_numpy()
    assert hard.sum() >= 3
    assert rank[truth.notna()].median() < 0.35 and rank[hard].median() < 0.4
    has = items["fit_ppp"].notna()  # NaN: an item the MAP fit left non-finite
    assert has.all()
    assert (items.loc[has, "fit_q"] >= items.loc[has, "fit_ppp"] - 1e-12).all()
    clean = ~items["item"].isin(list(floored))
    for name in ("infit_mean", "outfit_mean"):
        assert items.loc[clean, name].median() == pytest.approx(1.0, abs=0.2)
    assert items["infit_lo"].isna().all()  # MAP: no intervals


@pytest.mark.study
def test_a_planted_testlet_is_one_cluster_and_independent_data_have_none():
    frame, testlet = planted.dependent_cluster(100, 150, seed=24, effect=2.0)
    result = _fit(frame)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = dependence_table(result.idata, result.dataset, options=OPTIONS)
    found = clusters(table)
    assert len(found) == 1
    members = set(next(iter(found.values())))
    assert len(members & testlet) >= 4 and len(members - testlet) <= 3
    assert any("bench#1" in str(w.message) for w in caught)
    frame, none = planted.dependent_cluster(100, 150, seed=25)
    result = _fit(frame)
    table = dependence_table(result.idata, result.dataset, options=OPTIONS)
    assert not none and clusters(table) == {} and not table["flagged"].any()


def test_q3_matrix_matches_pairwise_complete_correlations():
    rng = np.random.default_rng(26)
    resid = rng.normal(size=(30, 6))
    mask = rng.random((30, 6)) > 0.2
    q3, count = q3_matrix(resid, mask)
    for i, j in ((0, 1), (2, 5), (3, 4)):
        both = mask[:, i] & mask[:, j]
        expected = np.corrcoef(resid[both, i], resid[both, j])[0, 1]
        assert q3[i, j] == pytest.approx(expected, abs=1e-10)
        assert count[i, j] == both.sum()
    full, _ = q3_matrix(resid, np.ones_like(mask))
    np.testing.assert_allclose(full, np.corrcoef(resid.T), atol=1e-10)


@pytest.mark.parametrize(
    ("chance", "expected"),
    [("qa", "SOURCE=LEVEL"), ("qa=2", "in (0, 1)"), ("other=0.5", "no static source 'other'")],
)
def test_bad_chance_levels_are_one_error_line_before_the_fit(tmp_data, chance, expected):
    from conftest import invoke, one_error, static_rows

    tmp_data.csv("data/static.csv", static_rows(["m1", "m2", "m3"], n=4))
    out = tmp_data.path("run")
    result = invoke("fit", tmp_data.path("data"), "--sampler", "map", "--chance", chance,
                    "--out", out, "-q")  # fmt: skip
    one_error(result, expected)
    assert not out.exists()
