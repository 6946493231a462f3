r"""Calibrate new static questions on a frozen bank's scale, and check common ones for drift.

The dual of :func:`~bayes_dualeval.measure.score.score`: there the bank's items stay fixed
and new models are measured; here the bank's models stay fixed and new questions are
measured. :func:`calibrate` reads the bank models' static answers on questions
(:func:`~bayes_dualeval.measure.new_items.item_responses`) and, for every bank draw, each
question's posterior of ``(b, log a)`` under the bank's link given that draw's abilities
(:mod:`~bayes_dualeval.measure.item_grid`), mixed over the draws: the abilities are
integrated over the bank's posterior, not plugged in. Questions are *linked by the bank's
abilities* (``linked_by`` is ``bank-abilities``): the bank's models answered them, so
their parameters are on the bank's scale with no anchor items needed.

The item prior is the bank's own, draw by draw: ``b - mean ability ~ Normal(mu_b,
sigma_b)`` and ``log a ~ Normal(mu_log_a, sigma_log_a)`` with the hyperparameters of the
question's source (``prior`` ``source``), or, for a source the bank does not hold, the
spread of the bank's static sources about their mean, ``Normal(mean_g mu_b[g],
sqrt(mean_g sigma_b[g]^2 + var_g mu_b[g]))`` (``prior`` ``pooled``); with an independent
item prior, its fixed ``Normal(0, b_scale)`` and ``Normal(0, loga_scale)``
(``independent``).

Questions the bank holds (*common*) are calibrated the same way from the new answers
alone, with ``a`` held at the bank's draw (drift is of the difficulty, and with its slope
known a question's ``b`` is measured more precisely, most near the edge of the models'
abilities), and compared with the bank's estimate, draw by draw:
``shift = b_new - b_bank``. ``p_drift`` is the posterior probability that ``|shift|``
exceeds the drift threshold. The flag is multiplicity-honest: each common question gets
the posterior tail beyond the threshold on the far side of its mean shift
(:func:`~bayes_dualeval.measure.drift.drift_p_values`), a p-value of "moved by at most
``t``" under a flat prior on the shift, and Benjamini-Hochberg q-values over the common
questions (``q_drift``: valid for independent or positively dependent p-values; the
common questions share only the bank's abilities); ``flagged`` is ``q_drift`` at or below
the level ``fdr``, so at most that share of the flagged questions is expected not to have
drifted. The mean shift of the unflagged common questions is reported as a check of the
link: a change of harness that made every question harder would show there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.measure.bank import Bank, shift
from bayes_dualeval.measure.drift import drift_table, link_check
from bayes_dualeval.measure.item_grid import GRID_U, GRID_V, ItemPrior, item_posterior
from bayes_dualeval.measure.new_items import MIN_MODELS, ItemResponses, item_responses
from bayes_dualeval.posterior.summaries import interval

#: ``linked_by`` of a question calibrated on the bank models' abilities.
LINKED_BY = "bank-abilities"
#: Default drift threshold (logits of ``b``) and false discovery level of the flag.
DRIFT_THRESHOLD, DRIFT_FDR = 0.5, 0.1
#: Draws per bank draw of each question's parameters.
PER_DRAW = 4
#: Most grid evaluations (questions x grid points x models x bank draws) of one calibration.
EVALUATIONS = 2_000_000_000
#: Fewest bank draws a calibration uses (when the bank keeps that many).
MIN_DRAWS = 200

ITEM_COLUMNS = [
    "item", "source", "n_models", "observed", "b_mean", "b_sd", "b_lo", "b_hi", "a_mean",
    "a_lo", "a_hi", "prior", "linked_by",
]  # fmt: skip


@dataclass
class CalibrationResult:
    """What :func:`calibrate` computed, in memory.

    Attributes
    ----------
    bank : Bank
    responses : ItemResponses
    items : pandas.DataFrame
        :data:`ITEM_COLUMNS`, one row per new question.
    drift : pandas.DataFrame
        :data:`~bayes_dualeval.measure.drift.DRIFT_COLUMNS`, one row per common question,
        flagged first.
    b : numpy.ndarray, shape (J, S)
        Draws of every calibrated question's ``b`` (new then common, as ``responses``).
    summary : dict
        Counts and settings.
    warnings : list of str
    """

    bank: Bank
    responses: ItemResponses
    items: pd.DataFrame
    drift: pd.DataFrame
    b: np.ndarray
    summary: dict
    warnings: list = field(default_factory=list)


def calibrate(
    bank: Bank,
    data,
    *,
    ci: float = 0.9,
    drift_threshold: float = DRIFT_THRESHOLD,
    fdr: float = DRIFT_FDR,
    seed: int = 0,
) -> CalibrationResult:
    """Place the static questions of ``data`` on ``bank``'s scale (see the module).

    Parameters
    ----------
    bank : Bank
        From :meth:`Bank.from_run`.
    data : str, Path, list of them, or ItemResponses
        Evaluation files or folders with the bank models' answers (item ids as in a fit:
        the files' parent folders are their sources).
    ci : float
        Level of the equal-tailed intervals.
    drift_threshold : float
        A common question has drifted when its ``b`` moved by more than this (logits).
    fdr : float
        False discovery level of the drift flag.
    seed : int
        Seed of the parameter draws.

    Returns
    -------
    CalibrationResult

    Raises
    ------
    InputError
        When a setting is out of range, the bank has no static questions or has
        guessing floors or ceilings (3PL, 4PL), or the data cannot be used (see
        :func:`~bayes_dualeval.measure.new_items.item_responses`).
    """
    if not 0.0 < ci < 1.0:
        raise InputError(f"ci must be in (0, 1), got {ci}")
    if not drift_threshold > 0.0:
        raise InputError(f"{setting('drift_threshold')} must be positive, got {drift_threshold}")
    if not 0.0 < fdr < 1.0:
        raise InputError(f"{setting('fdr')} must be in (0, 1), got {fdr}")
    sites = bank.model.item_sites
    if "c" in sites or "d" in sites:
        raise InputError(
            f"bank {bank.run_dir} has guessing floors or ceilings (irt "
            f"{bank.model.config.irt!r}); calibration estimates b and a only: use a 1pl or "
            "2pl bank"
        )
    if "b" not in sites or not (bank.items["kind"] == "static").any():
        raise InputError(
            f"bank {bank.run_dir} holds no static questions, so it has no item prior for new "
            "ones: calibrate against a bank fitted with static answers"
        )
    resp = data if isinstance(data, ItemResponses) else item_responses(data, bank)
    bank = bank.thin(draws_affordable(bank, resp))
    prior, labels = item_prior(bank, resp.source)
    b, a = _draws(bank, resp, prior, seed)
    items = _item_table(resp, b, a, labels, ci)
    drift = drift_table(bank, resp, b, ci, drift_threshold, fdr)
    steady = drift.loc[~drift["flagged"], "item"] if len(drift) else []
    check = link_check(bank, resp, b, steady, ci)
    warns = _warnings(bank, resp, labels, drift, drift_threshold, fdr)
    summary = {
        "bank": str(bank.run_dir),
        "bank_model": bank.model.name,
        "bank_version": bank.version,
        "irt": bank.model.config.irt,
        "ci": ci,
        "seed": seed,
        "drift_threshold": drift_threshold,
        "fdr": fdr,
        "linked_by": LINKED_BY,
        "bank_draws": bank.n_draws,
        "item_draws": int(b.shape[1] * b.shape[2]),
        "grid_points": GRID_U * (GRID_V if a is not None else 1),
        "bank_models": int(len(bank.models)),
        "new_items": int(resp.new.sum()),
        "common_items": int((~resp.new).sum()),
        "flagged": int(drift["flagged"].sum()) if len(drift) else 0,
        "prior": dict(sorted(zip(resp.source.tolist(), labels.tolist(), strict=True))),
        **check,
        **{k: v for k, v in resp.counts.items() if k != "new_models"},
    }
    return CalibrationResult(
        bank=bank,
        responses=resp,
        items=items,
        drift=drift,
        b=b.reshape(len(b), -1),
        summary=summary,
        warnings=warns,
    )


def _draws(bank: Bank, resp: ItemResponses, prior: ItemPrior, seed: int):
    """Draws of ``b`` (J, D, R) of every question, and of ``a`` (None under the 1PL link).

    New questions get the posterior of ``(b, log a)``; common ones that of ``b`` with
    ``a`` held at the bank's draw (the drift compared is of ``b`` alone, and a question's
    ``b`` near the edge of the models' abilities is better measured with its ``a``
    known); their ``a`` draws are the bank's.
    """
    mean = shift(bank)  # (D,)
    centred = bank.draws["theta"] - mean[:, None]
    n_items, slope = len(resp.items), "a" in bank.model.item_sites
    u = np.zeros((n_items, bank.n_draws, PER_DRAW))
    log_a = np.zeros_like(u) if slope else None
    common = ~resp.new
    for part, fixed in ((resp.new, None), (common, slope)):
        if not part.any():
            continue
        pin = np.log(bank.draws["a"][:, resp.bank_item[part]]) if fixed else None
        post = item_posterior(
            centred, _subset(prior, part), resp.correct[part], resp.answers[part],
            per_draw=PER_DRAW, seed=seed + int(part is common), fixed_log_a=pin,
        )  # fmt: skip
        u[part] = post.u
        if slope:
            log_a[part] = post.log_a if pin is None else pin.T[:, :, None]
    b = u + mean[None, :, None]
    return b, None if log_a is None else np.exp(log_a)


def _subset(prior: ItemPrior, part: np.ndarray) -> ItemPrior:
    """The prior of the questions ``part`` (a boolean mask)."""
    return ItemPrior(*(None if x is None else x[:, part] for x in dataclasses.astuple(prior)))


def draws_affordable(bank: Bank, resp: ItemResponses) -> int:
    """Bank draws a calibration can afford: at most :data:`EVALUATIONS` grid evaluations.

    Never fewer than :data:`MIN_DRAWS` (nor more than the bank keeps).
    """
    width = max(resp.answers.size, 1) * GRID_U * GRID_V
    return int(min(bank.n_draws, max(MIN_DRAWS, EVALUATIONS // width)))


def item_prior(bank: Bank, source: np.ndarray) -> tuple[ItemPrior, np.ndarray]:
    """The item prior of questions of ``source`` at every bank draw, and its kind per question.

    Returns
    -------
    ItemPrior
        Arrays of shape (D, J) (see the module for the three kinds).
    numpy.ndarray of str
        ``source``, ``pooled`` or ``independent`` per question.
    """
    config, draws = bank.model.config, bank.draws
    slope = "a" in bank.model.item_sites
    n_draws, n_items = bank.n_draws, len(source)
    if config.item_prior != "hierarchical" or draws.get("mu_b") is None:
        full = np.ones((n_draws, n_items))
        prior = ItemPrior(
            0.0 * full, config.b_scale * full,
            0.0 * full if slope else None, config.loga_scale * full if slope else None,
        )  # fmt: skip
        return prior, np.full(n_items, "independent")
    groups = pd.Index(np.asarray(bank.dataset.groups, dtype=str))
    static = np.flatnonzero(groups.str.startswith("static:"))
    where = groups.get_indexer(np.char.add("static:", np.asarray(source, dtype=str)))
    own = where >= 0

    def per_item(loc: str, scale: str):
        mu, sigma = np.asarray(draws[loc], np.float64), np.asarray(draws[scale], np.float64)
        pooled_mu = mu[:, static].mean(axis=1)
        pooled_sd = np.sqrt((sigma[:, static] ** 2).mean(axis=1) + mu[:, static].var(axis=1))
        index = np.where(own, where, 0)
        return (
            np.where(own[None, :], mu[:, index], pooled_mu[:, None]),
            np.where(own[None, :], sigma[:, index], pooled_sd[:, None]),
        )

    mu_b, sigma_b = per_item("mu_b", "sigma_b")
    mu_la, sigma_la = per_item("mu_log_a", "sigma_log_a") if slope else (None, None)
    return ItemPrior(mu_b, sigma_b, mu_la, sigma_la), np.where(own, "source", "pooled")


def _item_table(resp: ItemResponses, b, a, labels, ci) -> pd.DataFrame:
    new = resp.new
    b_new = b[new].reshape(int(new.sum()), -1).T  # (S, J_new)
    lo, hi = interval(b_new, ci)
    table = pd.DataFrame(
        {
            "item": resp.items[new],
            "source": resp.source[new],
            "n_models": resp.n_models[new],
            "observed": resp.correct[new].sum(axis=1) / resp.answers[new].sum(axis=1),
            "b_mean": b_new.mean(axis=0),
            "b_sd": b_new.std(axis=0, ddof=1),
            "b_lo": lo,
            "b_hi": hi,
        }
    )
    if a is not None:
        a_new = a[new].reshape(int(new.sum()), -1).T
        a_lo, a_hi = interval(a_new, ci)
        table = table.assign(a_mean=a_new.mean(axis=0), a_lo=a_lo, a_hi=a_hi)
    else:  # the 1PL link: every a is 1
        table = table.assign(a_mean=1.0, a_lo=1.0, a_hi=1.0)
    return table.assign(prior=labels[new], linked_by=LINKED_BY)[ITEM_COLUMNS]


def _warnings(bank, resp, labels, drift, threshold, fdr) -> list[str]:
    counts, warns = resp.counts, []
    if counts["new_model_rows"]:
        models = counts["new_models"]
        warns.append(
            f"{counts['new_model_rows']} rows of {len(models)} model(s) not in the bank were "
            f"left out ({', '.join(models[:5])}{', ...' if len(models) > 5 else ''}): "
            "calibration reads the bank models' abilities only"
        )
    if counts["arena_rows"]:
        warns.append(f"{counts['arena_rows']} arena rows were left out (static questions only)")
    if counts["few_models_items"]:
        warns.append(
            f"{counts['few_models_items']} question(s) answered by fewer than {MIN_MODELS} "
            f"bank models were skipped ({counts['few_models_rows']} rows)"
        )
    pooled = sorted(set(resp.source[labels == "pooled"].tolist()))
    if pooled:
        warns.append(
            f"source(s) new to the bank ({', '.join(pooled)}): their questions' prior is "
            "the spread of the bank's sources, not their own"
        )
    if bank.draws.get("tau_beta_b") is not None:
        warns.append(
            "the bank's items have features; the new questions' prior leaves out the part "
            "the features explain"
        )
    flagged = drift[drift["flagged"]] if len(drift) else drift
    if len(flagged):
        names = flagged["item"].tolist()
        warns.append(
            f"{len(names)} common question(s) drifted by more than {threshold:g} logits "
            f"(false discovery level {fdr:g}): {', '.join(names[:5])}"
            + (", ..." if len(names) > 5 else "")
        )
    return warns
