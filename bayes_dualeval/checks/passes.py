"""The checks of one run: each pass over the data made at most once, shared by every table.

Each kind of data is visited once: one pass over the static cells gives the cell table,
the replicated labels, the item fit and the calibration; one pass over the arena pairs
gives, for every draw used, each arena cell's expected wins and their variance, from which
everything arena follows. :func:`~bayes_dualeval.checks.anomalies`,
:func:`~bayes_dualeval.checks.posterior_predictive` and
:func:`~bayes_dualeval.checks.item_table` share these passes (``item_table`` reuses a
:class:`~bayes_dualeval.checks.PPC`'s through ``ppc=``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.checks import budget
from bayes_dualeval.checks.arena import ArenaPass, arena_pass
from bayes_dualeval.checks.cells import cell_table
from bayes_dualeval.checks.fitted import resolve
from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.residuals import ResidualFit, residual_fit
from bayes_dualeval.checks.reward import reward_pass
from bayes_dualeval.checks.static import StaticPass, static_pass


class Checks:
    """The checks of one run, each computed at most once and shared by the public functions.

    The posterior draws used are a seeded subset of at most ``options.max_draws``; each
    pass then keeps as many of them (evenly spaced) as
    :func:`~bayes_dualeval.checks.budget.budget` allows for its size. Each pass has its own
    random stream derived from ``options.seed``, so a table does not depend on which other
    tables were computed first.

    Parameters
    ----------
    idata : arviz.InferenceData
    dataset : Dataset
    pairs : Pairs or None
        The run's arena pairs; distilled with the options' ratios when None.
    options : CheckOptions
    """

    def __init__(self, idata, dataset, pairs, options: CheckOptions):
        self.idata, self.dataset, self.options = idata, dataset, options
        self.fit = resolve(idata, dataset, pairs, options.bb_ratio, options.tie_ratio)
        rng = np.random.default_rng(options.seed)
        self.draws = budget.select_draws(self.fit.n_draws, options.max_draws, rng)
        self._seed = options.seed
        self._static: StaticPass | None = None
        self._arena: ArenaPass | None = None
        self._residuals: ResidualFit | None = None

    @classmethod
    def reuse(cls, checks, idata, dataset, pairs, options: CheckOptions) -> Checks:
        """``checks`` when they were computed for the same run, data and options; else new."""
        if checks is not None and checks.matches(idata, dataset, options):
            return checks
        return cls(idata, dataset, pairs, options)

    def matches(self, idata, dataset, options: CheckOptions) -> bool:
        """Whether these checks were computed for the same run, data and options."""
        return idata is self.idata and dataset is self.dataset and self.options == options

    def static(self, replicate: bool = True) -> StaticPass | None:
        """The static pass (with replicated labels unless ``replicate`` is False)."""
        if not self.fit.use_static:
            return None
        if self._static is None or (replicate and self._static.item_ppp is None):
            n_cells = len(self.fit.dataset.static_y)
            draws = budget.budget(self.draws, n_cells)
            rng = np.random.default_rng([self._seed, 1]) if replicate else None
            self._static = static_pass(self.fit, draws, rng)
        return self._static

    def residuals(self) -> ResidualFit | None:
        """Infit, outfit and person fit of the static cells (None without them)."""
        if not self.fit.use_static or self.fit.items["b"] is None:
            return None
        if self._residuals is None:
            n_cells = len(self.fit.dataset.static_y)
            draws = budget.budget(self.draws, n_cells)
            rng = np.random.default_rng([self._seed, 3])
            self._residuals = residual_fit(self.fit, draws, rng)
        return self._residuals

    def arena(self) -> ArenaPass | None:
        """The arena pass (pairs, Bradley-Terry or reward likelihood)."""
        if self.fit.arena is None:
            return None
        if self._arena is None:
            n_cells = len(self.fit.dataset.arena_z)
            width = n_cells
            if self.fit.decisive is not None:
                width = max(self.fit.decisive.n_pairs, n_cells)
            draws = budget.budget(self.draws, width, store=n_cells)
            rng = np.random.default_rng([self._seed, 2])
            if self.fit.arena == "reward":
                self._arena = reward_pass(self.fit, draws, rng)
            else:
                self._arena = arena_pass(self.fit, draws, rng, self.options.dispersion)
        return self._arena

    def cells(self) -> tuple[pd.DataFrame, tuple]:
        """The table of :func:`~bayes_dualeval.checks.anomalies` and its rows' codes."""
        parts = {}
        static = self.static(replicate=False)
        if static is not None:
            parts["static"] = static.cells
        arena = self.arena()
        if arena is not None:
            parts["arena"] = arena.cells
        ds = self.fit.dataset
        table, codes = cell_table(ds.models, ds.items, parts)
        table.attrs["arena_dispersion"] = arena.phi if arena is not None else np.nan
        return table, codes
