"""The measure stage's conditional SBC as tables: :func:`measure_sbc` and its result.

The replicates of :mod:`~bayes_dualeval.calibration.measure` become the tables of ``sbc``: each
quantity's PIT values, binned into ranks ``0, ..., L`` (``floor(PIT (L + 1))``, uniform
exactly when the PIT is, at that resolution) and tested against the simultaneous band of
:mod:`~bayes_dualeval.calibration.ecdf`; the central intervals' coverage of the truth at 50, 90 and
95%; and the null distribution of ``fit_p`` (its share below 1% and 5%). The quantities:
``theta_equal`` (the equal-weight mixture ``score`` and ``adaptive`` report),
``theta_weighted`` (the mixture weighted by each draw's marginal likelihood: exact when the
simulation draws from the draws scored, ``held_out=False``) and, for ``score``, ``fit_p``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.calibration import ecdf
from bayes_dualeval.calibration.measure import adaptive_replicates, score_replicates, simulate
from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.measure.bank import Bank

#: What can be calibrated: a score, or an adaptive test.
MEASURES = ("score", "adaptive")
#: Bins of the PIT values (ranks ``0`` to this), as the fits' SBC ranks among 99 draws.
RANK_DRAWS = 99
#: Central interval levels whose coverage is reported.
LEVELS = (0.5, 0.9, 0.95)
#: Levels at which the share of ``fit_p`` below is reported.
FIT_LEVELS = (0.01, 0.05)
#: Bank draws a replicate is scored with, by default (``score``'s fewest).
BANK_DRAWS = 200
#: Level of the simultaneous bands.
ALPHA = 0.05
COVERAGE_FILE = "coverage.csv"


@dataclass
class MeasureSBCResult:
    """What the measure stage's conditional SBC found.

    Attributes
    ----------
    summary : pandas.DataFrame
        ``quantity, sims, ecdf_max_dev, p_value, within_band`` (as ``sbc.csv``).
    coverage : pandas.DataFrame
        ``quantity, statistic, nominal, observed, se, sims``: central interval coverage of
        the truth per level, and for ``fit_p`` the share below each level.
    ranks : pandas.DataFrame
        ``sim, quantity, rank, draws, pit``.
    replicates : pandas.DataFrame
        One row per simulated model (:func:`~bayes_dualeval.calibration.measure.score_replicates`).
    band : Band
    info : dict
        Bank, settings, seed, and the distance between the two mixtures (``mean_tv``,
        ``mean_kl``...), ``fit_p`` quantiles, ``outside``.
    """

    summary: pd.DataFrame
    coverage: pd.DataFrame
    ranks: pd.DataFrame
    replicates: pd.DataFrame
    band: ecdf.Band
    info: dict = field(default_factory=dict)

    @property
    def outside(self) -> int:
        """Quantities whose ECDF leaves its band."""
        return int((~self.summary["within_band"]).sum())

    def save(self, out: str | Path) -> Path:
        """Write ``sbc.csv``, ``coverage.csv``, ``ranks.csv``, ``sbc.png`` and ``sbc.json``."""
        from bayes_dualeval.calibration.study import write_folder

        return write_folder(out, self, {COVERAGE_FILE: self.coverage})


def measure_sbc(
    bank: Bank,
    *,
    sims: int,
    measure: str = "score",
    items: int | None = None,
    bank_draws: int = BANK_DRAWS,
    perturb: dict | None = None,
    held_out: bool = True,
    seed: int = 0,
    **adaptive_options,
) -> MeasureSBCResult:
    """Conditional SBC of ``score`` or ``adaptive`` against ``bank`` (no refit).

    Parameters
    ----------
    bank : Bank
    sims : int
        Simulated new models (at least 2).
    measure : {"score", "adaptive"}
    items : int, optional
        Static questions each simulated model answers (a random subset per model; None:
        all of the bank's). An adaptive test chooses among them.
    bank_draws : int
        Bank draws kept (evenly spaced): the simulation's draws and the mixtures'.
    perturb : dict, optional
        A generator that is not the bank
        (:func:`~bayes_dualeval.calibration.measure.parse_perturbation`).
    held_out : bool
        Simulate from bank draws that the scores do not use (the bank must keep more
        than ``bank_draws``): the true items are then none of the draws mixed over, as
        with a real new model. With False they are one of them, which makes the weighted
        mixture exact by construction (a check of the grid code).
    seed : int
        Of the simulation, the ability draws of ``fit_p``, the adaptive test's choices
        and the bands.
    **adaptive_options
        ``select``, ``target_se``, ``max_items``, ``exposure`` of
        :func:`~bayes_dualeval.measure.adaptive.adaptive` (``measure="adaptive"`` only).

    Returns
    -------
    MeasureSBCResult

    Raises
    ------
    ConfigError
        An unknown measure, fewer than 2 simulations or 2 bank draws, adaptive options
        with ``score``, a bank without static questions, or ``held_out`` with a bank that
        keeps no more than ``bank_draws`` draws.
    """
    if measure not in MEASURES:
        raise ConfigError(f"measure is one of {', '.join(MEASURES)}; got {measure!r}")
    if sims < 2 or bank_draws < 2:
        raise ConfigError(
            f"the calibration needs 2 simulations and 2 bank draws at least; got {sims} "
            f"and {bank_draws}"
        )
    if adaptive_options and measure != "adaptive":
        raise ConfigError(
            f"{', '.join(sorted(adaptive_options))} set an adaptive test: use measure "
            "'adaptive' or leave them out"
        )
    started = time.perf_counter()
    full, bank = bank, bank.thin(bank_draws)
    rows = _simulation_draws(full, bank_draws, held_out)
    sim = simulate(full, sims, items=items, seed=seed, perturb=perturb, rows=rows)
    if measure == "score":
        reps = score_replicates(bank, sim, seed)
        quantities = ("theta_equal", "theta_weighted", "fit_p")
    else:
        reps = adaptive_replicates(bank, sim, seed=seed, **adaptive_options)
        quantities = ("theta_equal", "theta_weighted")
    values = {
        "theta_equal": reps["pit_equal"].to_numpy(),
        "theta_weighted": reps["pit_weighted"].to_numpy(),
        "fit_p": reps["fit_p"].to_numpy() if "fit_p" in reps else None,
    }
    ranks = pd.concat(
        [
            pd.DataFrame(
                {
                    "sim": np.arange(sims),
                    "quantity": name,
                    "rank": np.minimum(np.floor(values[name] * (RANK_DRAWS + 1)), RANK_DRAWS),
                    "draws": RANK_DRAWS,
                    "pit": values[name],
                }
            ).dropna()  # fmt: skip
            for name in quantities
        ],
        ignore_index=True,
    )
    ranks["rank"] = ranks["rank"].astype(np.int64)
    summary, b = _summary(ranks, seed)
    info = {
        "bank": str(bank.run_dir),
        "bank_model": bank.model.name,
        "measure": measure,
        "sims": sims,
        "items": int(sim.item.shape[1]),
        "bank_draws": bank.n_draws,
        "held_out": held_out,
        "simulation_draws": int(len(rows)),
        "perturb": dict(perturb or {}),
        "seed": seed,
        "rank_draws": RANK_DRAWS,
        "alpha": ALPHA,
        "adjusted_gamma": b.gamma,
        **_distance(reps),
        **({"adaptive": {**adaptive_options, **_asked(reps)}} if measure == "adaptive" else {}),
        **(_fit_null(reps["fit_p"].to_numpy()) if measure == "score" else {}),
        "outside": int((~summary["within_band"]).sum()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return MeasureSBCResult(summary, coverage_table(reps), ranks, reps, b, info)


def _simulation_draws(full: Bank, bank_draws: int, held_out: bool) -> np.ndarray:
    """The draws of ``full`` the simulation draws from: those :meth:`Bank.thin` leaves out."""
    from bayes_dualeval.core.thinning import evenly_spaced

    if not held_out:
        return evenly_spaced(full.n_draws, bank_draws)
    spare = np.setdiff1d(np.arange(full.n_draws), evenly_spaced(full.n_draws, bank_draws))
    if len(spare) == 0:
        raise ConfigError(
            f"the bank keeps {full.n_draws} draws, none beyond the {bank_draws} the scores "
            "use: lower bank_draws, or set held_out=False (the true items then among the "
            "draws mixed over)"
        )
    return spare


def _summary(ranks: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, ecdf.Band]:
    """One row per quantity against its band (one band per number of ranks)."""
    rows, bands = [], {}
    for name, group in ranks.groupby("quantity", sort=False):
        n = len(group)
        if n not in bands:
            bands[n] = ecdf.band(n, RANK_DRAWS, ALPHA, seed)
        rows.append({"quantity": name, "sims": n, **ecdf.test(group["rank"].to_numpy(), bands[n])})
    return pd.DataFrame(rows), bands[max(bands)]


def coverage_table(reps: pd.DataFrame) -> pd.DataFrame:
    """Central interval coverage of the truth, and ``fit_p``'s share below its levels.

    Each row's ``se`` is the binomial standard error at the nominal rate.
    """
    rows = []
    for name, column in (("theta_equal", "pit_equal"), ("theta_weighted", "pit_weighted")):
        pit = reps[column].to_numpy()
        for level in LEVELS:
            rows.append((name, "central interval coverage", level,
                         np.abs(pit - 0.5) <= level / 2))  # fmt: skip
    if "covered" in reps:
        rows.append(("theta_reported", "central interval coverage", 0.95,
                     reps["covered"].to_numpy()))  # fmt: skip
    if "fit_p" in reps:
        p = reps["fit_p"].to_numpy()
        p = p[np.isfinite(p)]
        for level in FIT_LEVELS:
            rows.append(("fit_p", "share below", level, p < level))
    return pd.DataFrame(
        [
            {
                "quantity": name,
                "statistic": stat,
                "nominal": level,
                "observed": float(np.mean(hit)) if len(hit) else np.nan,
                "se": float(np.sqrt(level * (1 - level) / max(len(hit), 1))),
                "sims": int(len(hit)),
            }  # fmt: skip
            for name, stat, level, hit in rows
        ]
    )


def _distance(reps: pd.DataFrame) -> dict:
    """How far the equal-weight mixture is from the weighted one, over the replicates."""
    tv, kl = reps["tv"].to_numpy(), reps["kl"].to_numpy()
    shift = np.abs(reps["mean_equal"] - reps["mean_weighted"]).to_numpy()
    return {
        "mean_tv": float(tv.mean()), "tv_q90": float(np.quantile(tv, 0.9)),
        "max_tv": float(tv.max()), "mean_kl": float(kl.mean()),
        "mean_abs_mean_shift": float(shift.mean()),
        "mean_sd_equal": float(reps["sd_equal"].mean()),
        "mean_sd_weighted": float(reps["sd_weighted"].mean()),
        "ess_median": float(reps["ess"].median()),
        "ess_q10": float(np.quantile(reps["ess"], 0.1)),
        "grid_step_median": float(np.median(reps["step"])),
    }  # fmt: skip


def _asked(reps: pd.DataFrame) -> dict:
    return {
        "mean_items_asked": float(reps["n_items"].mean()),
        "max_mean_gap": float(reps["gap"].max()),
    }


def _fit_null(p: np.ndarray) -> dict:
    """``fit_p`` of clean models: its 1% and 5% quantiles and the models without one."""
    ok = p[np.isfinite(p)]
    return {
        "fit_p_q01": float(np.quantile(ok, 0.01)) if len(ok) else None,
        "fit_p_q05": float(np.quantile(ok, 0.05)) if len(ok) else None,
        "fit_p_missing": int(len(p) - len(ok)),
    }
