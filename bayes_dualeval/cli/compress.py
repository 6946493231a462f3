"""``bayes-dualeval compress``: a short form of a calibrated run's items."""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT, clean_errors


@click.command(context_settings=CONTEXT)
@click.argument("run_dir", type=click.Path(path_type=str))
@click.option("--items", "n_items", type=int, required=True, help="Items to keep in all.")
@click.option("--per-source", is_flag=True, help="Keep --items items in each source instead.")
@click.option(
    "--out", type=click.Path(path_type=str), default=None,
    help="CSV file to write (atomically); without it the table is printed.",
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="Breaks ties.")
@clean_errors
def compress(run_dir, n_items, per_source, out, seed):
    """Choose the N most informative items of the run RUN_DIR, covering its sources.

    Information is each item's Fisher information averaged over the posterior draws and
    over the bank models' abilities, items spread over the difficulty range within each
    source. Columns: item, source, kind, b_mean, a_mean, information, weight. Score new
    models on the chosen items with `bayes-dualeval score`.

    \b
    Example:
        bayes-dualeval compress runs/20260101-120000-nuts --items 100 --out short.csv
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from bayes_dualeval.measure.bank import Bank
    from bayes_dualeval.measure.compress import compress as compress_bank
    from bayes_dualeval.measure.output import write_table

    table = compress_bank(Bank.from_run(run_dir), n_items, per_source=per_source, seed=seed)
    if out is None:
        click.echo(table.to_string(index=False))
    else:
        click.echo(f"wrote {write_table(table, out)} ({len(table)} items)")
