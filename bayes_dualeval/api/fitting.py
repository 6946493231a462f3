"""The verbs that make a :class:`~bayes_dualeval.api.run.Run`: ``load``, ``fit``, ``open``.

Each is the Python spelling of a command (``bayes-dualeval fit`` calls :func:`fit`, and
``bayes-dualeval report`` :func:`open`), so the two cannot drift. Options are the fields
of :class:`~bayes_dualeval.model.config.ModelConfig` (the model) and
:class:`~bayes_dualeval.inference.settings.SamplerSettings` (the sampler), by name; a name
that is neither is an error that lists the valid ones.
"""

from __future__ import annotations

import dataclasses
import difflib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bayes_dualeval.core.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from bayes_dualeval.api.run import Run
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import ModelConfig


def load(
    data, *, reward_norm: str = "source", skip_invalid: bool = False, style=(), families=None
) -> Dataset:
    """Read evaluation data into a :class:`~bayes_dualeval.data.dataset.Dataset`.

    Parameters
    ----------
    data : str, Path, list of them, tuple of DataFrames, or Dataset
        Files or folders (JSONL, CSV, Parquet: searched recursively, the parent folder of
        a file is its source), or ``(static, arena)`` canonical tables (columns
        ``model, item, source, domain, correct`` and ``model, item, source, domain,
        reward``; either may be None), or a Dataset (returned as it is).
    reward_norm : {"source", "judge", "global"}
        How arena rewards are z-normalised: within each source (every judge of a source on
        one scale), within each source and judge, or over all.
    skip_invalid : bool
        Count rows with invalid values as skipped instead of raising.
    style : sequence of str
        Numeric fields of the arena rows taken as style covariates (``length``...).
    families : str, Path or mapping, optional
        Model families (a CSV ``model_label,family``, or a mapping), for the judges'
        self-preference.

    Returns
    -------
    Dataset

    Raises
    ------
    InputError
        For unreadable or unfittable input; the message names the file and line.

    Examples
    --------
    >>> import bayes_dualeval as bd
    >>> ds = bd.load("data/")
    >>> ds.models[:2].tolist()
    ['atlas-70b', 'borealis-8b']
    """
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.data.load import load as load_files

    if isinstance(data, Dataset):
        return data
    if isinstance(data, tuple) and len(data) == 2 and not _is_path(data[0]):
        static, arena = data
        return Dataset.from_tables(static, arena, reward_norm=reward_norm)
    return load_files(
        data, reward_norm=reward_norm, skip_invalid=skip_invalid, style=style, families=families
    )


def _is_path(x) -> bool:
    return isinstance(x, (str, bytes)) or hasattr(x, "__fspath__")


def settings(
    sampler: str = "nuts", model: str | Path | None = None, **options
) -> tuple[ModelConfig, SamplerSettings]:
    """The model specification and sampler settings that :func:`fit`'s options ask for.

    Parameters
    ----------
    sampler : {"nuts", "svi", "map"}
    model : str or Path, optional
        A named specification (``bayes-dualeval models`` lists them) or a ``.toml`` path;
        default ``dualeval-2pl``.
    **options
        Fields of ``ModelConfig`` (each overrides the specification's value; None leaves
        it) and of ``SamplerSettings`` (``chains``, ``draws``, ``seed``...).

    Returns
    -------
    ModelConfig, SamplerSettings

    Raises
    ------
    ConfigError
        An unknown option (the message lists the valid ones and the nearest), an unknown
        specification, or a value out of its range.
    """
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import DEFAULT_MODEL, ModelConfig, load_spec

    sampler_names = {f.name for f in dataclasses.fields(SamplerSettings)} - {"sampler"}
    model_names = {f.name for f in dataclasses.fields(ModelConfig)} - {"name", "description"}
    unknown = sorted(set(options) - sampler_names - model_names)
    if unknown:
        valid = sorted(sampler_names | model_names)
        near = difflib.get_close_matches(unknown[0], valid, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(
            f"unknown option(s) {', '.join(map(repr, unknown))}{hint}; the sampler's are "
            f"{', '.join(sorted(sampler_names))}; the model's are {', '.join(sorted(model_names))}"
        )
    model_values = {k: v for k, v in options.items() if k in model_names}
    sampler_values = {k: v for k, v in options.items() if k in sampler_names}
    config = load_spec(model or DEFAULT_MODEL).replace(**model_values)
    return config, SamplerSettings(sampler=sampler, **sampler_values)


def fit(
    data,
    sampler: str = "nuts",
    model: str | Path | None = None,
    *,
    device: str = "auto",
    compile_cache: bool = True,
    reward_norm: str = "source",
    skip_invalid: bool = False,
    holdout: float = 0.0,
    holdout_seed: int = 0,
    item_features: str | Path | pd.DataFrame | None = None,
    timings: dict | None = None,
    warm_start: str | Path | None = None,
    **options,
) -> Run:
    """Fit the Bayesian DualEval model to ``data``: the Python ``bayes-dualeval fit``.

    Parameters
    ----------
    data : str, Path, list, (static, arena) DataFrames or Dataset
        What :func:`load` reads.
    sampler : {"nuts", "svi", "map"}
        NUTS (the reference), SVI (fast, narrower intervals) or MAP (a point estimate).
    model : str or Path, optional
        A named specification or a ``.toml`` path; default ``dualeval-2pl``.
    device : {"auto", "cpu", "gpu"}
        Where JAX runs, when this call is the first to start it; on a CPU one host device
        per chain (or shard) is made for you (:mod:`bayes_dualeval.api.devices`).
    compile_cache : bool
        Keep compiled programs on disk so that the next fit of the same shapes skips
        compilation.
    reward_norm, skip_invalid
        As for :func:`load` (when ``data`` are files).
    holdout : float
        Share of the cells left out of the fit and predicted (``Run.diagnostics.holdout``).
    holdout_seed : int
        Seed of the held-out split.
    item_features : str, Path or DataFrame, optional
        Numeric item features (a column ``item``): a regression prior on difficulty and
        discrimination.
    timings : dict, optional
        Seconds already spent by stage (the command line's reading of the data), recorded
        with the fit's own in ``diagnostics.json``.
    warm_start : str or Path, optional
        A NUTS run folder of the same specification (the data may add models or items):
        start from its adapted metric, step size and posterior means with a short warm-up;
        if the draws then fail the convergence check, the fit runs again with the full
        warm-up (``Run.diagnostics.raw["warm_start"]`` says which;
        :mod:`bayes_dualeval.runs.warm_start`).
    **options
        Model and sampler settings by field name (``draws=500``, ``irt="3pl"``,
        ``chains=2``); see :func:`settings`. A misspelt name is an error.

    Returns
    -------
    Run
        The fitted run, in memory (``Run.save`` writes its folder).

    Raises
    ------
    ConfigError
        An unknown option, a value out of range, or a sampler that cannot fit the
        specification.
    InputError
        Unreadable or unfittable data.

    Warns
    -----
    ConvergenceWarning
        When the run did not converge (its intervals must not be published).

    Examples
    --------
    >>> import bayes_dualeval as bd
    >>> run = bd.fit("data/", sampler="map")
    >>> run.leaderboard()["model"].iloc[0]
    'delta-13b'
    """
    from bayes_dualeval.api.devices import start
    from bayes_dualeval.api.run import Run

    config, sampler_settings = settings(sampler, model, **options)
    wanted = sampler_settings.chains if sampler == "nuts" else sampler_settings.shards
    start(device, wanted, compile_cache=compile_cache)

    from bayes_dualeval.inference.sampling import check_supported
    from bayes_dualeval.runs.fit import fit as run_fit

    check_supported(config, sampler_settings)  # fail before reading the data
    began = time.perf_counter()
    dataset = load(data, reward_norm=reward_norm, skip_invalid=skip_invalid)
    timings = dict(timings or {})
    timings.setdefault("data", round(time.perf_counter() - began, 3))
    features, name = _features(item_features)
    result = run_fit(
        dataset, config, sampler_settings, timings=timings, holdout=holdout,
        holdout_seed=holdout_seed, features=features, features_name=name,
        warm_start=warm_start,
    )  # fmt: skip
    run = Run(result)
    run.warn_if_not_converged(stacklevel=2)
    return run


def _features(item_features):
    """The feature table and the name ``diagnostics.json`` records for it."""
    if item_features is None:
        return None, "features"
    if _is_path(item_features):
        from bayes_dualeval.data.features import read_features

        return read_features(item_features), str(item_features)
    return item_features, "features"


def simulate(out: str | Path | None = None, *, force: bool = False, **options) -> Simulated:
    """Draw a simulated evaluation with known truth: ``bayes-dualeval simulate``.

    Parameters
    ----------
    out : str or Path, optional
        Write the files here (``bench/``, ``arena/``, ``truth.json``), ready for :func:`fit`.
    force : bool
        Overwrite files in ``out``.
    **options
        The arguments of :func:`bayes_dualeval.model.simulate.simulate` (``n_models``,
        ``n_static``, ``n_arena``, ``seed``...).

    Returns
    -------
    Simulated
        The static and arena tables, the true parameters, and the folder when written.

    Examples
    --------
    >>> import bayes_dualeval as bd
    >>> sim = bd.simulate(n_models=5, n_static=20, n_arena=8, seed=1)
    >>> sorted(sim.static.columns)[:3]
    ['correct', 'dataset', 'domain']
    """
    from bayes_dualeval.model.simulate import simulate as draw
    from bayes_dualeval.model.simulate import write

    static, arena, truth = draw(**options)
    if out is None:
        return Simulated(static, arena, truth)
    files = tuple(write(out, static, arena, truth, force=force))
    return Simulated(static, arena, truth, Path(out), files)


@dataclasses.dataclass(frozen=True)
class Simulated:
    """A simulated evaluation (:func:`simulate`).

    Attributes
    ----------
    static, arena : pandas.DataFrame
        The rows the files hold.
    truth : dict
        The true abilities and item parameters.
    folder : Path or None
        Where the files were written.
    files : tuple of Path
        The files written.
    """

    static: pd.DataFrame
    arena: pd.DataFrame
    truth: dict
    folder: Path | None = None
    files: tuple = ()


def open(run_dir: str | Path) -> Run:  # noqa: A001 - bd.open, as the issue names it
    """Open a saved run folder as a :class:`~bayes_dualeval.api.run.Run`.

    The run is read back as its fit produced it
    (:func:`~bayes_dualeval.runs.load.load_result`): the recorded specification, data,
    settings and posterior; its tables are computed again at the level asked for.

    Parameters
    ----------
    run_dir : str or Path
        A folder written by ``bayes-dualeval fit`` or ``Run.save``.

    Returns
    -------
    Run

    Raises
    ------
    InputError
        If the folder is not a readable run.

    Examples
    --------
    >>> import bayes_dualeval as bd
    >>> run = bd.open("runs/my-run")  # doctest: +SKIP
    >>> run.leaderboard().head()  # doctest: +SKIP
    """
    from bayes_dualeval.api.devices import start
    from bayes_dualeval.api.run import Run
    from bayes_dualeval.core.errors import InputError
    from bayes_dualeval.runs.fit import DIAGNOSTICS_FILE, POSTERIOR_FILE

    folder = Path(run_dir)
    for name in (POSTERIOR_FILE, DIAGNOSTICS_FILE):
        if not (folder / name).is_file():
            raise InputError(f"{folder} is not a run folder: {name} is missing")
    start("auto", 1)
    return Run(folder=folder)  # read when first needed (a score needs only the bank)
