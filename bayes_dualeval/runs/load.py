"""Read a run folder back into the in-memory result that ``fit`` produced.

:func:`load_result` gives the same :class:`~bayes_dualeval.runs.fit.FitResult` a fit
returns (data, specification, settings, posterior, pairs, diagnostics), so
``bayes-dualeval report RUN_DIR`` renders through the same code as ``fit``. Nothing is
guessed: the specification is the one the posterior records, the data are what the run
stored (``observed_data``: the labels, the raw rewards and the normalised rewards the
model saw; ``constant_data``: the item metadata), and the normalisation and skip counts are
those recorded in ``diagnostics.json``.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.tables import frozen
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.idata import META_PREFIX, cell_positions
from bayes_dualeval.runs.fit import DIAGNOSTICS_FILE, POSTERIOR_FILE, FitResult


def load_run(run_dir: str | Path):
    """Read a run folder's files: ``(idata, diagnostics)``.

    Raises
    ------
    InputError
        If the folder has no ``posterior.nc`` or ``diagnostics.json``, or they cannot be read.
    """
    import arviz as az

    run_dir = Path(run_dir)
    post, diag = run_dir / POSTERIOR_FILE, run_dir / DIAGNOSTICS_FILE
    for path in (post, diag):
        if not path.is_file():
            raise InputError(f"{run_dir} is not a run folder: {path.name} is missing")
    try:
        idata = az.from_netcdf(str(post), engine="h5netcdf")
        diagnostics = json.loads(diag.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir}: cannot read the run ({exc})") from None
    return idata, diagnostics


def load_result(run_dir: str | Path) -> FitResult:
    """Read a run folder into the :class:`~bayes_dualeval.runs.fit.FitResult` of its fit.

    The checks and tables are not read: :func:`bayes_dualeval.runs.output.tabulate` (or
    :func:`~bayes_dualeval.runs.output.rewrite`) computes them at the level wanted.

    Raises
    ------
    InputError
        If the folder is not a readable run, or its posterior does not record its
        specification.
    """
    from bayes_dualeval.posterior.diagnostics import per_parameter

    idata, diagnostics = load_run(run_dir)
    config = DualEvalModel.from_idata(idata).config
    known = {f.name for f in fields(SamplerSettings)}
    settings = SamplerSettings(
        **{k: v for k, v in diagnostics.get("sampler", {}).items() if k in known}
    )
    dataset = stored_dataset(idata, diagnostics)
    _, pairs = build_inputs(dataset, config)
    parameters = per_parameter(idata) if settings.sampler == "nuts" else None
    return FitResult(dataset, pairs, config, settings, idata, diagnostics, parameters)


def stored_dataset(idata, diagnostics: dict) -> Dataset:
    """The fitted :class:`~bayes_dualeval.data.dataset.Dataset`, as the run stored it.

    Models come from the posterior's ``model`` coordinate, items and their metadata from
    ``constant_data``, labels and rewards (raw and normalised) from ``observed_data``, the
    normalisation and skip counts from ``diagnostics["data"]``. The list of input files is
    not stored (``files`` is empty).

    Raises
    ------
    InputError
        If a group or a recorded field is missing.
    """
    if not {"observed_data", "constant_data"} <= set(idata.groups()):
        raise InputError("the posterior has no observed_data/constant_data to read the data from")
    data = diagnostics.get("data", {})
    if "reward_norm" not in data:
        raise InputError("diagnostics.json does not record the reward normalisation")
    obs, const = idata.observed_data, idata.constant_data
    models = np.asarray(idata.posterior["model"].values, dtype=str)
    items = np.asarray(const["item"].values, dtype=str)
    group_names = np.asarray(const["item_group"].values, dtype=str)
    groups, item_group = np.unique(group_names, return_inverse=True)

    def index(coord: str) -> np.ndarray:  # text labels, or positions at scale
        return frozen(cell_positions(idata, coord), np.int32)

    def values(name: str, dtype) -> np.ndarray:
        return frozen(obs[name].values if name in obs.data_vars else [], dtype)

    def answers(name: str, cells: str) -> np.ndarray:  # absent: one answer per cell
        if name in obs.data_vars:
            return values(name, np.int32)
        size = obs[cells].size if cells in obs.data_vars else 0
        return frozen(np.ones(size), np.int32)

    judges, static_judge, arena_judge = _stored_judges(obs)
    style = (
        tuple(np.asarray(obs["style_covariate"].values).astype(str))
        if "arena_style" in obs
        else ()
    )
    n_arena = obs["arena_z"].size if "arena_z" in obs.data_vars else 0
    family = const["model_family"].values if "model_family" in const else np.full(len(models), "")
    return Dataset(
        models=frozen(models),
        items=frozen(items),
        item_kind=frozen(const["item_kind"].values, str),
        item_source=frozen(const["item_source"].values, str),
        item_domain=frozen(const["item_domain"].values, str),
        item_group=frozen(item_group, np.int32),
        groups=frozen(groups),
        static_model=index("static_model"),
        static_item=index("static_item"),
        static_y=values("static_y", np.int32),
        static_n=answers("static_n", "static_y"),
        arena_model=index("arena_model"),
        arena_item=index("arena_item"),
        arena_reward=values("arena_reward", np.float64),
        arena_n=answers("arena_n", "arena_z"),
        arena_z=values("arena_z", np.float64),
        judges=judges,
        static_judge=static_judge,
        arena_judge=arena_judge,
        model_family=frozen(family, str),
        style=style,
        arena_style=frozen(
            obs["arena_style"].values if style else np.zeros((n_arena, 0)), np.float64
        ),
        reward_norm=data["reward_norm"],
        skipped=MappingProxyType(dict(data.get("skipped", {}))),
        model_meta=MappingProxyType(
            {
                name[len(META_PREFIX) :]: frozen(const[name].values, str)
                for name in const.data_vars
                if name.startswith(META_PREFIX)
            }
        ),
    )


def _stored_judges(obs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The judges of a stored run, and each static and arena cell's judge.

    One unnamed judge where the run stores none.
    """
    names = {
        kind: np.asarray(obs[f"{kind}_judge"].values).astype(str)
        for kind in ("static", "arena")
        if f"{kind}_judge" in obs.data_vars
    }
    sizes = {
        kind: (obs[var].size if var in obs.data_vars else 0)
        for kind, var in (("static", "static_y"), ("arena", "arena_z"))
    }
    if not names:
        judges = np.array([""])
        return frozen(judges), *(frozen(np.zeros(sizes[k]), np.int32) for k in sizes)
    judges = np.unique(np.concatenate(list(names.values())))
    index = pd.Index(judges)
    cells = [index.get_indexer(names[k]) if k in names else np.zeros(sizes[k], int) for k in sizes]
    return frozen(judges), *(frozen(c, np.int32) for c in cells)
