r"""Score new models against a frozen bank: abilities, ranks, predicted accuracy, person fit.

:func:`score` places every model of new evaluation files on the bank's leaderboard scale
(abilities centred on the bank models' mean in every draw), with the ability posterior of
:mod:`~bayes_dualeval.measure.grid` (integrated over the bank's draws of the item
parameters). Ranks are taken per draw among the bank models and every new model together.

Predicted accuracy (tinyBenchmarks' deliverable): for every new model and benchmark of the
bank, the accuracy it would have on *all* the bank's questions of that benchmark, the
answered ones counted as answered and the others predicted,
:math:`(\sum_{q \in A} y_q + \sum_{q \notin A} p_q(\theta)) / n`, over the posterior of
:math:`\theta` and the item draws; with every question answered it is the observed
accuracy, exactly.

Person fit: ``fit_p`` of :mod:`~bayes_dualeval.measure.person_fit`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.measure import deviation
from bayes_dualeval.measure.bank import Bank, shift
from bayes_dualeval.measure.grid import GRID, arena_pairs, posterior
from bayes_dualeval.measure.person_fit import person_fit
from bayes_dualeval.measure.responses import Responses, responses
from bayes_dualeval.model import links
from bayes_dualeval.posterior.summaries import interval, ranks

#: Ability draws per bank draw for a new model's summaries.
PER_DRAW = 4
#: Most grid evaluations (labels and pairs x grid points x bank draws) of one score.
EVALUATIONS = 400_000_000
#: Fewest bank draws a score uses (when the bank keeps that many).
MIN_DRAWS = 200
#: ``fit_p`` below this names the model in a warning.
MISFIT_P = 0.05

SCORE_COLUMNS = [
    "model", "theta_mean", "theta_sd", "theta_lo", "theta_hi", "rank_mean", "rank_lo",
    "rank_hi", "new", "n_static", "n_arena", "fit_p",
]  # fmt: skip
ACCURACY_COLUMNS = [
    "model", "dataset", "n_bank_items", "n_answered", "observed_accuracy",
    "predicted_accuracy", "predicted_lo", "predicted_hi",
]  # fmt: skip


@dataclass
class ScoreResult:
    """What :func:`score` computed, in memory.

    Attributes
    ----------
    bank : Bank
    responses : Responses
    scores : pandas.DataFrame
        :data:`SCORE_COLUMNS`, one row per model (bank and new), best first.
    accuracy : pandas.DataFrame
        :data:`ACCURACY_COLUMNS`, per new model and bank benchmark, and ``all``.
    theta : numpy.ndarray, shape (K, D * PER_DRAW)
        The new models' ability draws on the leaderboard's scale.
    summary : dict
        Counts and settings (``ci``, ``seed``, draws, pairs, skipped rows).
    warnings : list of str
        What a reader must know (misfitting models, models without static labels).
    """

    bank: Bank
    responses: Responses
    scores: pd.DataFrame
    accuracy: pd.DataFrame
    theta: np.ndarray
    summary: dict
    warnings: list = field(default_factory=list)


def score(
    bank: Bank, data, *, ci: float = 0.9, seed: int = 0, rescore: bool = False, items=None
) -> ScoreResult:
    """Measure the models of ``data`` against ``bank``.

    Parameters
    ----------
    bank : Bank
        From :meth:`Bank.from_run`.
    data : str, Path, list of them, or Responses
        Evaluation files or folders of the new models (item ids as in a fit: the files'
        parent folders are their sources), or responses already aligned.
    ci : float
        Level of the equal-tailed intervals.
    seed : int
        Seed of the ability draws.
    rescore : bool
        Allow models already in the bank (scored again, as new).
    items : iterable of str, optional
        Use only the responses on these bank items (a short form); the predicted
        accuracy is still over all the bank's questions.

    Returns
    -------
    ScoreResult

    Raises
    ------
    InputError
        When ``ci`` is not in (0, 1), or the data cannot be aligned with the bank (see
        :func:`~bayes_dualeval.measure.responses.responses`).
    """
    if not 0.0 < ci < 1.0:
        raise InputError(f"ci must be in (0, 1), got {ci}")
    if isinstance(data, Responses):
        resp = data
    else:
        resp = responses(data, bank, rescore=rescore, items=items)
    pairs = arena_pairs(bank, resp)
    bank = bank.thin(draws_affordable(bank, resp, pairs))
    post = posterior(bank, resp, pairs)
    rng = np.random.default_rng(seed)
    centred = post.sample(rng, PER_DRAW)  # (K, D, R), on the leaderboard's scale
    raw = centred[:, :, 0] + shift(bank)[None, :]
    fit_p = person_fit(bank, resp, post, centred.reshape(resp.n_models, -1))
    scores = _score_table(bank, resp, centred, fit_p, pairs, ci)
    tau = deviation.spread(bank)
    accuracy = accuracy_table(bank, resp, raw, ci, rng, tau=tau)
    warns = []
    bad = [m for m, p in zip(resp.models, fit_p, strict=True) if np.isfinite(p) and p < MISFIT_P]
    if bad:
        warns.append(
            f"{len(bad)} model(s) misfit the bank (fit_p < {MISFIT_P:g}): "
            + ", ".join(bad)
            + "; their responses are less likely than the bank predicts for their ability "
            "(a changed harness, prompt format or grader, or contamination)"
        )
    no_static = [m for k, m in enumerate(resp.models) if not (resp.static_model == k).any()]
    if no_static and (bank.items["kind"] == "static").any():
        warns.append(f"no static labels, so no predicted accuracy: {', '.join(no_static)}")
    summary = {
        "bank": str(bank.run_dir),
        "bank_model": bank.model.name,
        "ci": ci,
        "seed": seed,
        "bank_draws": bank.n_draws,
        "theta_draws": int(centred.shape[1] * centred.shape[2]),
        "new_models": int(resp.n_models),
        "static_labels": int(resp.static_n.sum()),
        "arena_rewards": int(len(resp.arena_z)),
        "arena_pairs": int(len(pairs)),
        "skipped_rows": int(resp.n_skipped),
        "grid_points": int(post.grids.shape[1]),
        "benchmark_deviation_sd": round(tau, 4),
    }
    return ScoreResult(
        bank=bank,
        responses=resp,
        scores=scores,
        accuracy=accuracy,
        theta=centred.reshape(resp.n_models, -1),
        summary=summary,
        warnings=warns,
    )


def draws_affordable(bank: Bank, resp: Responses, pairs) -> int:
    """Bank draws a score can afford: at most :data:`EVALUATIONS` grid evaluations.

    Never fewer than :data:`MIN_DRAWS` (nor more than the bank keeps): large arena data
    (tens of new models, each paired with every bank model on every prompt) score on
    fewer, evenly spaced draws, which widens the Monte Carlo error of the intervals only.
    """
    width = max(len(resp.static_y) + len(pairs), 1) * GRID
    return int(min(bank.n_draws, max(MIN_DRAWS, EVALUATIONS // width)))


def _score_table(bank, resp, centred, fit_p, pairs, ci) -> pd.DataFrame:
    bank_theta = bank.draws["theta_centred"]  # (D, M)
    both = np.concatenate([bank_theta, centred[:, :, 0].T], axis=1)
    r = ranks(both).astype(float)
    rlo, rhi = interval(r, ci)
    new_theta = centred.reshape(resp.n_models, -1).T
    lo_b, hi_b = interval(bank_theta, ci)
    lo_n, hi_n = interval(new_theta, ci)
    ds = bank.dataset
    m, k = ds.n_models, resp.n_models
    table = pd.DataFrame(
        {
            "model": np.r_[ds.models, resp.models],
            "theta_mean": np.r_[bank_theta.mean(axis=0), new_theta.mean(axis=0)],
            "theta_sd": np.r_[bank_theta.std(axis=0, ddof=1), new_theta.std(axis=0, ddof=1)],
            "theta_lo": np.r_[lo_b, lo_n],
            "theta_hi": np.r_[hi_b, hi_n],
            "rank_mean": r.mean(axis=0),
            "rank_lo": rlo,
            "rank_hi": rhi,
            "new": np.r_[np.zeros(m, bool), np.ones(k, bool)],
            "n_static": _counts(
                ds.static_model, m, resp.static_model, k, ds.static_n, resp.static_n
            ),
            "n_arena": _counts(ds.arena_model, m, resp.arena_model, k),
            "fit_p": np.r_[np.full(m, np.nan), fit_p],
        }
    )
    return table.sort_values("theta_mean", ascending=False, kind="stable").reset_index(drop=True)


def _counts(bank_rows, m, new_rows, k, bank_n=None, new_n=None) -> np.ndarray:
    """Rows (answers, with ``bank_n`` and ``new_n`` per row) per bank and new model."""
    bank = np.bincount(bank_rows, weights=bank_n, minlength=m)
    new = np.bincount(new_rows, weights=new_n, minlength=k)
    return np.r_[bank, new].astype(np.int64)


def accuracy_table(
    bank: Bank, resp: Responses, theta: np.ndarray, ci: float, rng=None, *, tau=None
) -> pd.DataFrame:
    """Predicted accuracy on all the bank's questions of each benchmark (see the module).

    Parameters
    ----------
    bank : Bank
    resp : Responses
    theta : numpy.ndarray, shape (K, D)
        One raw ability draw per new model and bank draw.
    ci : float
    rng : numpy.random.Generator, optional
        Draws the replicated answers of the unanswered questions and the deviations.
    tau : float, optional
        The model x benchmark deviation sd; None estimates it from the bank
        (:func:`~bayes_dualeval.measure.deviation.spread`), 0 leaves deviations out.

    Notes
    -----
    ``predicted_accuracy`` is the expected accuracy (success probabilities averaged);
    its interval is that of the accuracy the model would *obtain*: per draw, the
    unanswered questions' answers are replicated (Bernoulli with the draw's
    probabilities), so the interval holds the binomial noise of those questions as well
    as the uncertainty of the ability and the items. Without the noise, 40-question short
    forms of the bundled example covered the full accuracy of 6 of 12 models at 90%.

    Where the bank has several benchmarks, each benchmark's questions are answered at
    ability ``theta + delta`` with the model's own deviation on that benchmark
    (:mod:`~bayes_dualeval.measure.deviation`): per draw, ``delta`` is drawn from its
    posterior given the benchmark's answered questions, or from ``Normal(0, tau^2)``
    where none was answered. The ``all`` row sums the benchmarks' replicated answers,
    each with its own deviation.

    The obtained accuracy of ``n`` questions is a lattice (steps of ``1 / n``), and an
    equal-tailed interval of a discrete quantity keeps its end atoms whole, so it holds
    more than its nominal mass (a 50% interval of replicated accuracies covered the true
    accuracy of simulated held-out models 0.57 of the time, docs/validation.md section
    14). Each replicate is therefore spread evenly over its lattice cell (plus a uniform
    draw in ``[-1/2n, 1/2n]``, clipped to ``[0, 1]``): a continuity correction, after which
    the interval's ends are not lattice values.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    items = bank.items
    static = np.flatnonzero(items["kind"].to_numpy() == "static")
    if len(static) == 0:
        return pd.DataFrame(columns=ACCURACY_COLUMNS)
    bench = items["dataset"].to_numpy()[static]
    benchmarks = sorted(set(bench))
    names = [*benchmarks, "all"]
    member = {name: bench == name for name in benchmarks}
    member["all"] = np.ones(len(static), bool)
    tau = deviation.spread(bank) if tau is None else float(tau)
    if len(benchmarks) < 2:
        tau = 0.0  # one benchmark: its deviation is the ability itself
    position = np.full(bank.dataset.n_items, -1)
    position[static] = np.arange(len(static))
    par = bank.parameters(items=static)
    rows = []
    for k, model in enumerate(resp.models):
        mine = resp.static_model == k
        if not mine.any():
            continue
        q = position[resp.static_item[mine]]
        answered = np.zeros(len(static), bool)
        y = np.zeros(len(static))
        answered[q] = True
        y[q] = resp.static_share[mine]  # repeated: the share
        ability = np.broadcast_to(theta[k][:, None], (len(theta[k]), len(static))).copy()
        if tau > 0:
            correct, count = resp.static_y[mine], resp.static_n[mine]
            for name in benchmarks:
                cells = member[name][q]
                asked = {key: None if v is None else v[:, q[cells]] for key, v in par.items()}
                delta = deviation.draw(theta[k], asked, correct[cells], count[cells], tau, rng)
                ability[:, member[name]] += delta[:, None]
        p = links.probability(links.eta(ability, par["b"], par["a"]), par["c"], par["d"])
        value = np.where(answered[None, :], y[None, :], p)
        replicate = np.where(answered[None, :], y[None, :], rng.random(p.shape) < p)
        for name in names:
            inside = member[name]
            n, n_ans = int(inside.sum()), int((answered & inside).sum())
            if n_ans == 0:
                continue
            draws = value[:, inside].mean(axis=1)
            obtained = replicate[:, inside].mean(axis=1)
            if n_ans < n:  # spread over its lattice cell: see the notes
                obtained = np.clip(obtained + (rng.random(len(obtained)) - 0.5) / n, 0.0, 1.0)
            lo, hi = interval(obtained[:, None], ci)
            rows.append(
                (model, name, n, n_ans, float(y[answered & inside].mean()),
                 float(draws.mean()), float(lo[0]), float(hi[0]))
            )  # fmt: skip
    return pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
