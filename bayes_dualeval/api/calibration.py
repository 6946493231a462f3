"""``bd.sbc``: simulation-based calibration of a specification (``bayes-dualeval sbc``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayes_dualeval.sbc.study import SBCResult


def sbc(
    model: str | Path | None = None,
    *,
    sims: int,
    mode: str = "static",
    n_models: int = 10,
    static_items: int = 30,
    perturb=(),
    seed: int = 0,
    **options,
) -> SBCResult:
    """Simulate data from the specification's prior, fit each with NUTS and rank the truth.

    Parameters
    ----------
    model : str or Path, optional
        A named specification or a ``.toml`` path; default ``dualeval-2pl``.
    sims : int
        Simulations (fits).
    mode : str
        The specification's ``mode``; only ``static`` is generative.
    n_models, static_items : int
        The fixed design: every model answers every static question once.
    perturb : sequence of str
        ``KEY=VALUE`` changes of the generator only (``theta_scale=2``, ``flip=0.1``;
        :func:`~bayes_dualeval.sbc.generate.parse_perturbation`): data the model did not
        generate, to see the check's power.
    seed : int
        Of the simulations, the fits and the bands.
    **options
        Fields of ``SamplerSettings`` (``chains``, ``warmup``, ``draws``, ``extend``...)
        and of ``ModelConfig``, as :func:`bayes_dualeval.api.settings` takes them.

    Returns
    -------
    SBCResult
        ``summary`` (``sbc.csv``), ``ranks``, ``info``; ``save(out)`` writes the folder.

    Examples
    --------
    >>> import bayes_dualeval as bd
    >>> result = bd.sbc("dualeval-2pl", sims=60, seed=1)  # doctest: +SKIP
    >>> result.outside  # doctest: +SKIP
    0
    """
    from bayes_dualeval.api.devices import start
    from bayes_dualeval.api.fitting import settings
    from bayes_dualeval.sbc.generate import parse_perturbation
    from bayes_dualeval.sbc.study import sbc as run_sbc

    config, sampler = settings("nuts", model, mode=mode, **options)
    start(wanted=sampler.chains)
    return run_sbc(
        config, sampler, sims=sims, n_models=n_models, n_items=static_items,
        perturb=parse_perturbation(perturb), seed=seed,
    )  # fmt: skip
