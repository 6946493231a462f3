"""``bayes-dualeval compress``: a short form of a calibrated run's items."""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT, allow_approximate_option, clean_errors


@click.command(context_settings=CONTEXT)
@click.argument("run_dir", type=click.Path(path_type=str))
@click.option("--items", "n_items", type=int, required=True, help="Items to keep in all.")
@click.option("--per-source", is_flag=True, help="Keep --items items in each source instead.")
@click.option(
    "--out", type=click.Path(path_type=str), default=None,
    help="CSV file to write (atomically); without it the table is printed.",
)  # fmt: skip
@click.option(
    "--for", "purpose", type=click.Choice(["ranking", "accuracy"]), default="ranking",
    show_default=True,
    help="ranking: the most informative items; accuracy: representative items, each "
    "standing for a cluster of items that the same bank models get right.",
)  # fmt: skip
@click.option(
    "--seed", type=int, default=0, show_default=True,
    help="Breaks ties (ranking) and starts the clustering (accuracy).",
)  # fmt: skip
@allow_approximate_option
@clean_errors
def compress(run_dir, n_items, per_source, purpose, out, seed, allow_approximate):
    """Choose N items of the run RUN_DIR for a short form, covering its sources.

    For ranking (the default), the most informative items: each item's Fisher information
    averaged over the posterior draws and over the bank models' abilities, items spread over
    the difficulty range within each source. For accuracy, representative items: the
    items of each source clustered by their success profiles (the bank's predicted
    probability of each bank model answering them), one per cluster. Columns: item,
    source, kind, b_mean, a_mean, information. Score
    new models on the chosen items with `bayes-dualeval score`.

    \b
    Example:
        bayes-dualeval compress runs/20260101-120000-nuts --items 100 --out short.csv
        bayes-dualeval compress runs/bank --items 100 --for accuracy --out anchors.csv
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from bayes_dualeval import api

    short = api.open(run_dir).compress(
        n_items, for_=purpose, per_source=per_source, seed=seed,
        allow_approximate=allow_approximate,
    )  # fmt: skip
    for text in short.warnings:
        click.secho(f"warning: {text}", err=True, fg="red")
    if out is None:
        click.echo(short.items.to_string(index=False))
    else:
        click.echo(f"wrote {short.save(out)} ({len(short.items)} items)")
        if short.benchmarks is not None:
            click.echo(f"wrote {short.benchmarks_path(out)} (how the short form measures)")
