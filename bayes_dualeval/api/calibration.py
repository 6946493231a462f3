"""Simulation-based calibration: ``bd.sbc`` and ``bd.measure_sbc`` (``bayes-dualeval sbc``).

``bd.sbc`` fits data drawn from a specification's prior; ``bd.measure_sbc`` measures new
models simulated from a fitted bank's draws (``sbc`` with a bank).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayes_dualeval.calibration.conditional import MeasureSBCResult
    from bayes_dualeval.calibration.study import SBCResult


def sbc(
    model: str | Path | None = None,
    *,
    sims: int,
    mode: str = "static",
    n_models: int = 10,
    static_items: int = 30,
    n_domains: int = 3,
    arena_prompts: int = 20,
    item_features: int = 0,
    graders: int = 1,
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
        The specification's ``mode``: ``static``, or the reward likelihood
        (``arena_likelihood='reward'``, with or without the level term) in ``both`` or ``arena``;
        the pairs are not generative
        (:func:`~bayes_dualeval.calibration.generate.check_generative`).
    n_models, static_items : int
        The fixed design: every model answers every static question once.
    n_domains : int
        The questions' domains, for a specification with an ability per domain.
    arena_prompts : int
        Arena prompts each model is scored on once, where the mode fits the arena.
    item_features : int
        Standard normal item features (the same in every simulation) that the item prior
        regresses on, in the generator and the fits; 0: none.
    graders : int
        Graders labelling every static answer (a severity each); 1: one label an answer.
    perturb : sequence of str
        ``KEY=VALUE`` changes of the generator only (``theta_scale=2``, ``flip=0.1``,
        ``reward_df=3``;
        :func:`~bayes_dualeval.calibration.generate.parse_perturbation`): data the model did not
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
    from bayes_dualeval.calibration.generate import parse_perturbation
    from bayes_dualeval.calibration.study import sbc as run_sbc

    config, sampler = settings("nuts", model, mode=mode, **options)
    start(wanted=sampler.chains)
    return run_sbc(
        config, sampler, sims=sims, n_models=n_models, n_items=static_items,
        n_domains=n_domains, n_prompts=arena_prompts, n_features=item_features,
        n_graders=graders, perturb=parse_perturbation(perturb),
        seed=seed,
    )  # fmt: skip


def measure_sbc(
    run,
    *,
    sims: int,
    measure: str = "score",
    items: int | None = None,
    bank_draws: int = 200,
    perturb=(),
    held_out: bool = True,
    seed: int = 0,
    allow_approximate: bool = False,
    **adaptive_options,
) -> MeasureSBCResult:
    """Conditional SBC of ``score`` or ``adaptive`` against a fitted run (no refit).

    Simulates ``sims`` new models from the run's posterior draws (a draw, an ability
    from the prior, static labels from that draw's items), measures each with the code
    of ``score`` or ``adaptive``, and ranks the truth in its ability posterior: the
    equal-weight mixture over bank draws that they report, and the mixture weighted by
    each draw's marginal likelihood (exact when ``held_out`` is False).

    Parameters
    ----------
    run : str, Path or Run
        The bank: a run folder or an opened run.
    sims : int
        Simulated new models.
    measure : {"score", "adaptive"}
    items : int, optional
        Static questions each model answers (a random subset; None: all).
    bank_draws : int
        Bank draws kept (evenly spaced).
    perturb : sequence of str
        ``KEY=VALUE`` changes of the generator only (``theta_scale=2``, ``b_shift=0.5``,
        ``flip=0.1``; :func:`~bayes_dualeval.calibration.measure.parse_perturbation`).
    held_out : bool
        Simulate from bank draws the scores do not use (as a real new model's items are
        none of the bank's draws); False: from the draws mixed over.
    seed : int
    allow_approximate : bool
        Accept a bank that is not a converged NUTS posterior.
    **adaptive_options
        ``select``, ``target_se``, ``max_items``, ``exposure`` of the adaptive test.

    Returns
    -------
    MeasureSBCResult
        ``summary`` (``sbc.csv``), ``coverage``, ``ranks``, ``info``; ``save(out)``.

    Examples
    --------
    >>> import bayes_dualeval as bd
    >>> result = bd.measure_sbc("runs/2pl", sims=10_000, seed=1)  # doctest: +SKIP
    >>> result.coverage  # doctest: +SKIP
    """
    from bayes_dualeval.api.fitting import open as open_run
    from bayes_dualeval.api.measures import _bank
    from bayes_dualeval.api.run import Run
    from bayes_dualeval.calibration.conditional import measure_sbc as run_measure_sbc
    from bayes_dualeval.calibration.measure import parse_perturbation

    run = run if isinstance(run, Run) else open_run(run)
    bank = _bank(run, allow_approximate=allow_approximate)
    return run_measure_sbc(
        bank, sims=sims, measure=measure, items=items, bank_draws=bank_draws,
        perturb=parse_perturbation(perturb), held_out=held_out, seed=seed,
        **adaptive_options,
    )  # fmt: skip
