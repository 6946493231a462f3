"""``bayes-dualeval adaptive``: simulate adaptive testing of models against a bank."""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT, allow_approximate_option, clean_errors


@click.command(context_settings=CONTEXT)
@click.option(
    "--bank", required=True, type=click.Path(path_type=str),
    help="A run folder of `bayes-dualeval fit` (NUTS or SVI) whose items stay fixed.",
)  # fmt: skip
@click.option(
    "--data", "data", required=True, multiple=True, type=click.Path(exists=True, path_type=str),
    help="Evaluation files or folders whose answers act as the oracle (repeatable).",
)  # fmt: skip
@click.option(
    "--select", type=click.Choice(["fisher", "kl", "random"]), default="fisher",
    show_default=True, help="Next item: most information, most expected variance "
    "reduction, or random.",
)  # fmt: skip
@click.option("--target-se", type=float, default=0.3, show_default=True,
              help="Stop when the posterior sd falls below this.")  # fmt: skip
@click.option("--max-items", type=int, default=50, show_default=True,
              help="Stop after this many items (questions and prompts).")  # fmt: skip
@click.option("--exposure", type=int, default=1, show_default=True,
              help="Randomesque exposure control: choose among the R best items.")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of random choices.")
@click.option(
    "--out", required=True, type=click.Path(path_type=str),
    help="Folder to write (must not exist or be empty).",
)  # fmt: skip
@allow_approximate_option
@clean_errors
def adaptive(bank, data, select, target_se, max_items, exposure, seed, out, allow_approximate):
    """Ask each model of --data the bank's items one at a time until its sd is small.

    The answers come from the model's responses in --data (static labels, and arena
    rewards compared with the bank models' on the same prompt: one pool of both); after
    each answer the ability posterior is updated on a grid per posterior draw of the bank's
    items. Writes OUT/adaptive.csv (one row per model), OUT/trace.csv (one row per item),
    the same for a random order (random_*.csv, unless --select random) and
    OUT/sd_by_items.png.

    \b
    Example:
        bayes-dualeval adaptive --bank runs/2pl --data new/ --target-se 0.25 --out cat/
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from bayes_dualeval import api

    test = api.open(bank).adaptive(
        list(data), select=select, target_se=target_se, max_items=max_items,
        exposure=exposure, seed=seed, allow_approximate=allow_approximate,
    )  # fmt: skip
    path = test.save(out)
    result, baseline = test.result, test.baseline
    for row in result.summary.itertuples():
        click.echo(
            f"{row.model}: {row.n_items} items, theta {row.theta_mean:+.2f} "
            f"(sd {row.theta_sd:.2f}), stopped by {row.stopped_by}"
        )
    if baseline is not None:
        click.echo(
            f"mean items: {select} {result.summary['n_items'].mean():.1f}, "
            f"random {baseline.summary['n_items'].mean():.1f}"
        )
    for text in test.warnings:
        click.secho(f"warning: {text}", err=True, fg="red")
    click.echo(f"wrote {path}")
