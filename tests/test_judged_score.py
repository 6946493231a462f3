"""Scoring new models against a bank whose arena has judges, families and style (issue 53).

One small bank is fitted once (SVI: 7 simulated models x 30 questions + 40 prompts scored
by 3 judges, one of them self-preferring, with a length effect and ``style=length``); the
other 4 models of the simulation are scored against it. The grid's log likelihood is
checked against the arena term's definition with the facets' scores, term by term.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.load import load
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.measure.grid import arena_pairs, loglik
from bayes_dualeval.measure.responses import responses
from bayes_dualeval.measure.score import score
from bayes_dualeval.model import arena_term, links
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.simulate import simulate, write
from bayes_dualeval.runs.fit import fit, write_run

N_BANK = 7


@pytest.fixture(scope="module")
def judged_bank(tmp_path_factory):
    root = tmp_path_factory.mktemp("judged_bank")
    static, arena, truth = simulate(
        11, 30, 40, judges=3, self_preference=1.0, style_effect=0.8, seed=7
    )
    names = sorted(static["model_label"].unique())
    bank_models = names[:N_BANK]

    def part(models):
        return (
            static[static["model_label"].isin(models)],
            arena[arena["model_label"].isin(models)],
        )

    write(root / "bank_data", *part(bank_models), truth)
    write(root / "new_data", *part(names[N_BANK:]), truth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load(root / "bank_data", style=("length",))
        settings = SamplerSettings(sampler="svi", draws=400, seed=2)
        result = fit(ds, ModelConfig(), settings)
    write_run(result, root / "bank")
    bank = Bank.from_run(root / "bank", max_draws=200, allow_approximate=True)
    return root, bank, truth, names


def _reference(bank, resp, pairs, grids, d):
    """The arena pairs' log likelihood at bank draw ``d``, pair by pair in float64 NumPy."""
    f = bank.facets
    gamma_k = bank.draws["gamma_judge"][d].astype(float)
    bias = np.c_[bank.draws["judge_bias"][d].astype(float), np.zeros(f.n_judges)]
    style = bank.draws["style_coef"][d].astype(float)  # (C, J)
    centre = bank.draws["theta"][d].mean()
    b, a = bank.draws["b"][d].astype(float), bank.draws["a"][d].astype(float)
    fam_new = resp.facets.family
    term = bank.model.arena
    out = np.zeros(grids.shape)
    for k in range(resp.n_models):
        sel = pairs.model == k
        q, j, judge = pairs.item[sel], pairs.other[sel], pairs.judge[sel]
        w, t, bad = pairs.weight[sel], pairs.target[sel], pairs.both_bad[sel]
        x_mine = resp.facets.style[pairs.row[sel]]
        x_other = f.style[pairs.other_row[sel]]
        eta = a[q][:, None] * (grids[k] + centre - b[q][:, None])
        p_mine = links.probability(eta)
        p_other = links.probability(a[q] * (bank.draws["theta"][d][j] - b[q]))
        s_mine = (
            gamma_k[judge][:, None] * p_mine
            + bias[judge, fam_new[k]][:, None]
            + (x_mine * style[:, judge].T).sum(1)[:, None]
        )
        s_other = (
            gamma_k[judge] * p_other
            + bias[judge, f.family[j]]
            + (x_other * style[:, judge].T).sum(1)
        )
        x = s_mine - s_other[:, None]
        ll = np.where(
            bad[:, None],
            term.both_bad_weight * arena_term.both_bad(eta, 1.0),
            term.weight * arena_term.pair(x, t[:, None], 1.0),
        )
        out[k] += (w[:, None] * ll).sum(0)
    return out


def test_the_grid_reads_each_judges_scores(judged_bank):
    root, bank, *_ = judged_bank
    assert bank.facets is not None and bank.facets.n_judges == 3
    resp = responses(root / "new_data", bank)
    cells = ("static_model", "static_item", "static_y", "static_n")
    only_arena = dataclasses.replace(resp, **{k: getattr(resp, k)[:0] for k in cells})
    pairs = arena_pairs(bank, only_arena)
    assert len(pairs) and len(np.unique(pairs.judge)) == 3
    grids = np.linspace(-3, 3, 7)[None, :] + np.zeros((resp.n_models, 1))
    rows = np.array([0, 5, bank.n_draws - 1])
    got = loglik(bank, only_arena, pairs, grids, rows)
    for i, d in enumerate(rows):
        want = _reference(bank, only_arena, pairs, grids, d)
        np.testing.assert_allclose(got[:, i], want, rtol=2e-5, atol=2e-3)


def test_new_models_are_scored_in_the_bank_order_of_the_truth(judged_bank):
    root, bank, truth, names = judged_bank
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = score(bank, [root / "new_data", root / "bank_data"], rescore=True)
    table = result.scores[result.scores["new"]]
    assert len(table) == len(names)  # every model, the bank's scored again
    true = pd.Series(truth["theta"])[table["model"]].to_numpy()
    rho = stats.spearmanr(table["theta_mean"], true)[0]
    assert rho > 0.8, rho


def test_a_judge_the_bank_does_not_have_is_refused_in_one_line(judged_bank, tmp_path):
    root, bank, *_ = judged_bank
    rows = pd.read_json(root / "new_data" / "arena" / "arena.jsonl", lines=True)
    rows.loc[rows.index[:3], "judge"] = "judge-x"
    folder = tmp_path / "arena"
    folder.mkdir()
    rows.to_json(folder / "new.jsonl", orient="records", lines=True)
    with pytest.raises(InputError, match="judge 'judge-x'") as err:
        responses(tmp_path, bank)
    assert "\n" not in str(err.value)
    rows = rows.drop(columns=["length"])
    rows.loc[:, "judge"] = bank.facets.judges[0]
    rows.to_json(folder / "new.jsonl", orient="records", lines=True)
    with pytest.raises(InputError, match="length"):
        responses(tmp_path, bank)


def test_an_adaptive_test_of_every_item_ends_where_the_score_does(judged_bank):
    """Asking every item reads each judge's reward of a prompt: the score's posterior."""
    from bayes_dualeval.measure.adaptive import adaptive
    from bayes_dualeval.measure.compress import compress
    from bayes_dualeval.measure.grid import posterior

    root, bank, *_ = judged_bank
    resp = responses(root / "new_data", bank)
    post = posterior(bank, resp)  # the score's exact grid posterior per draw
    mean = np.einsum("kdg,kg->kd", post.weights, post.grids).mean(axis=1)
    second = np.einsum("kdg,kg->kd", post.weights, post.grids**2).mean(axis=1)
    tested = adaptive(bank, resp, select="fisher", target_se=1e-6, max_items=1000)
    tested = tested.summary.set_index("model").loc[resp.models]
    assert (tested["n_items"] == 30 + 40).all()
    np.testing.assert_allclose(tested["theta_mean"], mean, atol=0.01)
    np.testing.assert_allclose(tested["theta_sd"], np.sqrt(second - mean**2), rtol=0.03)
    # a short form chooses prompts by the average judge's information
    assert len(compress(bank, 8)) == 8
