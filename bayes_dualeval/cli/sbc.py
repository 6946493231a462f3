"""``bayes-dualeval sbc``: simulation-based calibration of a specification or a bank.

Without ``--bank`` the fits of data drawn from a specification's prior; with it, the
measure stage against that bank (no refits).
"""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import (
    CONTEXT,
    allow_approximate_option,
    clean_errors,
    progress_lines,
    say,
)
from bayes_dualeval.model.config import DEFAULT_MODEL, MODES

#: Options of the fits' calibration (no bank), and of the measure stage's (with a bank).
FIT_ONLY = ("model_name", "mode", "n_models", "static_items", "domains", "arena_prompts",
            "arena_level", "features", "graders", "chains", "warmup", "draws", "extend",
            "target_accept", "centring")  # fmt: skip
BANK_ONLY = ("measure", "items", "bank_draws", "held_out", "select", "max_items", "target_se",
             "allow_approximate")  # fmt: skip


@click.command(context_settings=CONTEXT)
@click.option(
    "--model", "model_name", default=DEFAULT_MODEL, show_default=True,
    help="Named specification from models/ or a .toml path.",
)  # fmt: skip
@click.option(
    "--mode", type=click.Choice(MODES), default="static", show_default=True,
    help="The specification's mode; static labels and the reward likelihood are generative, "
    "the arena's pairs are not.",
)  # fmt: skip
@click.option("--sims", type=click.IntRange(2), required=True, help="Simulations (fits).")
@click.option("--models", "n_models", type=click.IntRange(2), default=10, show_default=True)
@click.option("--static-items", type=click.IntRange(2), default=30, show_default=True)
@click.option(
    "--arena-prompts", type=click.IntRange(2), default=20, show_default=True,
    help="Arena prompts each model is scored on once, where the mode fits the arena (the "
    "reward likelihood).",
)  # fmt: skip
@click.option(
    "--features", type=click.IntRange(0), default=0, show_default=True,
    help="Item features: that many standard normal columns per item, the same in every "
    "simulation, which the item prior regresses on.",
)  # fmt: skip
@click.option(
    "--graders", type=click.IntRange(1), default=1, show_default=True,
    help="Graders labelling every static answer, each with its own severity.",
)  # fmt: skip
@click.option(
    "--arena-level", type=click.Choice(("mean", "none")), default=None,
    help="Override the specification's arena level term (the reward likelihood is "
    "generative with it and without it).",
)  # fmt: skip
@click.option(
    "--domains", type=click.IntRange(1), default=3, show_default=True,
    help="The questions' domains, for a specification with an ability per domain.",
)  # fmt: skip
@click.option(
    "--perturb", multiple=True, metavar="KEY=VALUE",
    help="Draw the data from a generator that is not the model: a prior setting changed "
    "for the generator only (theta_scale=2, sigma_scale=3), flip=P (labels flipped with "
    "probability P) or reward_df=DF (Student-t reward noise). Repeatable.",
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--chains", type=click.IntRange(1), default=4, show_default=True)
@click.option("--warmup", type=click.IntRange(0), default=400, show_default=True)
@click.option("--draws", type=click.IntRange(1), default=1000, show_default=True)
@click.option(
    "--extend", type=click.IntRange(0), default=2, show_default=True,
    help="More rounds while a fit fails the convergence check (0: never).",
)  # fmt: skip
@click.option(
    "--target-accept", type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.8, show_default=True,
)  # fmt: skip
@click.option(
    "--centring", type=click.Choice(("auto", "none", "all")), default="auto",
    show_default=True, help="How centred the items' coordinates are.",
)  # fmt: skip
@click.option(
    "--bank", type=click.Path(path_type=str), default=None,
    help="Calibrate the measure stage against this run folder instead (no refits).",
)  # fmt: skip
@click.option(
    "--measure", type=click.Choice(("score", "adaptive")), default="score", show_default=True,
    help="With --bank: what is calibrated.",
)  # fmt: skip
@click.option(
    "--items", type=click.IntRange(1), default=None,
    help="With --bank: static questions each simulated model answers (a random subset; "
    "default all).",
)  # fmt: skip
@click.option("--bank-draws", type=click.IntRange(2), default=200, show_default=True,
              help="With --bank: bank draws kept.")  # fmt: skip
@click.option(
    "--held-out/--same-draws", default=True, show_default=True,
    help="With --bank: simulate from bank draws the scores do not use, or from the same.",
)  # fmt: skip
@click.option("--select", type=click.Choice(("fisher", "kl", "random")), default="fisher",
              show_default=True, help="With --measure adaptive: next item.")  # fmt: skip
@click.option("--max-items", type=click.IntRange(1), default=50, show_default=True,
              help="With --measure adaptive: stop after this many items.")  # fmt: skip
@click.option("--target-se", type=click.FloatRange(0, min_open=True), default=0.3,
              show_default=True, help="With --measure adaptive: stop below this sd.")  # fmt: skip
@allow_approximate_option
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=str),
    help="Folder to write (must not exist or be empty).",
)  # fmt: skip
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@click.pass_context
@clean_errors
def sbc(
    ctx, model_name, mode, sims, n_models, static_items, arena_prompts, features, graders,
    arena_level, domains, perturb, seed, chains, warmup, draws, extend, target_accept,
    centring, bank, measure, items, bank_draws, held_out, select, max_items, target_se,
    allow_approximate, out, quiet,
):  # fmt: skip
    """Simulation-based calibration: fit data drawn from the model's own prior.

    Draws --sims data sets of one design (--models models each answering --static-items
    questions once, in --domains domains under a specification with an ability per domain,
    and scored on --arena-prompts prompts under the reward likelihood, with its level term
    or, at --arena-level none, without; --features item features the item prior regresses
    on; every answer labelled by each of --graders graders) from the specification's
    prior predictive (every hyperparameter drawn), fits each with NUTS (the sampler options
    below; the defaults are fit's), and ranks each true quantity (centred abilities, the
    best and the worst, a contrast, items' difficulty and log discrimination, item spreads,
    the guessing level, domain deviations and their spread, the largest loading of two
    items under ability dimensions, the graders' severities, gamma, the reward noise sigma
    and the level's intercept, the feature
    coefficients and their scales, the joint log likelihood) among 99 evenly spaced
    posterior draws. Writes OUT/sbc.csv
    (per quantity: the largest ECDF deviation from uniform, a p-value and whether the ECDF
    stays inside its simultaneous 95% band), OUT/ranks.csv, OUT/sbc.png and OUT/sbc.json.
    Calibrated fits leave about one quantity in twenty outside its band; --perturb shows
    the check's power on data the model did not generate.

    With --bank RUN, the measure stage instead, with no refit: --sims new models are
    drawn from the bank's posterior draws (a draw, an ability from the prior, labels on
    the bank's static questions from that draw's items; --perturb theta_scale=S, b_shift=X
    or flip=P for a generator that is not the bank; --held-out: from draws the scores do
    not use, so the true items are none of those mixed over), measured by score's grid code or an
    adaptive test (--measure), and the truth is ranked in the ability posterior: the
    equal-weight mixture over bank draws that score and adaptive report (theta_equal) and
    the mixture weighted by each draw's marginal likelihood (theta_weighted; exact with
    --same-draws). Writes OUT/sbc.csv, OUT/coverage.csv (central 50/90/95% intervals' coverage
    of the truth; fit_p's share below 1% and 5% for clean models), OUT/ranks.csv,
    OUT/sbc.png and OUT/sbc.json (the distance between the two mixtures).

    \b
    Example:
        bayes-dualeval sbc --model dualeval-2pl --mode static --sims 60 --seed 1 --out sbc/
        bayes-dualeval sbc --sims 60 --perturb theta_scale=2 --seed 1 --out sbc-wide/
        bayes-dualeval sbc --model dualeval-reward --mode both --sims 60 --out sbc-reward/
        bayes-dualeval sbc --bank runs/2pl --measure score --sims 10000 --out msbc/
    """
    given = {
        name for name in (*FIT_ONLY, *BANK_ONLY)
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    }  # fmt: skip
    wrong = sorted(given & set(FIT_ONLY if bank else BANK_ONLY))
    if wrong:
        names = ", ".join("--" + _flag(name) for name in wrong)
        where = "calibrate fits, not a bank" if bank else "need --bank"
        raise click.UsageError(f"{names}: these options {where}")
    if bank:
        return _measure(bank, measure, sims, items, bank_draws, held_out, perturb, seed,
                        select, max_items, target_se, allow_approximate, out, quiet)  # fmt: skip
    from bayes_dualeval.inference.device import configure

    configure("auto", chains)

    from bayes_dualeval import api
    from bayes_dualeval.core.atomic import check_new_folder

    check_new_folder(out)
    overrides = {} if arena_level is None else {"arena_level": arena_level}
    with progress_lines(quiet):
        result = api.sbc(
            model_name, sims=sims, mode=mode, n_models=n_models, static_items=static_items,
            arena_prompts=arena_prompts, item_features=features, graders=graders,
            n_domains=domains,
            perturb=perturb, seed=seed,
            chains=chains, warmup=warmup, draws=draws, extend=extend,
            target_accept=target_accept, centring=centring, **overrides,
        )  # fmt: skip
    path = result.save(out)
    info = result.info
    say(
        f"{info['fits_not_converged']} of {sims} fits failed the convergence check "
        "(their ranks are kept)",
        quiet,
    )
    for row in result.summary.itertuples():
        mark = "" if row.within_band else "  OUTSIDE"
        click.echo(f"{row.quantity:<22} max dev {row.ecdf_max_dev:.3f}  p {row.p_value:.3f}{mark}")
    verdict = "passes" if result.outside <= 1 else "fails"
    click.echo(
        f"{result.outside} of {len(result.summary)} quantities outside their 95% band: "
        f"calibration {verdict} (at most one expected by chance)"
    )
    click.echo(f"wrote {path}")


def _flag(name: str) -> str:
    return {"model_name": "model", "n_models": "models"}.get(name, name).replace("_", "-")


def _measure(bank, measure, sims, items, bank_draws, held_out, perturb, seed, select,
             max_items, target_se, allow_approximate, out, quiet):  # fmt: skip
    """``sbc --bank``: the measure stage's conditional calibration, printed and written."""
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from bayes_dualeval import api
    from bayes_dualeval.core.atomic import check_new_folder

    check_new_folder(out)
    options = {}
    if measure == "adaptive":
        options = dict(select=select, max_items=max_items, target_se=target_se)
    with progress_lines(quiet):
        result = api.measure_sbc(
            bank, sims=sims, measure=measure, items=items, bank_draws=bank_draws,
            held_out=held_out, perturb=perturb, seed=seed,
            allow_approximate=allow_approximate, **options,
        )  # fmt: skip
    path = result.save(out)
    info = result.info
    for row in result.summary.itertuples():
        mark = "" if row.within_band else "  OUTSIDE"
        click.echo(f"{row.quantity:<16} max dev {row.ecdf_max_dev:.3f}  p {row.p_value:.3f}{mark}")
    for row in result.coverage.itertuples():
        click.echo(
            f"{row.quantity:<16} {row.statistic} {row.nominal:g}: {row.observed:.3f} "
            f"(se {row.se:.3f})"
        )
    click.echo(
        f"equal-weight vs weighted mixture: mean total variation {info['mean_tv']:.3f}, "
        f"mean KL {info['mean_kl']:.4f}"
    )
    say(f"{sims} simulated models, {info['bank_draws']} bank draws, {info['seconds']} s", quiet)
    click.echo(f"wrote {path}")
