"""``bayes-dualeval score``: place new models on a fitted run's scale, without a refit."""

from __future__ import annotations

import click

from bayes_dualeval.api.run import DEFAULT_CI
from bayes_dualeval.cli.shared import (
    CONTEXT,
    allow_approximate_option,
    clean_errors,
    data_argument,
)
from bayes_dualeval.measure.bank import BANK_DRAWS


@click.command(context_settings=CONTEXT)
@data_argument
@click.option(
    "--bank", required=True, type=click.Path(path_type=str),
    help="A run folder of `bayes-dualeval fit` (NUTS or SVI) whose items stay fixed.",
)  # fmt: skip
@click.option(
    "--out", required=True, type=click.Path(path_type=str),
    help="Folder to write (must not exist or be empty).",
)  # fmt: skip
@click.option(
    "--ci", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=DEFAULT_CI,
    show_default=True, help="Credible interval level.",
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the draws.")
@click.option(
    "--draws", "max_draws", type=click.IntRange(2), default=BANK_DRAWS, show_default=True,
    help="Posterior draws of the bank used (evenly spaced; fewer is faster).",
)  # fmt: skip
@click.option("--rescore", is_flag=True, help="Score models that are already in the bank.")
@click.option(
    "--items", "items_file", type=click.Path(exists=True, dir_okay=False, path_type=str),
    default=None, help="Use only the items of this CSV (its `item` column: a short form "
    "from `bayes-dualeval compress`).",
)  # fmt: skip
@allow_approximate_option
@clean_errors
def score(data, bank, out, ci, seed, max_draws, rescore, items_file, allow_approximate):
    """Score the models of DATA against the calibrated run BANK (its items stay fixed).

    Each new model's ability posterior is computed on a grid for every posterior draw of
    the bank's item parameters (no MCMC, seconds). Writes OUT/scores.csv (every model, bank
    and new, with ranks and person fit), OUT/accuracy.csv (predicted accuracy on all the
    bank's questions of each benchmark), OUT/summary.json and OUT/report.html. Item ids are
    built as for a fit, so DATA's files must sit in folders named like the bank's sources.

    \b
    Example:
        bayes-dualeval score new_models/ --bank runs/20260101-120000-nuts --out scored/
        bayes-dualeval score new_models/ --bank runs/bank --items short.csv --out short/
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1)  # the compiled grid kernels are kept on disk for the next score

    from bayes_dualeval import api

    scored = api.open(bank).score(
        list(data),
        ci=ci,
        seed=seed,
        draws=max_draws,
        rescore=rescore,
        items=items_file,
        allow_approximate=allow_approximate,
    )
    path = scored.save(out)
    result = scored.result
    new = result.scores[result.scores["new"]]
    # ranks are among every row: with --rescore a bank model is there twice
    among = f" ({len(result.scores) - len(new)} bank + {len(new)} scored)" if rescore else ""
    for row in new.itertuples():
        fit = "" if row.fit_p != row.fit_p else f", fit_p {row.fit_p:.3f}"
        click.echo(
            f"{row.model}: theta {row.theta_mean:+.2f} [{row.theta_lo:+.2f}, "
            f"{row.theta_hi:+.2f}], rank {row.rank_lo:.0f}-{row.rank_hi:.0f} of "
            f"{len(result.scores)}{among}{fit}"
        )
    for text in result.warnings:
        click.echo(f"warning: {text}", err=True)
    click.echo(f"wrote {path}")
