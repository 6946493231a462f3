"""One fit from data to a run folder: the Python API behind ``bayes-dualeval fit``.

A run folder is written so that a failed or interrupted run never leaves a half-written
file or touches an earlier run: everything is first written to a hidden staging folder
beside the destination, which is renamed into place only when complete.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayes_dualeval import __version__
from bayes_dualeval.core import atomic
from bayes_dualeval.core.errors import DataWarning
from bayes_dualeval.core.fields import setting
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import Pairs
from bayes_dualeval.inference.compiled import release_if_crowded
from bayes_dualeval.inference.sampling import check_supported, sample
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.spec import DualEvalModel

if TYPE_CHECKING:
    import pandas as pd

    from bayes_dualeval.checks import PPC
    from bayes_dualeval.posterior.convergence import Convergence

POSTERIOR_FILE = "posterior.nc"
DIAGNOSTICS_FILE = "diagnostics.json"
#: Floating-point variables larger than this are written to ``posterior.nc`` uncompressed.
COMPRESS_MAX_BYTES = 4 * 2**20


@dataclass
class FitResult:
    """Everything a fit produced: the one in-memory result the run folder is written from.

    :func:`fit` fills the first six attributes (and ``parameters`` for NUTS);
    :func:`bayes_dualeval.runs.output.tabulate` adds the checks and tables at a level
    ``ci``; the report and the CSV files are rendered from them. A saved run is read
    back into the same object by :func:`bayes_dualeval.runs.load.load_result`.

    Attributes
    ----------
    dataset : Dataset
        The data as fitted (restricted to the kinds the mode uses).
    pairs : Pairs or None
        The distilled arena pairs, when the model used pairs (distilled once per run).
    config : ModelConfig
        The specification.
    settings : SamplerSettings
    idata : arviz.InferenceData
    diagnostics : dict
        The content of ``diagnostics.json``.
    parameters : pandas.DataFrame or None
        R-hat and bulk and tail ESS of every posterior scalar
        (:func:`~bayes_dualeval.posterior.diagnostics.per_parameter`); None unless NUTS.
    ci : float or None
        Level of the checks and tables (None until they are computed).
    ppc : PPC or None
        The posterior predictive checks at level ``ci``.
    tables : dict of str to pandas.DataFrame
        ``leaderboard``, ``pairwise``, ``items`` and ``anomalies`` at level ``ci``.
    holdout : pandas.DataFrame or None
        With ``fit(..., holdout=F)``: the held-out cells and their predictions
        (:func:`~bayes_dualeval.checks.holdout.holdout_scores`; ``holdout.csv``), their
        scores in ``diagnostics["holdout"]``.
    adaptation : dict or None
        NUTS: what the chains adapted (``adaptation.npz``, :mod:`bayes_dualeval.runs.warm_start`).
    """

    dataset: Dataset
    pairs: Pairs | None
    config: ModelConfig
    settings: SamplerSettings
    idata: object
    diagnostics: dict = field(default_factory=dict)
    parameters: pd.DataFrame | None = None
    ci: float | None = None
    ppc: PPC | None = None
    tables: dict = field(default_factory=dict)
    holdout: pd.DataFrame | None = None
    adaptation: dict | None = None

    @property
    def converged(self) -> bool | None:
        """True, False, or None when the sampler has no convergence diagnostics."""
        return self.diagnostics["convergence"]["converged"]

    @property
    def convergence(self) -> Convergence:
        """The convergence check recorded in :attr:`diagnostics`, as its typed result."""
        from bayes_dualeval.posterior.convergence import Convergence

        return Convergence.from_dict(self.diagnostics.get("convergence", {}))


def versions() -> dict:
    """Versions of Python and the numerical stack."""
    import arviz
    import jax
    import jaxlib
    import numpyro
    import pandas
    import xarray

    return {
        "bayes_dualeval": __version__,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpyro": numpyro.__version__,
        "arviz": arviz.__version__,
        "numpy": np.__version__,
        "pandas": pandas.__version__,
        "xarray": xarray.__version__,
        "platform": platform.platform(),
        "devices": [str(d) for d in jax.devices()],
    }


def fit(
    dataset: Dataset,
    config: ModelConfig | None = None,
    settings: SamplerSettings | None = None,
    *,
    timings: dict | None = None,
    holdout: float = 0.0,
    holdout_seed: int = 0,
    features: pd.DataFrame | None = None,
    features_name: str = "features",
    warm_start: str | Path | None = None,
) -> FitResult:
    """Fit the model to a dataset.

    Parameters
    ----------
    dataset : Dataset
    config : ModelConfig, optional
        Defaults to the ``dualeval-2pl`` specification.
    settings : SamplerSettings, optional
        Defaults to NUTS, 4 chains, 400 warm-up and 1000 kept draws.
    timings : dict, optional
        Earlier timings (e.g. ``data``) to record alongside this fit's.
    holdout : float
        Share of the cells to leave out of the fit and predict afterwards (0: none;
        :func:`~bayes_dualeval.data.holdout.hold_out`, split seeded by ``holdout_seed``,
        not by the sampler's seed, so runs of other models hold out the same cells).
    holdout_seed : int
    features : pandas.DataFrame, optional
        Item features (:func:`~bayes_dualeval.data.features.read_features`): a regression
        prior on ``b`` and ``log a`` (:func:`~bayes_dualeval.model.priors.feature_shift`),
        and the items known only by their features added to the fit.
    features_name : str
        What the features are called in messages and ``diagnostics.json`` (their file).
    warm_start : str or Path, optional
        A NUTS run folder of the same specification: start from its adapted metric, step
        size and posterior means with a short warm-up, mapped by label onto these data
        (which may add models or items; :mod:`bayes_dualeval.runs.warm_start`). If the
        draws then fail the convergence check, the fit is run again with the full warm-up;
        ``diagnostics["warm_start"]`` says which happened.

    Returns
    -------
    FitResult

    Examples
    --------
    >>> from bayes_dualeval import load
    >>> from bayes_dualeval.inference.settings import SamplerSettings
    >>> from bayes_dualeval.runs.fit import fit
    >>> result = fit(load("data/"), settings=SamplerSettings(sampler="map"))  # doctest: +SKIP
    >>> result.idata.posterior["theta_centred"]  # doctest: +SKIP
    """
    from bayes_dualeval.model.config import load_spec

    config = config or load_spec("dualeval-2pl")
    settings = settings or SamplerSettings()
    asked = dict(dataset=dataset, config=config, settings=settings, timings=timings,
                 holdout=holdout, holdout_seed=holdout_seed, features=features,
                 features_name=features_name)  # fmt: skip
    check_supported(config, settings)
    # a process that fits many models in turn would otherwise run out of memory maps
    release_if_crowded()
    timings = dict(timings or {})
    dataset = DualEvalModel(config).fitted_data(dataset)
    if config.dims > 1 and len(dataset.domains) < 2:
        warnings.warn(
            f"{setting('dims', config.dims)} with {len(dataset.domains)} item domain(s): every "
            "item's loadings then share one prior profile, and on simulated two-dimensional "
            "data without domains such a fit found only one dimension (docs/validation.md, "
            "section 8.1); give the items a 'domain' or 'category' field",
            DataWarning,
            stacklevel=2,
        )
    held = None
    if holdout:
        from bayes_dualeval.data.holdout import hold_out

        dataset, held = hold_out(dataset, holdout, holdout_seed)
    design = None
    if features is not None:
        from bayes_dualeval.data.features import design as feature_design

        dataset, design = feature_design(features, dataset, where=features_name)
    start = time.perf_counter()
    centred = settings.centring if settings.sampler == "nuts" else "none"
    inputs, pairs = build_inputs(dataset, config, centred=centred, features=design)
    timings["distill"] = round(time.perf_counter() - start, 3)
    warm = None
    if warm_start is not None:  # before the arena weight's pilot: a bad run fails at once
        from bayes_dualeval.runs.warm_start import prepare

        warm, inputs = prepare(warm_start, dataset, inputs, config, settings, design)
    config, arena_weight = _arena_weight(inputs, config, settings, timings)

    def until(draws):
        from bayes_dualeval.posterior.diagnostics import draws_verdict

        depth = draws.info.get("max_tree_depth", settings.max_tree_depth)
        return draws_verdict(draws.samples, draws.stats, depth)

    draws = sample(inputs, config, settings, until=until, warm=warm)
    timings.update(draws.timings)
    # imported here, not at the top: arviz takes seconds to import, and the command line
    # imports it in the background while the sampler runs
    from bayes_dualeval.posterior.diagnostics import convergence, per_parameter
    from bayes_dualeval.posterior.idata import to_inference_data

    start = time.perf_counter()
    idata = to_inference_data(draws, dataset, inputs, config, features=design)
    timings["posterior"] = round(time.perf_counter() - start, 3)
    parameters = per_parameter(idata) if settings.sampler == "nuts" else None
    # the cap of the final round: a restart after divergences deepens it
    depth = draws.info.get("max_tree_depth", settings.max_tree_depth)
    conv = convergence(
        idata,
        settings.sampler,
        depth,
        table=parameters,
        target_accept=draws.info.get("target_accept", settings.target_accept),
    )
    if "interrupted_round" in draws.info:
        conv = _interrupted(conv, draws.info)
    info = {k: v for k, v in draws.info.items() if k != "losses"}
    diagnostics = {
        **conv.headline(),
        "convergence": conv.to_dict(),
        "sampler": settings.to_dict(),
        "sampler_info": info,
        "config": config.to_dict(),
        "data": dataset.summary_dict(),
        "pairs": pairs.summary_dict() if pairs is not None else None,
        "versions": versions(),
        "timings": timings,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    if arena_weight is not None:
        diagnostics["arena_weight"] = arena_weight
    if "losses" in draws.info:
        diagnostics["sampler_info"]["loss_trace"] = _thin(draws.info["losses"], 200)
    if design is not None:
        diagnostics["features"] = design.report
    if config.dims > 1:
        from bayes_dualeval.posterior.dimension_tables import dimension_support

        diagnostics["dimensions"] = dimension_support(idata)
    result = FitResult(dataset, pairs, config, settings, idata, diagnostics, parameters)
    result.adaptation = draws.adaptation
    if warm is not None:
        from bayes_dualeval.runs.warm_start import fallback

        diagnostics["warm_start"] = dict(warm.record, used=True)
        if not conv.converged:  # the full warm-up instead, said in its diagnostics
            return fallback(fit(**asked), diagnostics, conv)
    if held is not None:
        from bayes_dualeval.checks.holdout import holdout_scores

        start = time.perf_counter()
        diagnostics["holdout"], result.holdout = holdout_scores(idata, dataset, pairs, held)
        timings["holdout"] = round(time.perf_counter() - start, 3)
    return result


def _arena_weight(inputs, config: ModelConfig, settings: SamplerSettings, timings: dict):
    """``config`` with its arena weight calibrated from ``inputs``, and the record of it.

    The record (``diagnostics.json["arena_weight"]``) is None unless the specification asks
    for a calibrated weight (:func:`bayes_dualeval.inference.arena_pilot.calibrate`).
    """
    if config.arena_weight != "calibrated":
        return config, None
    from bayes_dualeval.inference.arena_pilot import calibrate

    start = time.perf_counter()
    config, weight = calibrate(inputs, config, settings.seed)
    timings["arena_weight"] = round(time.perf_counter() - start, 3)
    term = DualEvalModel(config).arena
    record = {
        "setting": "calibrated",
        "lambda_arena": config.lambda_arena,
        "factor": term.factor,
        "weight": term.weight,
    }
    if weight is None:
        record["note"] = "no arena pairs in this fit: the weight is lambda_arena"
    else:
        record.update({k: v for k, v in weight.to_dict().items() if k != "factor"})
    return config, record


def _interrupted(conv: Convergence, info: dict) -> Convergence:
    """``conv``, saying that the user stopped the sampler after ``info["rounds"]`` rounds.

    The draws kept are judged like any others: if they pass the check, the interrupt is
    a note; if not, it heads the problems, since more rounds might have fixed them. A round
    cut short (``info["interrupted_draws"]``: its draws per chain kept and asked for) is
    said with what it kept.
    """
    said = f"interrupted in round {info['interrupted_round']}: the run holds "
    if "interrupted_draws" in info:
        kept, asked = info["interrupted_draws"]
        earlier = info["rounds"] - 1
        said += f"{kept} of that round's {asked} draws per chain"
        said += f" and the draws of {earlier} earlier round(s)" if earlier else ""
    else:
        said += f"the draws of {info['rounds']} finished round(s)"
    if conv.converged:
        return replace(conv, notes=(*conv.notes, said))
    problem = f"{said}; more rounds might have converged"
    return replace(conv, problems=(problem, *conv.problems), converged=False)


def _thin(values: np.ndarray, n: int) -> list:
    idx = evenly_spaced(len(values), n)
    return [[int(i), float(values[i])] for i in idx]


def default_run_dir(sampler: str, root: str | Path = "runs") -> Path:
    """A new folder name under ``root``: ``YYYYmmdd-HHMMSS-<sampler>`` (suffixed if taken)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{stamp}-{sampler}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


def write_run(result: FitResult, out: str | Path, extra=None) -> Path:
    """Write ``posterior.nc`` and ``diagnostics.json`` (and ``extra``) into a new folder.

    ``posterior.nc`` keeps every draw up to a bound, evenly thinned draws beyond it
    (:func:`~bayes_dualeval.posterior.stored.stored_posterior`; then
    ``diagnostics["posterior_file"]`` says so); ``result`` keeps them all.

    Parameters
    ----------
    result : FitResult
    out : str or Path
        Destination folder; must not exist or be empty.
    extra : callable, optional
        ``extra(staging_dir, result)`` writes further files into the staging folder
        before it is moved into place.

    Returns
    -------
    Path
        The run folder.
    """
    from bayes_dualeval.posterior.stored import stored_posterior

    with atomic.staged_folder(out) as staging:
        start = time.perf_counter()
        stored, thinned = stored_posterior(result.idata)
        if thinned:
            result.diagnostics["posterior_file"] = thinned
        write_netcdf(stored, staging / POSTERIOR_FILE)
        if result.adaptation is not None:
            from bayes_dualeval.runs.warm_start import save

            save(staging, result)
        if extra is not None:
            extra(staging, result)
        result.diagnostics["timings"]["write"] = round(time.perf_counter() - start, 3)
        write_diagnostics(staging, result.diagnostics)
    return Path(out)


def _compress(var) -> bool:
    kind = var.dtype.kind
    return kind in "biu" or (kind in "fc" and var.nbytes <= COMPRESS_MAX_BYTES)


def write_netcdf(idata, path: str | Path) -> Path:
    """Write an InferenceData to netCDF as :meth:`arviz.InferenceData.to_netcdf` does.

    One netCDF group per InferenceData group (read back by :func:`arviz.from_netcdf`),
    but only integer variables and floating-point variables of at most
    :data:`COMPRESS_MAX_BYTES` are zlib-compressed: large arrays of float32 draws shrink by
    about a tenth at ten times the writing time.

    Parameters
    ----------
    idata : arviz.InferenceData
    path : str or Path

    Returns
    -------
    Path
    """
    import xarray as xr

    path = Path(path)
    mode = "w"
    attrs = getattr(idata, "_attrs", None)
    if attrs:
        xr.Dataset(attrs=attrs).to_netcdf(path, mode=mode, engine="h5netcdf", group="/")
        mode = "a"
    for group in idata.groups():
        data = getattr(idata, group)
        encoding = {name: {"zlib": True} for name, var in data.variables.items() if _compress(var)}
        data.to_netcdf(path, mode=mode, group=f"/{group}", engine="h5netcdf", encoding=encoding)
        mode = "a"
    return path


def write_diagnostics(folder: str | Path, diagnostics: dict) -> Path:
    """Atomically write ``diagnostics.json`` into ``folder``."""
    return atomic.write_text(
        Path(folder) / DIAGNOSTICS_FILE, json.dumps(diagnostics, indent=1, default=_json) + "\n"
    )


def _json(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
