"""Simulation-based calibration of a specification: simulate, fit, rank, test, write.

:func:`sbc` draws ``sims`` data sets of one fixed design from the specification's prior
predictive (:mod:`~bayes_dualeval.calibration.generate`), fits each with the package's own fit
(:func:`bayes_dualeval.runs.fit.fit`: the sampler settings given, the convergence check
recorded), ranks each true quantity among evenly spaced posterior draws
(:mod:`~bayes_dualeval.calibration.quantities`) and tests the ranks' uniformity against
simultaneous bands (:mod:`~bayes_dualeval.calibration.ecdf`). Every simulation has the same shapes,
so the sampler's programs are compiled once (the data are arguments of the compiled
sampler, :mod:`bayes_dualeval.inference.chains`). Fits that fail the convergence check are
counted and kept: their ranks are part of what the calibration measures.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.calibration import ecdf
from bayes_dualeval.calibration.generate import (
    check_generative,
    design,
    feature_table,
    prior_predictive,
    with_data,
)
from bayes_dualeval.calibration.quantities import SITES, joint_loglik, quantities, ranks
from bayes_dualeval.core import atomic
from bayes_dualeval.core.errors import ConfigError, ConvergenceWarning
from bayes_dualeval.core.fields import setting
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.inference.drivers import shared_drivers
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig

logger = logging.getLogger(__name__)

#: Thinned posterior draws each truth is ranked among (ranks 0 to this).
RANK_DRAWS = 99
#: Level of the simultaneous bands.
ALPHA = 0.05
SUMMARY_FILE = "sbc.csv"
RANKS_FILE = "ranks.csv"
PLOT_FILE = "sbc.png"
INFO_FILE = "sbc.json"


@dataclass
class SBCResult:
    """What a simulation-based calibration found.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per quantity: ``quantity, sims, ecdf_max_dev, p_value, within_band``.
    ranks : pandas.DataFrame
        One row per simulation and quantity: ``sim, quantity, rank, draws, converged``.
    band : Band
        The simultaneous band the ranks were tested against.
    info : dict
        The specification, design, perturbation, sampler settings, seed, and the counts
        (``fits_not_converged``, ``convergence_problems``: fits with each kind of problem,
        ``outside``).
    """

    summary: pd.DataFrame
    ranks: pd.DataFrame
    band: ecdf.Band
    info: dict = field(default_factory=dict)

    @property
    def outside(self) -> int:
        """Quantities whose ECDF leaves its band."""
        return int((~self.summary["within_band"]).sum())

    def save(self, out: str | Path) -> Path:
        """Write ``sbc.csv``, ``ranks.csv``, ``sbc.png`` and ``sbc.json`` into a new folder."""
        return write_folder(out, self)


def write_folder(out: str | Path, result, tables: dict | None = None) -> Path:
    """Write an SBC result's folder, staged: ``sbc.csv``, ``ranks.csv``, ``sbc.png``, ``sbc.json``.

    ``result`` has ``summary``, ``ranks``, ``band`` and ``info``; ``tables`` maps further
    file names to frames written beside them.
    """
    import json

    from bayes_dualeval.calibration.plot import ecdf_figure

    with atomic.staged_folder(out) as staging:
        result.summary.to_csv(staging / SUMMARY_FILE, index=False)
        for name, frame in (tables or {}).items():
            frame.to_csv(staging / name, index=False)
        result.ranks.to_csv(staging / RANKS_FILE, index=False)
        fig = ecdf_figure(result.ranks, result.band, result.summary)
        fig.savefig(staging / PLOT_FILE, dpi=110)
        (staging / INFO_FILE).write_text(json.dumps(result.info, indent=2) + "\n")
    return Path(out)


def sbc(
    config: ModelConfig,
    settings: SamplerSettings,
    *,
    sims: int,
    n_models: int = 10,
    n_items: int = 30,
    n_domains: int = 3,
    n_prompts: int = 20,
    n_features: int = 0,
    n_graders: int = 1,
    perturb: dict | None = None,
    seed: int = 0,
) -> SBCResult:
    """Simulation-based calibration of ``config`` fitted with ``settings``.

    Parameters
    ----------
    config : ModelConfig
        The specification (``mode='static'``; see
        :func:`~bayes_dualeval.calibration.generate.check_generative`).
    settings : SamplerSettings
        The sampler of every fit (NUTS: the ranks need posterior draws); its seed is
        replaced by one per simulation.
    sims : int
        Simulations (at least 2).
    n_models, n_items : int
        The design: every model answers every static question once (none where the
        specification's mode fits no static labels).
    n_domains : int
        The questions' domains, for a specification with an ability per domain (others
        see one domain).
    n_prompts : int
        Arena prompts, each scored once per model (the reward likelihood; none where
        the mode fits no arena).
    n_features : int
        Item features: that many standard normal columns per item
        (:func:`~bayes_dualeval.calibration.generate.feature_table`, the same for every
        simulation), regressors of the item prior in the generator and in every fit.
    n_graders : int
        Graders of the static labels: every answer labelled by each (one severity per
        grader on the log-odds, :mod:`~bayes_dualeval.model.graders`).
    perturb : dict, optional
        Generator-only changes (:func:`~bayes_dualeval.calibration.generate.parse_perturbation`).
    seed : int
        Of the simulations, the fits and the bands.

    Returns
    -------
    SBCResult

    Raises
    ------
    ConfigError
        A specification that is not generative, a sampler without posterior draws, or too
        few draws to rank among.
    """
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.spec import DualEvalModel
    from bayes_dualeval.runs.fit import fit

    check_generative(config)
    if settings.sampler != "nuts":
        raise ConfigError(
            f"simulation-based calibration ranks the truth among posterior draws; "
            f"{setting('sampler', settings.sampler)} gives approximate ones: use "
            f"{setting('sampler', 'nuts')}"
        )
    if sims < 2:
        raise ConfigError(f"simulation-based calibration needs 2 simulations at least; got {sims}")
    total = settings.chains * settings.draws
    n_rank = min(RANK_DRAWS, total - 1)
    if n_rank < 9:
        raise ConfigError(
            f"{total} posterior draws are too few to rank among (10 at least): raise "
            f"{setting('draws')}"
        )
    model = DualEvalModel(config)
    n_domains = n_domains if model.domain_abilities else 1
    fits_static, fits_arena = model.fitted_kinds
    n_items = n_items if fits_static else 0
    n_prompts = n_prompts if fits_arena else 0
    if fits_arena and n_prompts < 2:
        raise ConfigError(
            f"{setting('mode', config.mode)} fits arena rewards: the design needs 2 arena "
            f"prompts at least ({setting('arena_prompts')}); got {n_prompts}"
        )
    n_graders = n_graders if n_items else 1
    base = design(n_models, n_items, n_domains, n_prompts, n_graders)
    prompt = int(np.flatnonzero(base.item_kind == "arena")[0]) if n_prompts else None
    features = feature_table(base, n_features) if n_features else None
    truth = prior_predictive(base, config, sims, seed, perturb, features)
    rng = np.random.default_rng(seed)
    rows, converged, problems, started = [], [], Counter(), time.perf_counter()
    # one design: every fit runs the first fit's compiled sampler; one progress line a fit
    with shared_drivers(), _quiet("bayes_dualeval.inference"):
        for s in range(sims):
            data = with_data(base, truth, s)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                result = fit(data, config, _seeded(settings, seed, s), features=features)
            converged.append(bool(result.converged))
            problems.update(_kinds(result.convergence.problems))
            post = result.idata.posterior
            flat = {k: _flat(post[k].values) for k in SITES if k in post}
            keep = evenly_spaced(flat["theta"].shape[0], n_rank)
            draws = {k: v[keep] for k, v in flat.items()}
            inputs, _ = build_inputs(data, config, centred="none")
            true = {k: v[s : s + 1] for k, v in truth.items() if k not in _DATA}
            q_true = quantities(true, joint_loglik(model, true, inputs), prompt)
            q_draws = quantities(draws, joint_loglik(model, draws, inputs), prompt)
            for name, rank in ranks(q_true, q_draws, rng).items():
                rows.append((s, name, rank, n_rank, converged[-1]))
            logger.info(
                "simulation %d of %d fitted (%s; %.0f s so far)", s + 1, sims,
                "converged" if converged[-1] else "did not converge",
                time.perf_counter() - started,
            )  # fmt: skip
    table = pd.DataFrame(rows, columns=["sim", "quantity", "rank", "draws", "converged"])
    b = ecdf.band(sims, n_rank, ALPHA, seed)
    summary = pd.DataFrame(
        [
            {"quantity": name, "sims": sims, **ecdf.test(group["rank"].to_numpy(), b)}
            for name, group in table.groupby("quantity", sort=False)
        ]
    )
    info = {
        "model": config.name,
        "mode": config.mode,
        "design": {
            "models": n_models,
            "static_items": n_items,
            "domains": n_domains,
            "arena_prompts": n_prompts,
            "features": n_features,
            "graders": n_graders,
        },  # fmt: skip
        "perturb": dict(perturb or {}),
        "sims": sims,
        "seed": seed,
        "rank_draws": n_rank,
        "alpha": ALPHA,
        "adjusted_gamma": b.gamma,
        "fits_not_converged": int(len(converged) - sum(converged)),
        "convergence_problems": dict(problems),
        "outside": int((~summary["within_band"]).sum()),
        "sampler": settings.to_dict(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return SBCResult(summary, table, b, info)


#: The simulated data among the prior predictive's values.
_DATA = ("static_y", "arena_z")


#: What a convergence problem is about, by a word of its message (``Convergence.problems``).
_PROBLEMS = (("R-hat", "r_hat"), ("ESS", "ess"), ("divergent", "divergences"),
             ("E-BFMI", "e_bfmi"), ("tree depth", "tree_depth"))  # fmt: skip


def _kinds(problems) -> set:
    """The kinds of a fit's convergence problems (fits with each kind are counted)."""
    return {kind for text in problems for word, kind in _PROBLEMS if word in text} or (
        {"other"} if problems else set()
    )


@contextmanager
def _quiet(name: str):
    """Leave out the INFO records of logger ``name`` (each fit's rounds) while the block runs."""
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(level)


def _flat(values: np.ndarray) -> np.ndarray:
    """Draws with the chain and draw axes merged: (chains * draws, ...)."""
    return values.reshape((-1, *values.shape[2:]))


def _seeded(settings: SamplerSettings, seed: int, sim: int) -> SamplerSettings:
    """``settings`` with a seed of its own for simulation ``sim``."""
    from dataclasses import replace

    return replace(settings, seed=int(seed) * 100_003 + sim + 1)
