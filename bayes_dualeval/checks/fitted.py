"""The run the checks read: posterior draws, the data, and the recorded specification.

:func:`resolve` reads the draws of a run's :class:`arviz.InferenceData` (chains pooled,
float32), takes the specification that produced it from the posterior's attributes
(:meth:`~bayes_dualeval.model.spec.DualEvalModel.from_idata`: the IRT link, which kinds of
data were fitted and the arena likelihood), restricts the dataset to the kinds fitted, and
checks that data and draws belong together. The predictive formula comes from
:mod:`bayes_dualeval.model.links` and
:func:`~bayes_dualeval.model.arena_term.win_probability`; this module only gathers
the draws of the cells it is asked about, one draw at a time (a 1-D ``take`` is several
times faster than fancy indexing of a 2-D array).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from bayes_dualeval.core.errors import ConfigError, InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import Pairs, distill
from bayes_dualeval.model import dif, graders, links
from bayes_dualeval.model.ability_map import AbilityMap, domain_map
from bayes_dualeval.model.arena_term import win_probability
from bayes_dualeval.model.facets import VALUES, Facets, arena_facets, scores
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.summaries import draws_of

#: Per-item posterior variables, in table order.


@dataclass(frozen=True, eq=False)
class Decisive:
    """Decisive arena pairs and the sparse maps from pairs to arena cells."""

    row_i: np.ndarray
    row_j: np.ndarray
    i: np.ndarray
    j: np.ndarray
    item: np.ndarray
    t: np.ndarray
    diff: sparse.csr_array  # (R, P): +1 at the pair's first cell, -1 at its second
    both: sparse.csr_array  # (R, P): +1 at both cells
    n_second: np.ndarray  # pairs in which the cell is the second side
    n_cell: np.ndarray  # decisive pairs per arena cell
    observed: np.ndarray  # soft wins per arena cell

    @property
    def n_pairs(self) -> int:
        """Number of decisive pairs."""
        return len(self.t)

    @classmethod
    def of(cls, pairs: Pairs, n_rows: int) -> Decisive:
        """The decisive (not both-bad) pairs of ``pairs`` over ``n_rows`` arena cells."""
        if pairs.n_pairs and max(pairs.row_i.max(), pairs.row_j.max()) >= n_rows:
            raise InputError("the arena pairs do not belong to this dataset")
        keep = ~pairs.both_bad
        ri, rj = pairs.row_i[keep].astype(np.int64), pairs.row_j[keep].astype(np.int64)
        t = pairs.target[keep].astype(np.float64)
        cols = np.arange(len(t))
        rows, cols = np.concatenate([ri, rj]), np.concatenate([cols, cols])
        ones = np.ones(len(t), dtype=np.float32)
        diff = sparse.csr_array(
            (np.concatenate([ones, -ones]), (rows, cols)), shape=(n_rows, len(t))
        )
        both = sparse.csr_array((np.concatenate([ones, ones]), (rows, cols)), shape=diff.shape)
        n_second = np.bincount(rj, minlength=n_rows)
        return cls(
            row_i=ri,
            row_j=rj,
            i=pairs.i[keep].astype(np.int64),
            j=pairs.j[keep].astype(np.int64),
            item=pairs.item[keep].astype(np.int64),
            t=t,
            diff=diff,
            both=both,
            n_second=n_second.astype(np.float32),
            n_cell=np.bincount(ri, minlength=n_rows) + n_second,
            observed=np.bincount(ri, weights=t, minlength=n_rows)
            + np.bincount(rj, weights=1.0 - t, minlength=n_rows),
        )


@dataclass(frozen=True, eq=False)
class FittedRun:
    """Posterior draws (chains pooled, float32), the data and the model that produced them.

    Attributes
    ----------
    dataset : Dataset
        Restricted to the kinds of data the run fitted.
    model : DualEvalModel
        The recorded specification.
    theta : numpy.ndarray, shape (D, M)
        The overall abilities.
    items : dict of str to numpy.ndarray or None
        ``b``, ``a``, ``c``, ``d`` of shape (D, Q), None where the specification has none
        (``a`` under 1pl, everything under Bradley-Terry).
    gamma, sigma : numpy.ndarray of shape (D,), or None
    use_static : bool
        Whether the static cells were fitted.
    arena : {"pairs", "bt", "reward"} or None
        The arena likelihood fitted (None without arena data).
    decisive : Decisive or None
        The decisive pairs (pairs likelihood and Bradley-Terry).
    abilities : AbilityMap or None
        The abilities the items see instead of ``theta`` (None: one ability per model),
        with the draws first: per item domain, a table (D, M, K + 1) and each item's
        column (Q,); per dimension, the abilities (D, M, K) and loadings (D, Q, K). See
        :meth:`ability`.
    facets : dict or None
        With several judges or style covariates: the draws of ``gamma_judge`` (D, J),
        ``judge_bias`` (D, J, F) and ``style_coef`` (D, C, J) present in the run, and
        ``arena`` (:class:`~bayes_dualeval.model.facets.ArenaFacets`, each cell's judge,
        family and standardised covariates). See :meth:`arena_scores`.
    graders : tuple or None
        With static labels from several graders (:mod:`bayes_dualeval.model.graders`):
        the draws of ``grader_severity`` (D, G) and the graders' names (G,). Static
        cells' linear predictors take their grader's shift (:meth:`eta`, ``grader``).
    dif : tuple or None
        With differential item functioning (:mod:`bayes_dualeval.model.dif`): the draws
        of ``dif_shift`` (D, Q, G), each model's group (M,), -1 for none, and the groups'
        names (G,). Every cell's linear predictor in :meth:`eta` takes its shift.
    """

    dataset: Dataset
    model: DualEvalModel
    theta: np.ndarray
    items: dict
    gamma: np.ndarray | None
    sigma: np.ndarray | None
    use_static: bool
    arena: str | None
    decisive: Decisive | None
    abilities: AbilityMap | None = None
    facets: dict | None = None
    graders: tuple | None = None
    dif: tuple | None = None

    def arena_scores(self, d: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The arena cells' scores under draws ``d``, from their probabilities ``p`` (D, R).

        ``gamma (p - 1/2)`` without facets; with them :func:`~bayes_dualeval.model.facets.scores`
        of every draw at once (judge discriminations, family biases and style).
        """
        if self.facets is None:
            return self.model.arena.score(p, self.gamma[d][:, None])
        cells = self.facets["arena"]
        draws = {name: self.facets[name][d] for name in VALUES if name in self.facets}
        batch = Facets.from_draws(draws, self.gamma[d][:, None])  # every draw at once
        family = cells.family[self.dataset.arena_model]
        return np.asarray(scores(p, batch, cells.judge, family, cells.style), np.float32)

    @property
    def n_draws(self) -> int:
        """Number of posterior draws (chains pooled)."""
        return self.theta.shape[0]

    @property
    def link(self) -> links.Link:
        """The run's item response function."""
        return self.model.link

    def _map(self, k: int) -> AbilityMap:
        table, columns = self.abilities
        return AbilityMap(table[k], columns if columns.ndim == 1 else columns[k])

    def ability(self, k: int, model: np.ndarray, item: np.ndarray) -> np.ndarray:
        """The ability draw ``k`` gives each cell ``(model, item)``.

        Its domain's, if any, or its loadings' combination of the model's abilities per
        dimension.
        """
        if self.abilities is None:
            return self.theta[k].take(model)
        return self._map(k).at(model, item)

    def ability_mean(self, model: np.ndarray, item: np.ndarray) -> np.ndarray:
        """Posterior mean ability of each cell ``(model, item)`` (float64; see :meth:`ability`)."""
        if self.abilities is None:
            return self.theta.mean(axis=0, dtype=np.float64)[model]
        table, columns = self.abilities
        if columns.ndim == 1:  # a lookup: the mean of the table is enough
            return AbilityMap(table.mean(axis=0, dtype=np.float64), columns).at(model, item)
        total = np.zeros(len(model))
        for k in range(self.n_draws):
            total += self._map(k).at(model, item)
        return total / self.n_draws

    def _item(self, name: str, k: int, item: np.ndarray, runs: tuple | None):
        """Item parameter ``name`` of draw ``k`` at the cells' items (None if absent)."""
        values = self.items[name]
        if values is None:
            return None
        if runs is None:
            return values[k].take(item)
        return values[k, runs[0]].repeat(runs[1])

    def eta(
        self,
        d: np.ndarray,
        model: np.ndarray,
        item: np.ndarray,
        runs: tuple | None = None,
        grader: np.ndarray | None = None,
    ) -> np.ndarray:
        """Linear predictor :func:`links.eta` of cells, shape (len(d), len(model)) float32.

        ``runs``, ``(items, lengths)`` when the cells come in runs of one item each (as
        ``item == np.repeat(items, lengths)``), lets the item parameters be repeated
        instead of gathered. ``grader``: static cells' graders (:meth:`static_graders`),
        whose severities shift them (:func:`bayes_dualeval.model.graders.shift`).
        """
        out = np.empty((len(d), len(model)), dtype=np.float32)
        severity = None if self.graders is None or grader is None else self.graders[0]
        for row, k in zip(out, d, strict=True):
            b, a = (self._item(name, k, item, runs) for name in ("b", "a"))
            eta = links.eta(self.ability(k, model, item), b, a)
            row[:] = graders.shift(eta, None if severity is None else severity[k], grader)
            if self.dif is not None:  # the items' DIF for the models' groups
                row[:] = dif.shift(row, self.dif[0][k], item, self.dif[1][model])
        return out

    def static_graders(self, judge: np.ndarray | None = None) -> np.ndarray | None:
        """Each static cell's grader, from its judge (index into the dataset's judges).

        ``judge`` None: the fitted dataset's static cells. None without several graders.
        """
        if self.graders is None:
            return None
        ds = self.dataset
        judge = ds.static_judge if judge is None else judge
        names = np.asarray(ds.judges)[np.asarray(judge, np.int64)].astype(str)
        return np.searchsorted(self.graders[1], names).astype(np.int64)

    def label_logodds(
        self,
        d: np.ndarray,
        model: np.ndarray,
        item: np.ndarray,
        sign: np.ndarray,
        runs=None,
        grader: np.ndarray | None = None,
    ) -> np.ndarray:
        """Log-odds ``log P(y) - log P(1 - y)`` of the observed labels ``y`` of static cells.

        ``sign`` is +1 for a success and -1 for a failure (float32). Shape (len(d),
        len(model)) float32. Without asymptotes this is ``sign * eta``; under 3PL/4PL it
        comes from :func:`links.log_probabilities` with the items' ``c`` and ``d``.
        ``grader`` as for :meth:`eta`.
        """
        z = self.eta(d, model, item, runs, grader)
        if self.link.asymptotes:
            with np.errstate(divide="ignore"):
                for row, k in zip(z, d, strict=True):
                    c, top = (self._item(name, k, item, runs) for name in ("c", "d"))
                    log_p, log_q = links.log_probabilities(row, c, top)
                    np.subtract(log_p, log_q, out=row)
        z *= sign
        return z

    def pair_prob(self, d: np.ndarray) -> np.ndarray:
        """Win probability of the first side of every decisive pair, (P, len(d)) float32.

        :func:`~bayes_dualeval.model.arena_term.win_probability` of the two sides' scores:
        the abilities under Bradley-Terry, else the arena cells' :meth:`arena_scores`.
        """
        dec = self.decisive
        if self.arena == "bt":
            s = np.ascontiguousarray(self.theta[d].T)
            return win_probability(s[dec.i], s[dec.j])
        ds = self.dataset
        p = links.probability(self.eta(d, ds.arena_model, ds.arena_item))
        s = np.ascontiguousarray(self.arena_scores(d, p).T)
        return win_probability(s[dec.row_i], s[dec.row_j])


def _var(idata, name: str) -> np.ndarray | None:
    if name not in idata.posterior:
        return None
    return np.asarray(draws_of(idata, name), dtype=np.float32)


def _fitted_dataset(dataset: Dataset, model: DualEvalModel) -> tuple[Dataset, bool, bool]:
    """The dataset restricted to the kinds the run's specification fitted, and those kinds."""
    try:
        fitted = model.fitted_data(dataset)
    except ConfigError as exc:
        raise InputError(f"{exc}: pass the dataset the run was fitted to") from exc
    return (fitted, *model.kinds(fitted))


def _check_labels(idata, dataset: Dataset) -> None:
    """The posterior's models, items and observed data must be the dataset's."""
    post = idata.posterior
    wrong = "the posterior's {} do not match the dataset's: pass the dataset the run was "
    wrong += "fitted to (FitResult.dataset)"
    if not np.array_equal(np.asarray(post["model"].values).astype(str), dataset.models):
        raise InputError(wrong.format("models"))
    if "item" in post.coords and not np.array_equal(
        np.asarray(post["item"].values).astype(str), dataset.items
    ):
        raise InputError(wrong.format("items"))
    if "observed_data" in idata.groups():
        observed = idata.observed_data
        for name, values in (("static_y", dataset.static_y), ("arena_z", dataset.arena_z)):
            if name in observed and observed[name].size != len(values):
                raise InputError(f"the run's observed {name} does not match the dataset")


def resolve(idata, dataset: Dataset, pairs: Pairs | None, bb_ratio, tie_ratio) -> FittedRun:
    """Read the draws and the specification, restrict the dataset and check they match.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior; ``posterior.attrs["model_config"]`` names its specification.
    dataset : Dataset
        The data the run was fitted to (it may hold kinds the run did not fit).
    pairs : Pairs, optional
        The run's distilled pairs; distilled with ``bb_ratio`` and ``tie_ratio`` (None:
        the specification's) when not given.

    Raises
    ------
    InputError
        When the posterior does not record its specification, lacks a variable its
        specification has, or does not belong to ``dataset``.
    """
    model = DualEvalModel.from_idata(idata)
    config = model.config
    dataset, use_static, use_arena = _fitted_dataset(dataset, model)
    _check_labels(idata, dataset)
    items = {}
    for name in links.ITEM_PARAMETERS:
        items[name] = _var(idata, name) if name in model.item_sites else None
        if name in model.item_sites and items[name] is None:
            raise InputError(
                f"the posterior has no {name!r}, which its specification ({config.name}: "
                f"mode {config.mode}, irt {config.irt}) samples"
            )
    arena = model.arena_term if use_arena else None
    decisive = None
    if arena in ("pairs", "bt"):
        if pairs is None:
            pairs = distill(
                dataset,
                bb_ratio=config.bb_ratio if bb_ratio is None else bb_ratio,
                tie_ratio=config.tie_ratio if tie_ratio is None else tie_ratio,
            )
        decisive = Decisive.of(pairs, len(dataset.arena_z))
    return FittedRun(
        dataset=dataset,
        model=model,
        theta=_var(idata, "theta"),
        items=items,
        gamma=_var(idata, "gamma"),
        sigma=_var(idata, "sigma"),
        use_static=use_static,
        arena=arena,
        decisive=decisive,
        abilities=_ability_map(idata, dataset),
        facets=_facets(idata, dataset) if arena == "pairs" else None,
        graders=_graders(idata, dataset) if use_static else None,
        dif=_dif(idata, dataset, config) if use_static else None,
    )


def _dif(idata, dataset: Dataset, config) -> tuple | None:
    """The DIF shift draws, each model's group and the groups' names, or None."""
    shifts = _var(idata, dif.SITE)
    if shifts is None:
        return None
    names, group = dif.model_groups(dataset, config.dif)
    return shifts, group.astype(np.int64), names


def _graders(idata, dataset: Dataset) -> tuple | None:
    """The graders' severity draws and names (see FittedRun), or None with one grader."""
    severity = _var(idata, graders.SITE)
    if severity is None:
        return None
    return severity, graders.graders(dataset)[0]


def _facets(idata, dataset: Dataset) -> dict | None:
    """The run's facet draws and its arena cells' facets (see FittedRun), or None."""
    cells = arena_facets(dataset, True)
    if not cells.present:
        return None
    draws = {name: _var(idata, name) for name in VALUES if name in idata.posterior}
    return {**draws, "arena": cells}


def _ability_map(idata, dataset: Dataset) -> AbilityMap | None:
    """The abilities per domain or dimension of a run's draws, or None (see FittedRun)."""
    if "theta_dims" in idata.posterior:
        return AbilityMap(_var(idata, "theta_dims"), _var(idata, "loading"))
    if "theta_domain" in idata.posterior:
        return domain_map(_var(idata, "theta"), _var(idata, "theta_domain"), dataset.domain_index)
    return None
