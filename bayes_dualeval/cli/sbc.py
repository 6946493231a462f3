"""``bayes-dualeval sbc``: simulation-based calibration of a specification."""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT, clean_errors, progress_lines, say
from bayes_dualeval.model.config import DEFAULT_MODEL, MODES


@click.command(context_settings=CONTEXT)
@click.option(
    "--model", "model_name", default=DEFAULT_MODEL, show_default=True,
    help="Named specification from models/ or a .toml path.",
)  # fmt: skip
@click.option(
    "--mode", type=click.Choice(MODES), default="static", show_default=True,
    help="The specification's mode; only static labels are a generative likelihood.",
)  # fmt: skip
@click.option("--sims", type=click.IntRange(2), required=True, help="Simulations (fits).")
@click.option("--models", "n_models", type=click.IntRange(2), default=10, show_default=True)
@click.option("--static-items", type=click.IntRange(2), default=30, show_default=True)
@click.option(
    "--perturb", multiple=True, metavar="KEY=VALUE",
    help="Draw the data from a generator that is not the model: a prior setting changed "
    "for the generator only (theta_scale=2) or flip=P (labels flipped with probability P). "
    "Repeatable.",
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
    show_default=True, help="Items sampled in centred coordinates.",
)  # fmt: skip
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=str),
    help="Folder to write (must not exist or be empty).",
)  # fmt: skip
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@clean_errors
def sbc(
    model_name, mode, sims, n_models, static_items, perturb, seed, chains, warmup, draws,
    extend, target_accept, centring, out, quiet,
):  # fmt: skip
    """Simulation-based calibration: fit data drawn from the model's own prior.

    Draws --sims data sets of one design (--models models each answering --static-items
    questions once) from the specification's prior predictive (every hyperparameter drawn),
    fits each with NUTS (the sampler options below; the defaults are fit's), and ranks
    each true quantity (centred abilities, the best and the worst, a contrast, items'
    difficulty and log discrimination, item spreads, the guessing level, the joint log
    likelihood) among 99 evenly spaced posterior draws. Writes OUT/sbc.csv (per quantity:
    the largest ECDF deviation from uniform, a p-value and whether the ECDF stays inside
    its simultaneous 95% band), OUT/ranks.csv, OUT/sbc.png and OUT/sbc.json. Calibrated
    fits leave about one quantity in twenty outside its band; --perturb shows the check's
    power on data the model did not generate.

    \b
    Example:
        bayes-dualeval sbc --model dualeval-2pl --mode static --sims 60 --seed 1 --out sbc/
        bayes-dualeval sbc --sims 60 --perturb theta_scale=2 --seed 1 --out sbc-wide/
    """
    from bayes_dualeval.inference.device import configure

    configure("auto", chains)

    from bayes_dualeval import api
    from bayes_dualeval.core.atomic import check_new_folder

    check_new_folder(out)
    with progress_lines(quiet):
        result = api.sbc(
            model_name, sims=sims, mode=mode, n_models=n_models, static_items=static_items,
            perturb=perturb, seed=seed, chains=chains, warmup=warmup, draws=draws,
            extend=extend, target_accept=target_accept, centring=centring,
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
