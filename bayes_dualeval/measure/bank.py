"""A frozen run as a bank of calibrated items.

:meth:`Bank.from_run` reads a run folder (:func:`bayes_dualeval.runs.load.load_run` and
:func:`~bayes_dualeval.runs.load.stored_dataset`)
and keeps what measuring a new model needs, with nothing re-derived: the specification
(:class:`~bayes_dualeval.model.spec.DualEvalModel`: link, item sites, arena term), evenly
spaced posterior draws of the item parameters, of ``gamma`` and of the bank models'
abilities, the reward normalisation the fit applied (per source: the mean and standard
deviation of the bank's raw rewards) and the tie and both-bad thresholds of its pair
distillation. :func:`bayes_dualeval.measure.responses.responses` reads new evaluation
files into the same item ids and normalises their rewards with the bank's normalisation
(:func:`norm_unit`).

A bank written by another version of bayes-dualeval is read when it stores what this
version reads, and refused (naming the missing field and the version) when not: the
recorded specification (``posterior.attrs``), the data (``observed_data`` and
``constant_data``, the reward normalisation in ``diagnostics.json``), the posterior sites
its likelihood reads, and the sampler and convergence check (``diagnostics.json``'s
``sampler`` and ``convergence``, without which the bank counts as approximate).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval import __version__
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.measure.approximate import check_posterior
from bayes_dualeval.model import graders, links
from bayes_dualeval.model.facets import ArenaFacets, arena_facets
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.summaries import draws_of

#: Posterior draws of the bank kept for measuring (evenly spaced over the chains).
BANK_DRAWS = 1000
#: The item prior's group hyperparameters, kept when the posterior has them.
HYPERPARAMETERS = ("mu_b", "sigma_b", "mu_log_a", "sigma_log_a", "tau_beta_b")


@dataclass(frozen=True, eq=False)
class Bank:
    """Calibrated items and bank models of a fitted run, at evenly spaced posterior draws.

    Attributes
    ----------
    run_dir : Path
    model : DualEvalModel
        The run's recorded specification.
    dataset : Dataset
        The data the bank was fitted to.
    items : pandas.DataFrame
        One row per bank item: ``item, kind, source, domain, dataset`` (``dataset`` the
        benchmark of a static item, empty for arena prompts), in the bank's item order.
    draws : dict of numpy.ndarray
        ``b``, ``a``, ``c``, ``d`` (shape (D, Q); None where the link has none),
        ``theta`` (raw abilities of the bank models, (D, M)), ``theta_centred`` (on the
        leaderboard's scale), ``gamma`` ((D,), 1 where the model has none) and ``sigma``;
        float32, as the sampler drew them (the grid computations run in float32, their
        sums and normalisations in float64).
    reward_centre, reward_scale : dict
        Per arena source, the mean and standard deviation the fit's normalisation used
        (one entry ``""`` when rewards were normalised globally).
    tie_threshold, bb_threshold : numpy.ndarray, shape (n_judges,)
        Each judge's ``|dz|`` and ``max(z)`` cut-offs of the bank's pair distillation
        (index ``dataset.judges``; ``-inf`` where none; a plain number applies to every
        judge).
    facets : ArenaFacets or None
        How the bank's arena cells meet its judges, families and style covariates
        (:func:`~bayes_dualeval.model.facets.arena_facets`), None without facets; their
        draws (``gamma_judge``, ``judge_bias``, ``style_coef``) are then in ``draws``.
        The item prior's hyperparameters (:data:`HYPERPARAMETERS`, shape (D, groups))
        are in ``draws`` too where the posterior has them (None otherwise), and so are
        the graders' severities of static labels (``grader_severity``, (D, G), with two
        graders or more; :mod:`bayes_dualeval.model.graders`).
    approximate : str
        Why the bank is not a converged NUTS posterior (``""`` when it is).
    version : str
        The bayes-dualeval version that wrote the bank.
    """

    run_dir: Path
    model: DualEvalModel
    dataset: object
    items: pd.DataFrame
    draws: dict
    reward_centre: dict
    reward_scale: dict
    tie_threshold: np.ndarray
    bb_threshold: np.ndarray
    facets: ArenaFacets | None = None
    approximate: str = ""
    version: str = __version__

    @classmethod
    def from_run(
        cls, run_dir: str | Path, *, max_draws: int = BANK_DRAWS, allow_approximate: bool = False
    ) -> Bank:
        """Read a run folder as a bank.

        Parameters
        ----------
        run_dir : str or Path
        max_draws : int
            Posterior draws kept (evenly spaced).
        allow_approximate : bool
            Accept a bank that is not a converged NUTS posterior
            (:func:`~bayes_dualeval.measure.approximate.approximation`);
            its reason is then kept in :attr:`approximate`, which every output repeats.

        Raises
        ------
        InputError
            When the folder is missing or not a readable run (also one written by another
            version of bayes-dualeval that lacks a field this one reads: see the module),
            is not a converged NUTS posterior (unless
            ``allow_approximate``), holds a point estimate instead of posterior draws
            (a MAP run), or its posterior lacks a site its specification's likelihood
            reads.
        """
        from bayes_dualeval.data.distill import distill
        from bayes_dualeval.runs.load import load_run, stored_dataset

        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise InputError(f"bank {run_dir} does not exist or is not a folder")
        written = ""
        try:
            idata, diagnostics = load_run(run_dir)
            written = str(diagnostics.get("versions", {}).get("bayes_dualeval") or "unknown")
            model = DualEvalModel.from_idata(idata)
            dataset = model.fitted_data(stored_dataset(idata, diagnostics))
        except InputError as exc:
            text = str(exc) if str(run_dir) in str(exc) else f"bank {run_dir}: {exc}"
            raise InputError(text + _older(written)) from None
        except Exception as exc:  # a truncated or foreign netCDF file fails in h5py
            raise InputError(
                f"bank {run_dir}: cannot read posterior.nc ({exc}){_older(written)}"
            ) from None
        if model.domain_abilities or model.dims > 1:
            kind = (
                "an ability per item domain (abilities 'domain')"
                if model.domain_abilities
                else f"{model.dims} ability dimensions (dims {model.dims})"
            )
            raise InputError(
                f"bank {run_dir} has {kind}; scoring, short forms and adaptive tests "
                "measure one ability: fit the bank with abilities 'single' and dims 1"
            )
        facets = arena_facets(dataset, len(dataset.arena_z) > 0)
        facets = facets if facets.present else None
        n_draws = idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"]
        if n_draws < 2:
            raise InputError(
                f"bank {run_dir} holds a point estimate ({_sampler(diagnostics)}), not "
                "posterior draws: fit the bank with the nuts sampler"
            )
        # what the bank cannot be used for at all is said first; this may be allowed
        approximate = check_posterior(run_dir, diagnostics, allow_approximate)
        keep = evenly_spaced(n_draws, max_draws)
        draws = {}
        arena = model.arena if len(dataset.arena_z) else None
        needed = {
            "theta": True,
            "theta_centred": True,
            **{name: name in model.item_sites for name in links.ITEM_PARAMETERS},
            "gamma": arena is not None and arena.has_items,
            "sigma": arena is not None and arena.kind == "reward",
            # the facets' values the arena term reads (the level term's severities aside)
            "gamma_judge": facets is not None and facets.n_judges > 1,
            "judge_bias": facets is not None and facets.n_families > 0,
            "style_coef": facets is not None and facets.style.shape[1] > 0,
            # the graders' severities on static labels, read with each new label's grader
            graders.SITE: len(graders.graders(dataset)[0]) > 1,
            # the item prior's hyperparameters, which calibration reads (when hierarchical)
            **{name: False for name in HYPERPARAMETERS},
        }
        for name, read in needed.items():
            if name in idata.posterior:
                draws[name] = np.asarray(draws_of(idata, name), np.float32)[keep]
            elif read:
                raise InputError(f"bank {run_dir}: the posterior has no {name!r}{_older(written)}")
            else:
                draws[name] = None
        centre, scale = _reward_normalisation(dataset)
        pairs, no_cutoff = None, np.full(max(len(dataset.judges), 1), -np.inf)
        if len(dataset.arena_z) and model.arena_term != "reward":
            config = model.config
            pairs = distill(dataset, bb_ratio=config.bb_ratio, tie_ratio=config.tie_ratio)
        return cls(
            run_dir=run_dir,
            model=model,
            dataset=dataset,
            items=_item_table(dataset),
            draws=draws,
            reward_centre=centre,
            reward_scale=scale,
            tie_threshold=no_cutoff if pairs is None else pairs.tie_threshold,
            bb_threshold=no_cutoff if pairs is None else pairs.bb_threshold,
            facets=facets,
            approximate=approximate,
            version=written,
        )

    def thin(self, n: int) -> Bank:
        """The same bank at ``n`` of its draws (evenly spaced; itself when it has fewer)."""
        if n >= self.n_draws:
            return self
        keep = evenly_spaced(self.n_draws, n)
        draws = {k: None if v is None else v[keep] for k, v in self.draws.items()}
        return dataclasses.replace(self, draws=draws)

    @property
    def n_draws(self) -> int:
        """Number of bank draws kept."""
        return len(self.draws["theta"])

    @property
    def models(self) -> np.ndarray:
        """The bank models' labels."""
        return self.dataset.models

    @property
    def graders(self) -> np.ndarray:
        """The graders of the bank's static labels (one empty name with one grader)."""
        return graders.graders(self.dataset)[0]

    def parameters(self, rows=slice(None), items=None, grader=None) -> dict:
        """Item parameter draws ``b, a, c, d`` of draws ``rows`` and items ``items``.

        ``grader`` (an index into :attr:`graders`, or one per item of ``items``) gives
        labels by that grader: ``b`` then carries its severity
        (:func:`~bayes_dualeval.model.graders.difficulty`). None, or a bank with one
        grader, gives the items' own difficulties: labels of the average grader.
        """
        out = {}
        for name in links.ITEM_PARAMETERS:
            value = self.draws[name] if name in self.model.item_sites else None
            if value is not None:
                value = value[rows]
                if items is not None:
                    value = value[:, items]
            out[name] = value
        severity = self.draws.get(graders.SITE)
        if grader is not None and severity is not None:
            by_grader = severity[rows][:, grader]
            if by_grader.ndim < out["b"].ndim:  # one grader for every item
                by_grader = by_grader[:, None]
            out["b"] = graders.difficulty(out["b"], out["a"], by_grader)
        return out


def shift(bank: Bank, rows=slice(None)) -> np.ndarray:
    """The bank models' mean raw ability in each draw: the leaderboard's zero."""
    return bank.draws["theta"][rows].mean(axis=1)


def _older(written: str) -> str:
    """What a read failure adds when another version of bayes-dualeval wrote the bank."""
    if not written or written == __version__:
        return ""
    return (
        f" (written by bayes-dualeval {written}, this is {__version__}: that version did not "
        "store what this one reads; fit the bank again)"
    )


def _sampler(diagnostics: dict) -> str:
    return str(diagnostics.get("sampler", {}).get("sampler", "a point estimate"))


def _item_table(dataset) -> pd.DataFrame:
    from bayes_dualeval.core.item_ids import benchmark_of

    kind = np.asarray(dataset.item_kind, dtype=str)
    bench = np.where(kind == "static", benchmark_of(dataset.items), "")
    return pd.DataFrame(
        {
            "item": dataset.items,
            "kind": kind,
            "source": dataset.item_source,
            "domain": dataset.item_domain,
            "dataset": bench,
        }
    )


def _reward_normalisation(dataset) -> tuple[dict, dict]:
    """Per unit of normalisation, the mean and sd that turned the bank's raw rewards into ``z``.

    The unit (:func:`norm_unit`) is the source, the source and judge (``reward_norm``
    ``judge``), or one for every reward (``global``).
    """
    if len(dataset.arena_reward) == 0:
        return {}, {}
    judge = np.asarray(dataset.judges)[dataset.arena_judge]
    source = norm_unit(dataset, np.asarray(dataset.item_source)[dataset.arena_item], judge)
    frame = pd.DataFrame({"source": source, "r": dataset.arena_reward})
    stats = frame.groupby("source")["r"].agg(["mean", lambda r: float(np.std(r))])
    stats.columns = ["mean", "sd"]
    return stats["mean"].to_dict(), stats["sd"].to_dict()


def norm_unit(dataset, source: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """The reward normalisation's unit of each reward, as the fit's tables form it."""
    if dataset.reward_norm == "global":
        return np.full(len(source), "")
    if dataset.reward_norm == "judge":
        return np.char.add(np.char.add(source.astype(str), "\x1f"), judge.astype(str))
    return source.astype(str)
