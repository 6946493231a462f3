"""The pilot fit that calibrates the arena pairs' weight, once per fit.

Under ``arena_weight = "calibrated"`` the fit computes the sandwich factor of
:mod:`bayes_dualeval.model.arena_weight` before sampling: a MAP fit of the same
specification at its fixed weight (:func:`~bayes_dualeval.inference.mode.run_map`) gives the
pilot point, the factor is evaluated there and written into the specification
(``arena_weight_factor``), which every sampler, the stored posterior and every later reader
of the run then use.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.arena_weight import SandwichWeight, sandwich
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.spec import DualEvalModel


def needs_calibration(config: ModelConfig, inputs: ModelInputs) -> bool:
    """Whether ``config`` asks for a calibrated weight that is not computed yet.

    Only the pairs likelihoods have one (the factor is 1 under ``reward`` and ``bt``), and
    only when the fit has arena pairs.
    """
    return (
        config.arena_weight == "calibrated"
        and config.arena_weight_factor is None
        and DualEvalModel(config).arena_term == "pairs"
        and inputs.has_arena
    )


def calibrate(
    inputs: ModelInputs, config: ModelConfig, seed: int = 0
) -> tuple[ModelConfig, SandwichWeight | None]:
    """``config`` with its calibrated arena weight computed from ``inputs``.

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    seed : int
        The MAP pilot's starting point.

    Returns
    -------
    config : ModelConfig
        With ``arena_weight_factor`` set when :func:`needs_calibration`; else ``config``.
    weight : SandwichWeight or None
        What the factor was computed from (None when nothing was calibrated).

    Raises
    ------
    ConfigError
        With ability dimensions (``dims > 1``), which MAP does not fit.

    Notes
    -----
    The pilot is a MAP fit at the weight ``lambda_arena``. Under 3PL and 4PL, whose static
    floors and ceilings MAP does not fit, the pilot is the 2PL fit of the same data (the
    arena prompts have no floors or ceilings).
    """
    from bayes_dualeval.inference.mode import run_map

    if not needs_calibration(config, inputs):
        return config, None
    if config.dims > 1:
        raise ConfigError(
            f"a calibrated arena weight is computed at a MAP pilot, and MAP does not fit "
            f"ability dimensions ({setting('dims', config.dims)}): use "
            f"{setting('arena_weight', 'fixed')}"
        )
    irt = "2pl" if DualEvalModel(config).asymptotes else config.irt
    pilot_config = dataclasses.replace(config, arena_weight="fixed", irt=irt)
    pilot = run_map(inputs, pilot_config, SamplerSettings(sampler="map", seed=seed))
    point = {k: np.asarray(v)[0, 0] for k, v in pilot.samples.items()}
    weight = sandwich(DualEvalModel(config), point, inputs)
    return dataclasses.replace(config, arena_weight_factor=weight.factor), weight
