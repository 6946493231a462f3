"""Inference for the DualEval model: one entry point over NUTS, SVI and MAP.

:func:`sample` runs the sampler named in :class:`SamplerSettings`; each returns a
:class:`~bayes_dualeval.inference.draws.Draws`. The samplers live in their own modules:
:mod:`~bayes_dualeval.inference.nuts` (with the rounds that draw more),
:mod:`~bayes_dualeval.inference.svi` (autoguides) and :mod:`~bayes_dualeval.inference.mode`
(the marginal posterior mode).
"""

from __future__ import annotations

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.inference.buckets import padded
from bayes_dualeval.inference.draws import Draws
from bayes_dualeval.inference.mode import check_map_supports, run_map
from bayes_dualeval.inference.nuts import run_nuts
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.inference.sharding import data_devices, shard
from bayes_dualeval.inference.svi import run_svi
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs

__all__ = [
    "Draws",
    "SamplerSettings",
    "check_supported",
    "run_map",
    "run_nuts",
    "run_svi",
    "sample",
]


def check_supported(config: ModelConfig, settings: SamplerSettings) -> None:
    """Refuse a sampler that cannot fit the specification, before any work is done.

    Raises
    ------
    ConfigError
        MAP with a 3PL or 4PL link (:func:`~bayes_dualeval.inference.mode.check_map_supports`);
        NUTS with ``shards`` above 1.
    """
    if settings.sampler == "map":
        check_map_supports(config)
    if settings.sampler == "nuts" and settings.shards > 1:
        raise ConfigError(
            f"{setting('shards', settings.shards)} splits data for SVI and MAP; NUTS runs its "
            f"chains one per device instead (see {setting('chains')})"
        )


def sample(
    inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings, *, until=None, warm=None
) -> Draws:
    """Run the sampler named in ``settings`` on the model.

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    settings : SamplerSettings
    until : callable, optional
        NUTS only: the check that decides whether to draw more (see :func:`run_nuts`).
    warm : WarmStart, optional
        NUTS only: start from a previous fit's adaptation (see :func:`run_nuts`).

    Returns
    -------
    Draws

    Raises
    ------
    ConfigError
        When the sampler cannot fit the specification (:func:`check_supported`).
    """
    check_supported(config, settings)
    if settings.sampler != "nuts":  # NUTS pads in run_nuts, after judging the data
        inputs = shard(padded(inputs), data_devices(settings.shards))
    if settings.sampler == "map":
        return run_map(inputs, config, settings)
    if settings.sampler == "svi":
        return run_svi(inputs, config, settings)
    return run_nuts(inputs, config, settings, until=until, warm=warm)
