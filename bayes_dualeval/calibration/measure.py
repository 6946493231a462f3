r"""Conditional SBC of the measure stage: do a frozen bank's scores cover simulated truths.

No refit: the bank (:class:`~bayes_dualeval.measure.bank.Bank`, a fitted run) is held
fixed, and each replicate draws

1. a bank draw :math:`d` uniformly among the given draws of the bank (by default those the
   scores do not use: :func:`~bayes_dualeval.calibration.conditional.measure_sbc`);
2. a new model's raw ability :math:`\theta \sim N(0, s)` (the ability prior of
   :mod:`~bayes_dualeval.measure.grid`), whose truth on the leaderboard's scale is
   :math:`u = \theta - \bar\theta_d` (the grid's :math:`\theta = \bar\theta_d + u`);
3. its labels on the bank's static questions (all, or a random subset per replicate),
   Bernoulli under the bank's link with draw :math:`d`'s item parameters.

The *weighted* mixture over the draws scored weighs each by its marginal likelihood,
:math:`p(u \mid y) = \sum_d \pi_d\, p(u \mid y, \phi_d)` with :math:`\pi_d \propto
p(y \mid \phi_d)` (:attr:`~bayes_dualeval.measure.grid.GridPosterior.log_evidence`). When
:math:`d` is drawn among the draws scored it is the exact posterior of the simulation, so
its PIT at the truth is uniform up to the grid's resolution: a check of the grid code
itself. When :math:`d` is none of them (as a real new model's items are none of the bank's
draws) it is an importance-weighted approximation, and :math:`1 / \sum_d \pi_d^2` says how
many draws it rests on. ``score`` and
``adaptive`` report the *equal*-weight mixture (the cut: the new model's answers do not
reweigh the bank's draws), whose PIT is measured against it, together with the total
variation and the Kullback-Leibler divergence between the two mixtures. The PIT reads a
grid posterior as :meth:`~bayes_dualeval.measure.grid.GridPosterior.sample` does: a
point's mass spread evenly over its cell. ``score``'s person-fit p-value ``fit_p``
(:mod:`~bayes_dualeval.measure.person_fit`) of these clean models is its null distribution.

``score``: every replicate is one new model of one call of the grid code (in chunks of
models that bound memory; no loop over replicates). ``adaptive``: the simulated models are
the oracle of :func:`~bayes_dualeval.measure.adaptive.adaptive` (which tests one model at a
time); its reported 95% interval is checked against the truth, and the questions it asked
are scored again on its fixed grid with the grid code to get both mixtures (the equal one
is its posterior: the same prior, likelihood and grid). A *perturbed* generator is not the
bank (:data:`PERTURBABLE`), to see the check's power.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_dualeval.calibration.generate import key_values
from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.measure import grid
from bayes_dualeval.measure.bank import Bank, shift
from bayes_dualeval.measure.responses import Responses
from bayes_dualeval.model import links

#: Generator-only keys: the abilities' prior sd, a shift of every difficulty, a label flip.
PERTURBABLE = ("theta_scale", "b_shift", "flip")
#: Largest number of floats one chunk of models holds: (models x draws x grid points), and
#: ``fit_p``'s (models x questions x ability draws).
CHUNK = 10_000_000
#: Ability draws per bank draw ``fit_p`` averages over (as ``score``).
PER_DRAW = 4


@dataclass(frozen=True)
class Simulated:
    """Simulated new models: their truths and their labels on bank questions.

    Attributes
    ----------
    truth : numpy.ndarray, shape (N,)
        Abilities on the leaderboard's scale of the draw each was simulated from.
    draw : numpy.ndarray of int, shape (N,)
        That bank draw.
    item : numpy.ndarray of int, shape (N, n)
        The bank questions each answered.
    label : numpy.ndarray of float, shape (N, n)
        Its labels (0 or 1).
    """

    truth: np.ndarray
    draw: np.ndarray
    item: np.ndarray
    label: np.ndarray

    def responses(self, rows=slice(None)) -> Responses:
        """The replicates ``rows`` as :class:`Responses` (one label per cell)."""
        item, label = self.item[rows], self.label[rows]
        k, n = item.shape
        return static_responses(k, np.repeat(np.arange(k), n), item.ravel(), label.ravel())


def static_responses(n_models: int, model, item, label) -> Responses:
    """Static labels (one answer per cell) of ``n_models`` new models as :class:`Responses`."""
    empty = np.zeros(0, dtype=np.int64)
    return Responses(
        models=np.char.add("sim", np.arange(n_models).astype(str)),
        static_model=np.asarray(model, dtype=np.int64),
        static_item=np.asarray(item, dtype=np.int64),
        static_y=np.asarray(label, dtype=np.float64),
        static_n=np.ones(len(label)),
        arena_model=empty, arena_item=empty, arena_z=np.zeros(0), n_skipped=0,
    )  # fmt: skip


def parse_perturbation(items) -> dict:
    """``["theta_scale=2", "b_shift=0.5"]`` as a dict of floats, checked.

    Raises
    ------
    ConfigError
        An item without ``=``, a key outside :data:`PERTURBABLE`, a value that is not a
        number, a ``theta_scale`` that is not positive or a ``flip`` outside [0, 1].
    """
    out = key_values(items, PERTURBABLE, "a perturbation of the measure stage")
    if out.get("theta_scale", 1.0) <= 0:
        raise ConfigError(f"perturbation theta_scale must be positive; got {out['theta_scale']}")
    if not 0 <= out.get("flip", 0.0) <= 1:
        raise ConfigError(f"perturbation flip is a probability; got {out['flip']}")
    return out


def static_items(bank: Bank) -> np.ndarray:
    """The bank's static questions (bank item indices) its specification fits.

    Raises
    ------
    ConfigError
        When the bank fits no static question.
    """
    use_static, _ = bank.model.kinds(bank.dataset, strict=False)
    static = np.flatnonzero(bank.items["kind"].to_numpy() == "static")
    if not use_static or len(static) == 0:
        raise ConfigError(
            f"bank {bank.run_dir} fits no static question: the measure stage's calibration "
            "simulates static labels"
        )
    return static


def simulate(
    bank: Bank, sims: int, *, items: int | None = None, seed: int = 0,
    perturb: dict | None = None, rows=None,
) -> Simulated:  # fmt: skip
    """Draw ``sims`` new models from the bank's draws (see the module), vectorised.

    Parameters
    ----------
    bank : Bank
    sims : int
    items : int, optional
        Questions each model answers: a random subset of this size of the bank's static
        questions, drawn per model (None: all of them).
    seed : int
    perturb : dict, optional
        From :func:`parse_perturbation`: ``theta_scale`` (the generator's ability sd),
        ``b_shift`` (added to every difficulty), ``flip`` (each label flipped with this
        probability).
    rows : numpy.ndarray of int, optional
        The bank draws the simulation draws from (default all).

    Returns
    -------
    Simulated
    """
    perturb = dict(perturb or {})
    static = static_items(bank)
    n = len(static) if items is None else int(items)
    if not 1 <= n <= len(static):
        raise ConfigError(
            f"items must be between 1 and the bank's {len(static)} static questions; got {n}"
        )
    rng = np.random.default_rng(seed)
    rows = np.arange(bank.n_draws) if rows is None else np.asarray(rows)
    draw = rows[rng.integers(len(rows), size=sims)]
    scale = perturb.get("theta_scale", bank.model.config.theta_scale)
    raw = rng.normal(0.0, scale, size=sims)
    if n == len(static):
        item = np.broadcast_to(static, (sims, n)).copy()
    else:
        item = static[np.argsort(rng.random((sims, len(static))), axis=1)[:, :n]]
    par = bank.parameters(draw)  # (N, Q) each
    take = {k: None if v is None else np.take_along_axis(v, item, 1) for k, v in par.items()}
    eta = links.eta(raw[:, None], take["b"] + perturb.get("b_shift", 0.0), take["a"])
    label = rng.random(item.shape) < links.probability(eta, take["c"], take["d"])
    flip = rng.random(item.shape) < perturb.get("flip", 0.0)
    return Simulated(
        truth=raw - shift(bank, draw), draw=draw, item=item,
        label=np.where(flip, ~label, label).astype(np.float64),
    )  # fmt: skip


def evidence_weights(log_evidence: np.ndarray) -> np.ndarray:
    """Each draw's weight in the weighted mixture, ``p(y | phi_d)`` normalised: (K, D)."""
    pi = np.exp(log_evidence - log_evidence.max(axis=1, keepdims=True))
    return pi / pi.sum(axis=1, keepdims=True)


def mixtures(weights: np.ndarray, log_evidence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The equal-weight and the evidence-weighted mixture over draws, each (K, G).

    Parameters
    ----------
    weights : numpy.ndarray, shape (K, D, G)
        Each draw's posterior on the grid, normalised over ``G``.
    log_evidence : numpy.ndarray, shape (K, D)
        Each draw's log marginal likelihood (up to a constant per model).
    """
    pi = evidence_weights(log_evidence)
    return weights.mean(axis=1), np.einsum("kd,kdg->kg", pi, weights)


def pit(grids: np.ndarray, mixture: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """The mixture's CDF at the truth, each point's mass spread evenly over its cell, (K,).

    ``grids`` (K, G) are evenly spaced per model; a truth off the grid gets 0 or 1.
    """
    step = (grids[:, 1] - grids[:, 0])[:, None]
    share = np.clip((truth[:, None] - grids) / step + 0.5, 0.0, 1.0)
    return np.clip((mixture * share).sum(axis=1), 0.0, 1.0)


def divergences(equal: np.ndarray, weighted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Total variation and ``KL(weighted || equal)`` between the two mixtures, each (K,)."""
    tv = 0.5 * np.abs(equal - weighted).sum(axis=1)
    ratio = np.where(weighted > 0, weighted / np.maximum(equal, 1e-300), 1.0)
    return tv, (weighted * np.log(ratio)).sum(axis=1)


def chunks(n_models: int, per_model: int):
    """Slices of models holding at most :data:`CHUNK` floats, ``per_model`` floats each."""
    size = max(1, CHUNK // max(per_model, 1))
    return [slice(s, min(s + size, n_models)) for s in range(0, n_models, size)]


def score_replicates(bank: Bank, sim: Simulated, seed: int = 0) -> pd.DataFrame:
    """Score every simulated model with the grid code ``score`` uses; one row each.

    Returns
    -------
    pandas.DataFrame
        ``truth``; ``pit_equal``, ``pit_weighted`` (the two mixtures' CDF at the truth);
        ``mean_equal``, ``mean_weighted``, ``sd_equal``, ``sd_weighted``; ``tv``, ``kl``
        (:func:`divergences`); ``ess`` (the effective number of bank draws of the
        evidence weights, ``1 / sum pi_d^2``); ``step``
        (the grid's); ``fit_p``.
    """
    from bayes_dualeval.measure.person_fit import FIT_DRAWS, person_fit

    rng = np.random.default_rng(seed)
    parts = []
    per_model = max(bank.n_draws * grid.GRID, sim.item.shape[1] * FIT_DRAWS)
    for rows in chunks(len(sim.truth), per_model):
        resp = sim.responses(rows)
        post = grid.posterior(bank, resp)
        theta = post.sample(rng, PER_DRAW).reshape(resp.n_models, -1)
        parts.append(_row(post.grids, post.weights, post.log_evidence, sim.truth[rows]).assign(
            fit_p=person_fit(bank, resp, post, theta)
        ))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def adaptive_replicates(bank: Bank, sim: Simulated, **options) -> pd.DataFrame:
    """Test every simulated model adaptively, then score what it was asked; one row each.

    ``options`` are :func:`~bayes_dualeval.measure.adaptive.adaptive`'s (``select``,
    ``target_se``, ``max_items``, ``exposure``, ``seed``).

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`score_replicates` but ``fit_p``, and ``covered`` (the truth
        inside the test's reported interval), ``n_items`` (asked) and ``gap`` (the
        rescored equal mixture's mean minus the test's own, in absolute value: a check
        that they are the same posterior).
    """
    from bayes_dualeval.measure import adaptive as cat

    oracle = sim.responses()
    result = cat.adaptive(bank, oracle, **options)
    scale = bank.model.config.theta_scale
    points = np.linspace(-cat.HALF_WIDTH * scale, cat.HALF_WIDTH * scale, cat.GRID)
    trace = result.trace
    index = pd.Index(bank.items["item"].to_numpy(dtype=str))
    model = pd.Index(oracle.models).get_indexer(trace["model"])
    item = index.get_indexer(trace["item"].to_numpy(dtype=str))
    label = trace["response"].to_numpy(dtype=np.float64)
    parts, draws = [], np.arange(bank.n_draws)
    for rows in chunks(len(sim.truth), bank.n_draws * cat.GRID):
        keep = (model >= rows.start) & (model < rows.stop)
        part = static_responses(
            rows.stop - rows.start, model[keep] - rows.start, item[keep], label[keep]
        )
        grids = np.broadcast_to(points, (part.n_models, cat.GRID))
        lp = grid.loglik(bank, part, grid.arena_pairs(bank, part), grids, draws)
        lp += grid.log_prior(bank, grids, draws)
        top = lp.max(axis=2, keepdims=True)
        w = np.exp(lp - top)
        total = w.sum(axis=2, keepdims=True)
        parts.append(_row(grids, w / total, (top + np.log(total))[..., 0], sim.truth[rows]))
    out = pd.concat(parts, ignore_index=True)
    summary = result.summary.set_index("model").loc[oracle.models]
    lo, hi = summary["theta_lo"].to_numpy(), summary["theta_hi"].to_numpy()
    return out.assign(
        covered=(lo <= sim.truth) & (sim.truth <= hi),
        n_items=summary["n_items"].to_numpy(),
        gap=np.abs(out["mean_equal"].to_numpy() - summary["theta_mean"].to_numpy()),
    )


def _row(grids, weights, log_evidence, truth) -> pd.DataFrame:
    """Both mixtures of one chunk of replicates, read at the truth."""
    equal, weighted = mixtures(weights, log_evidence)
    tv, kl = divergences(equal, weighted)
    step = grids[:, 1] - grids[:, 0]

    def sd(m):  # the mixture's sd, a point's mass spread over its cell
        mean = (m * grids).sum(axis=1, keepdims=True)
        return np.sqrt(np.maximum((m * (grids - mean) ** 2).sum(axis=1) + step**2 / 12, 0.0))

    return pd.DataFrame({
        "truth": truth,
        "pit_equal": pit(grids, equal, truth),
        "pit_weighted": pit(grids, weighted, truth),
        "mean_equal": (equal * grids).sum(axis=1),
        "mean_weighted": (weighted * grids).sum(axis=1),
        "sd_equal": sd(equal),
        "sd_weighted": sd(weighted),
        "tv": tv,
        "kl": kl,
        "ess": 1.0 / (evidence_weights(log_evidence) ** 2).sum(axis=1),
        "step": step,
    })  # fmt: skip
