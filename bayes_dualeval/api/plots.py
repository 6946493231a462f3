"""The report's own figures of a run, as matplotlib figures: ``run.plot.forest()``."""

from __future__ import annotations

import pandas as pd


class RunPlots:
    """Figures of one :class:`~bayes_dualeval.api.run.Run`, drawn by ``report/plots``.

    Parameters
    ----------
    run : Run
    """

    def __init__(self, run):
        self._run = run

    def _point(self) -> bool:
        post = self._run.idata.posterior
        return post.sizes["chain"] * post.sizes["draw"] < 2

    def forest(self, ci: float | None = None, *, top: int | None = None):
        """Posterior mean ability and interval of every model, best at the top.

        Parameters
        ----------
        ci : float, optional
            Interval level; default the run's.
        top : int, optional
            Show only the ``top`` best models.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from bayes_dualeval.report import plots

        board = self._run._board(ci)
        if top is not None:
            board = board.head(top)
        return plots.forest(
            board, ci=None if self._point() else self._run.ci if ci is None else ci
        )

    def wright(self, ci: float | None = None):
        """Wright map: abilities and item difficulties on one axis.

        Returns
        -------
        matplotlib.figure.Figure

        Raises
        ------
        ValueError
            If the model has no item difficulties (a Bradley-Terry-only fit).
        """
        from bayes_dualeval.report import plots

        items = self._run.items(ci)
        if "b_mean" not in items or items["b_mean"].isna().all():
            raise ValueError("this run's model has no item difficulties to draw")
        items = items[items["identified"]] if "identified" in items else items
        items = items.assign(group=items["kind"].astype(str) + ":" + items["source"].astype(str))
        models = self._run._board(ci)[["model", "theta_mean", "theta_lo", "theta_hi"]]
        return plots.wright_map(models, items, ci=None if self._point() else self._run.ci)

    def ranks(self, top: int = 80):
        """Heat map of P(model has rank k), best first; ranks past ``top`` pooled.

        Returns
        -------
        matplotlib.figure.Figure

        Raises
        ------
        ValueError
            For a MAP run (one draw: every rank probability is 0 or 1).
        """
        from bayes_dualeval.posterior.summaries import draws_of, ranks
        from bayes_dualeval.report import plots
        from bayes_dualeval.report.panels.rankings import rank_probabilities_of

        if self._point():
            raise ValueError("a MAP run has a single draw: its rank probabilities are 0 or 1")
        board = self._run._board().head(top)
        r = ranks(draws_of(self._run.idata, "theta_centred"))
        models = [str(m) for m in self._run.idata.posterior["model"].values]
        probs = rank_probabilities_of(r, pd.Index(models).get_indexer(board["model"]))
        m, k = r.shape[1], len(board)
        columns = [*range(1, k + 1)] + ([f">{k}"] if k < m else [])
        frame = pd.DataFrame(probs[:, : len(columns)], index=board["model"], columns=columns)
        return plots.rank_heatmap(frame)
