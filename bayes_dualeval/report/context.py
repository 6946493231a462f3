"""What the report's panels share: one fitted run, read from its in-memory result.

:class:`ReportContext` wraps a :class:`~bayes_dualeval.runs.fit.FitResult` whose checks and
tables have been computed (:func:`bayes_dualeval.runs.output.tabulate`): the leaderboard,
the item table and the posterior predictive checks come from the result, never from the
run folder, and which item parameters exist comes from the run's model
(:class:`~bayes_dualeval.model.spec.DualEvalModel`), never from the variables present.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.model import links
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.summaries import draws_of


def model_name(config) -> str:
    """The effective model of a run in words, e.g. ``dualeval-2pl (mode both, 2pl)``.

    The one spelling of what a run fitted, used by the report's header, ``fit``'s first
    line and the Python API (``Run.model``, ``Run.diagnostics.model``).

    Parameters
    ----------
    config : ModelConfig
        The run's specification with its overrides.

    Returns
    -------
    str
        The specification's name, then its mode and link, then ``2 ability dimensions``
        or ``an ability per domain`` where the fit has more than one ability per model.

    Examples
    --------
    >>> from bayes_dualeval.model.config import load_spec
    >>> model_name(load_spec("dualeval-2pl").replace(dims=2))
    'dualeval-2pl (mode both, 2pl, 2 ability dimensions)'
    """
    parts = [f"mode {config.mode}", config.irt]
    if config.dims > 1:
        parts.append(f"{config.dims} ability dimensions")
    if config.abilities == "domain":
        parts.append("an ability per domain")
    return f"{config.name} ({', '.join(parts)})"


class ReportContext:
    """Draws, tables and facts of one run, shared by every panel.

    Parameters
    ----------
    result : FitResult
        With ``ci``, ``ppc`` and ``tables`` set (:func:`~bayes_dualeval.runs.output.tabulate`).
    run_name : str
        The run folder's name (shown in the header).

    Raises
    ------
    ValueError
        If the result's checks and tables have not been computed.
    """

    def __init__(self, result, run_name: str):
        if result.ppc is None or "items" not in result.tables:
            raise ValueError("the run's checks and tables are not computed: call tabulate()")
        self.result = result
        self.run_name = run_name
        self.idata = result.idata
        self.dataset = result.dataset
        self.diagnostics = result.diagnostics
        self.ci = float(result.ci)
        self.ppc = result.ppc
        self.model = DualEvalModel(result.config)
        self.sampler = result.settings.sampler
        post = self.idata.posterior
        self.n_chain, self.n_draw = int(post.sizes["chain"]), int(post.sizes["draw"])
        self.point = self.n_chain * self.n_draw < 2
        self.models = np.asarray(post["model"].values, dtype=str)
        self.board = result.tables["leaderboard"]
        self.has_items = "b" in self.model.item_sites
        self.has_a = "a" in self.model.item_sites
        items = result.tables["items"].copy()
        items["group"] = items["kind"].astype(str) + ":" + items["source"].astype(str)
        items["flags"] = items["flags"].fillna("").astype(str)
        self.items = items
        self._shift = None

    def theta_shift(self) -> np.ndarray:
        """Mean ability of each pooled draw (item difficulties are centred by it)."""
        if self._shift is None:
            self._shift = draws_of(self.idata, "theta").mean(axis=1)
        return self._shift

    def thin(self, n: int) -> np.ndarray:
        """Indices of at most ``n`` evenly spaced pooled draws."""
        total = self.n_chain * self.n_draw
        return evenly_spaced(total, n)

    def success_curve(self, k: int, grid: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """P(success) on item ``k`` at abilities ``grid`` (centred), for pooled ``draws``.

        The run's link (:mod:`bayes_dualeval.model.links`) with the item's difficulty
        centred like the abilities, and its discrimination, floor and ceiling where the
        link has them.

        Returns
        -------
        numpy.ndarray, shape (len(draws), len(grid))
        """
        column = {
            name: draws_of(self.idata, name)[np.ix_(draws, [k])].astype(np.float64)
            for name in self.model.item_sites
        }
        par = self.model.item_parameters(column)
        b = par["b"] - self.theta_shift()[draws, None]
        return links.probability(links.eta(grid[None, :], b, par["a"]), par["c"], par["d"])
