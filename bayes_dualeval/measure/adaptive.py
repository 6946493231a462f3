r"""Computerised adaptive testing against a bank, simulated with known answers.

Each new model of an *oracle* (:class:`~bayes_dualeval.measure.responses.Responses` whose
labels and rewards are taken as the model's answers) is asked the bank's static questions
and arena prompts, in one pool, one at a time. Its ability posterior is kept on a fixed
grid of abilities :math:`u` on the leaderboard's scale (relative to the bank models' mean
:math:`\bar\theta_d` in draw :math:`d`), one posterior per bank draw (the item parameters
:math:`\phi_d`), as in :mod:`~bayes_dualeval.measure.grid`:

.. math::

    \log w_{d g} \leftarrow \log w_{d g} + \ell_q(u_g + \bar\theta_d \mid \phi_d),
    \qquad w_{d g} \propto e^{-(u_g + \bar\theta_d)^2 / 2 s^2} \text{ at the start},

where :math:`\ell_q` is the log likelihood of the model's answer to item :math:`q`: its
label on a static question, or on an arena prompt its pairs with the bank models on the
same prompt (or its reward), exactly the terms of a score. The reported posterior is the
equal-weight mixture over the draws of each draw's normalised posterior. The bank is
frozen: answers move the new model's ability only. The grid spans :data:`HALF_WIDTH` prior
sds on each side, so a model that answers everything right (or wrong) keeps the
prior-bounded posterior that its answers and the prior give, not a runaway estimate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.measure import grid as grid_posterior
from bayes_dualeval.measure import information, kernels
from bayes_dualeval.measure.bank import Bank, shift
from bayes_dualeval.measure.responses import Responses
from bayes_dualeval.model import links

#: Points of the fixed ability grid, and its half-width in prior sds.
GRID, HALF_WIDTH = 241, 6.0
#: Bank draws the ``kl`` criterion and the arena prompts' information average over.
SELECT_DRAWS = 100
#: Largest number of floats in one chunk of (draws x candidates x grid points).
CHUNK = 4_000_000
#: Item selection rules.
SELECTORS = ("fisher", "kl", "random")
#: Level of the reported equal-tailed interval.
LEVEL = 0.95
#: Columns of :attr:`AdaptiveResult.summary` and :attr:`AdaptiveResult.trace`.
SUMMARY_COLUMNS = ("model", "n_items", "theta_mean", "theta_sd", "theta_lo", "theta_hi",
                   "stopped_by")  # fmt: skip
TRACE_COLUMNS = ("model", "step", "item", "kind", "response", "theta_mean", "theta_sd")


@dataclass(frozen=True)
class AdaptiveResult:
    """The outcome of an adaptive test of every oracle model.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per model: ``model, n_items`` (questions and prompts asked),
        ``theta_mean, theta_sd`` and the 95% equal-tailed ``theta_lo, theta_hi`` of the
        final posterior on the leaderboard's scale, and ``stopped_by`` (``se``: the sd fell
        below the target; ``max_items``; ``pool``: the model had answered nothing further).
    trace : pandas.DataFrame
        One row per item asked: ``model, step`` (from 1), ``item`` (bank id), ``kind``
        (``static`` or ``arena``), ``response`` (the label, or the reward normalised with
        the bank's normalisation) and the posterior ``theta_mean, theta_sd`` after the
        answer.
    """

    summary: pd.DataFrame
    trace: pd.DataFrame


class _Posterior:
    """One model's grid posterior per bank draw, on the fixed leaderboard-scale grid."""

    def __init__(self, bank: Bank, grid: np.ndarray):
        self.bank, self.grid = bank, grid
        self.shift = shift(bank)  # (D,) the leaderboard's zero in each draw
        self.raw_grid = grid[None] + self.shift[:, None]  # (D, G) raw abilities
        self.log_w = grid_posterior.log_prior(bank, grid[None], slice(None))[0]  # (D, G)

    def weights(self) -> np.ndarray:
        w = np.exp(self.log_w - self.log_w.max(axis=1, keepdims=True))
        return w / w.sum(axis=1, keepdims=True)

    def raw(self, w: np.ndarray) -> np.ndarray:
        """Each draw's posterior mean of the raw ability, (D,)."""
        return w @ self.grid + self.shift

    def update_static(self, item: int, y: float, n: float = 1.0, grader=None) -> None:
        """Add an item's answers: share ``y`` correct of ``n`` (one label: ``y``, 1).

        ``grader`` is the bank grader of the labels (None: the bank has one).
        """
        par = self.bank.parameters(slice(None), item, grader)  # (D,) each
        self.log_w += n * links.bernoulli_loglik(y, *_eta_cd(par, self.raw_grid))

    def update(self, loglik: np.ndarray) -> None:
        self.log_w += loglik

    def moments(self, w: np.ndarray) -> tuple[float, float]:
        """Mixture mean and sd on the leaderboard scale."""
        mean = float((w @ self.grid).mean())
        second = float((w @ self.grid**2).mean())
        return mean, float(np.sqrt(max(second - mean**2, 0.0)))

    def interval(self, w: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
        """Equal-tailed interval of the mixture (leaderboard scale), on grid points."""
        cdf = np.cumsum(w.mean(axis=0))
        tails = np.array([(1 - level) / 2, (1 + level) / 2])
        index = np.minimum(np.searchsorted(cdf, tails), len(self.grid) - 1)
        lo, hi = self.grid[index]
        return float(lo), float(hi)


class _Prompts:
    """The oracle's arena answers, each prompt's log likelihood computed when it is asked.

    Every (model, prompt) reward of the oracle is its own pseudo-model of one
    :class:`~bayes_dualeval.measure.kernels.Layout`, built once, so asking a prompt
    evaluates one row of it (one compiled program for every prompt of every model).
    """

    def __init__(self, bank: Bank, oracle: Responses):
        self.bank = bank
        n = len(oracle.arena_item)
        empty = np.zeros(0, dtype=np.int64)
        facets = oracle.facets
        if facets is not None:  # each reward its own pseudo-model, of its model's family
            facets = dataclasses.replace(facets, family=facets.family[oracle.arena_model])
        self.resp = dataclasses.replace(
            oracle, models=np.arange(n).astype(str), static_model=empty, static_item=empty,
            static_y=np.zeros(0), static_n=np.zeros(0), arena_model=np.arange(n),
            facets=facets, static_grader=None,
        )  # fmt: skip
        # under the reward likelihood the layout holds no pairs: grid.loglik adds the rewards
        pairs = grid_posterior.arena_pairs(bank, self.resp)
        self.lay = kernels.layout(bank, self.resp, pairs) if n else None

    def loglik(self, row: int, grid: np.ndarray) -> np.ndarray:
        """The log likelihood (D, G) of reward ``row`` of the oracle on ``grid``."""
        one = slice(row, row + 1)
        resp = dataclasses.replace(
            self.resp, models=self.resp.models[one], arena_model=np.zeros(1, dtype=np.int64),
            arena_item=self.resp.arena_item[one], arena_z=self.resp.arena_z[one],
        )  # fmt: skip
        lay = kernels.take_models(self.lay, [row])
        rows = np.arange(self.bank.n_draws)
        return grid_posterior.loglik(self.bank, resp, None, grid[None], rows, lay)[0]


def _eta_cd(par: dict, theta):
    """``(eta, c, d)`` of items with parameters ``par`` (D, C) at ``theta`` (.., G)."""
    col = lambda x: None if x is None else x[..., None]  # noqa: E731
    return links.eta(theta, par["b"][..., None], col(par["a"])), col(par["c"]), col(par["d"])


@dataclass
class _Pool:
    """The items a model can still be asked: bank index, arena flag and answer."""

    item: np.ndarray
    arena: np.ndarray
    answer: np.ndarray  # the oracle's static cell (its answers) or arena row

    def __len__(self) -> int:
        return len(self.item)

    def pop(self, pick: int) -> tuple[int, bool, float]:
        out = int(self.item[pick]), bool(self.arena[pick]), float(self.answer[pick])
        keep = np.arange(len(self)) != pick
        self.item, self.arena, self.answer = self.item[keep], self.arena[keep], self.answer[keep]
        return out


def _pool(oracle: Responses, k: int) -> _Pool:
    """Model ``k``'s answered items, static then arena, each item once.

    An item's answer is its first cell; asking it reads every cell of the model on it
    (its graders' labels, or its judges' rewards).
    """
    mine = np.nonzero(oracle.static_model == k)[0]
    s_item, first = np.unique(oracle.static_item[mine], return_index=True)
    s_answer = mine[first]
    rows = np.nonzero(oracle.arena_model == k)[0]
    a_item, first = np.unique(oracle.arena_item[rows], return_index=True)
    return _Pool(
        item=np.r_[s_item, a_item].astype(np.int64),
        arena=np.r_[np.zeros(len(s_item), bool), np.ones(len(a_item), bool)],
        answer=np.r_[s_answer, rows[first]].astype(np.float64),
    )


class _Criteria:
    """The selection rules' scores of the candidates in a pool."""

    def __init__(self, bank: Bank):
        self.bank = bank
        self.rows = evenly_spaced(bank.n_draws, SELECT_DRAWS)
        self.prompts = information.prompts(bank) if len(bank.dataset.arena_item) else None

    def fisher(self, post: _Posterior, w: np.ndarray, pool: _Pool) -> np.ndarray:
        """Information at each draw's posterior mean, averaged over draws: (C,)."""
        out = np.empty(len(pool))
        static = ~pool.arena
        if static.any():
            par = self.bank.parameters(slice(None), pool.item[static])
            theta = post.raw(w)[:, None]  # (D, 1)
            info = information.fisher_information(theta, par["b"], par["a"], par["c"], par["d"])
            out[static] = info.mean(axis=0)
        if pool.arena.any():
            out[pool.arena] = self._arena(post.raw(w)[self.rows], pool.item[pool.arena])
        return out

    def _arena(self, theta: np.ndarray, items: np.ndarray) -> np.ndarray:
        info = np.zeros(len(items))
        step = max(1, CHUNK // max(len(self.rows) * self.prompts.mask.shape[1], 1))
        for start in range(0, len(items), step):  # chunks of candidates, to bound memory
            part = items[start : start + step]
            value = information.arena_information(self.bank, self.prompts, theta, part, self.rows)
            info[start : start + step] = value.mean(axis=0)
        return info

    def variance_reduction(self, post: _Posterior, w: np.ndarray, pool: _Pool) -> np.ndarray:
        """Prior-to-expected-posterior drop of the mixture variance, per candidate: (C,).

        Exact preposterior analysis for static questions; for an arena prompt, whose
        answer is a reward rather than a label, the normal approximation
        ``v - 1 / (1 / v + I)`` with ``I`` its information (:meth:`fisher`).
        """
        out = np.empty(len(pool))
        static = ~pool.arena
        if static.any():
            out[static] = self._preposterior(post, w, pool.item[static])
        if pool.arena.any():
            var = post.moments(w)[1] ** 2
            info = self._arena(post.raw(w)[self.rows], pool.item[pool.arena])
            out[pool.arena] = var - 1.0 / (1.0 / max(var, 1e-12) + info)
        return out

    def _preposterior(self, post: _Posterior, w: np.ndarray, items: np.ndarray) -> np.ndarray:
        rows, grid = self.rows, post.grid
        w, shift_d = w[rows], post.shift[rows]
        n_d = len(rows)
        _, var_now = _mixture_moments(w.sum(axis=1), w @ grid, w @ grid**2, n_d)
        moments = np.stack([w, w * grid, w * grid**2], axis=2)  # (D', G, 3)
        out = np.empty(len(items))
        raw = grid[None, None, :] + shift_d[:, None, None]
        step = max(1, CHUNK // max(n_d * len(grid), 1))
        for start in range(0, len(items), step):  # chunks of candidates, to bound memory
            part = items[start : start + step]
            eta, c, d = _eta_cd(self.bank.parameters(rows, part), raw)
            p1 = links.probability(eta, c, d)  # (D', C, G)
            expected = np.zeros(len(part))
            for p_y in (p1, 1.0 - p1):
                sums = p_y @ moments  # (D', C, 3): batched over draws
                mass = sums[..., 0]
                prob, var = _mixture_moments(mass, sums[..., 1] / mass, sums[..., 2] / mass, n_d)
                expected += prob * var
            out[start : start + step] = var_now - expected
        return out


def _mixture_moments(mass, mean_d, second_d, n_d):
    """Predictive probability and variance of an equal-weight mixture over draws."""
    prob = np.sum(mass, axis=0) / n_d
    # each draw's posterior is normalised separately (the mixture weights stay 1/D)
    mean = np.sum(mean_d, axis=0) / n_d
    return prob, np.sum(second_d, axis=0) / n_d - mean**2


def _check(select: str, target_se: float, max_items: int, exposure: int) -> None:
    if select not in SELECTORS:
        raise InputError(f"unknown select {select!r}; one of {', '.join(SELECTORS)}")
    if not target_se > 0:
        raise InputError(f"target_se must be positive, got {target_se}")
    if max_items < 1:
        raise InputError(f"max_items must be at least 1, got {max_items}")
    if exposure < 1:
        raise InputError(f"exposure must be at least 1, got {exposure}")


def adaptive(
    bank: Bank,
    oracle: Responses,
    *,
    select: str = "fisher",
    target_se: float = 0.3,
    max_items: int = 50,
    exposure: int = 1,
    seed: int = 0,
    ci: float = LEVEL,
) -> AdaptiveResult:
    """Simulate an adaptive test of each oracle model on the bank's questions and prompts.

    Parameters
    ----------
    bank : Bank
    oracle : Responses
        New models' static labels and arena rewards on bank items: a model can be asked
        the questions and prompts it answered, and its label or reward is its answer.
    select : {"fisher", "kl", "random"}
        Next item: ``fisher``, the largest Fisher information at the current posterior
        mean (per bank draw, averaged over the draws; an arena prompt's is the expected
        information of its pairs, :mod:`~bayes_dualeval.measure.information`); ``kl``,
        the largest expected reduction of the posterior variance (preposterior analysis:
        the mixture's variance now minus its expected variance after the answer, the
        answer drawn from the posterior predictive; the normal approximation for arena
        prompts), averaged over :data:`SELECT_DRAWS` evenly spaced bank draws;
        ``random``, uniformly among the unasked items.
    target_se : float
        Stop when the posterior sd (leaderboard scale) falls below this.
    max_items : int
        Stop after this many items.
    exposure : int
        Randomesque exposure control: the next item is drawn uniformly among the
        ``exposure`` best by the criterion (1: always the best; no effect with
        ``random``).
    seed : int
        Seed of the generator behind random choices.
    ci : float
        Level of the reported equal-tailed interval (``theta_lo``, ``theta_hi``).

    Returns
    -------
    AdaptiveResult

    Raises
    ------
    InputError
        When ``select`` is unknown, ``target_se`` is not positive, ``max_items`` or
        ``exposure`` is below 1, or ``ci`` is not in (0, 1).

    Notes
    -----
    An arena prompt counts as one item, whatever the number of bank models it is compared
    with. The ``kl`` option is named for the information-gain family; what it computes is
    the expected variance reduction, which targets the stopping rule (posterior sd)
    directly. The stopping rule is checked before every item, so a target above the prior
    sd asks nothing. The interval's ends are grid points (a resolution of ``2 *
    HALF_WIDTH / (GRID - 1)`` prior sds). The ``kl`` criterion costs about ``SELECT_DRAWS *
    GRID`` operations per static candidate and item asked, ``fisher`` about ``D``; an
    arena candidate about ``SELECT_DRAWS`` times its bank models.
    """
    _check(select, target_se, max_items, exposure)
    if not 0.0 < ci < 1.0:
        raise InputError(f"ci must be in (0, 1), got {ci}")
    rng = np.random.default_rng(seed)
    scale = bank.model.config.theta_scale
    grid = np.linspace(-HALF_WIDTH * scale, HALF_WIDTH * scale, GRID)
    ids = bank.items["item"].to_numpy(dtype=str)
    criteria = _Criteria(bank) if select != "random" else None
    prompts = _Prompts(bank, oracle)
    summary, trace = [], []
    for k, name in enumerate(oracle.models):  # one model at a time
        pool = _pool(oracle, k)
        post = _Posterior(bank, grid)
        w = post.weights()
        steps = 0
        while True:
            mean, sd = post.moments(w)
            if sd < target_se:
                stopped = "se"
            elif steps >= max_items:
                stopped = "max_items"
            elif len(pool) == 0:
                stopped = "pool"
            else:
                stopped = None
            if stopped:
                break
            item, arena, answer = pool.pop(_choose(select, criteria, post, w, pool, exposure, rng))
            if arena:  # the prompt's rewards, one per judge that scored it
                cells = np.flatnonzero((oracle.arena_model == k) & (oracle.arena_item == item))
                for row in cells:
                    post.update(prompts.loglik(int(row), grid))
                answer = float(oracle.arena_z[cells].mean())
            else:  # the item's answers (k of n, repeated samples), by each of its graders
                cells = np.flatnonzero((oracle.static_model == k) & (oracle.static_item == item))
                for row in cells:
                    grader = None if oracle.static_grader is None else oracle.static_grader[row]
                    share, n = float(oracle.static_share[row]), float(oracle.static_n[row])
                    post.update_static(item, share, n, grader)
                y, n = oracle.static_y[cells], oracle.static_n[cells]
                answer = float(y.sum() / max(n.sum(), 1.0))
            w = post.weights()
            steps += 1
            mean, sd = post.moments(w)
            trace.append((name, steps, ids[item], "arena" if arena else "static", answer,
                          mean, sd))  # fmt: skip
        lo, hi = post.interval(w, ci)
        summary.append((name, steps, mean, sd, lo, hi, stopped))
    return AdaptiveResult(
        summary=pd.DataFrame(summary, columns=list(SUMMARY_COLUMNS)),
        trace=pd.DataFrame(trace, columns=list(TRACE_COLUMNS)),
    )


def _choose(select, criteria, post, w, pool, exposure, rng) -> int:
    """Position in ``pool`` of the next item."""
    if select == "random":
        return int(rng.integers(len(pool)))
    rule = criteria.fisher if select == "fisher" else criteria.variance_reduction
    score = rule(post, w, pool)
    best = np.argsort(-score, kind="stable")[: min(exposure, len(pool))]
    return int(rng.choice(best))
