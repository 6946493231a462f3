"""``bayes-dualeval predict``: predictions for model-item pairs of a fitted run, and routing."""

from __future__ import annotations

import click

from bayes_dualeval.api.run import DEFAULT_CI
from bayes_dualeval.cli.shared import CONTEXT, allow_approximate_option, clean_errors


def _names(text: str | None) -> list[str] | None:
    """A comma-separated list of labels (None when not given)."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise click.BadParameter("give at least one name")
    return names


def read_table(path: str, required: tuple[str, ...], what: str):
    """A CSV file with the ``required`` columns (one-line errors, never a traceback)."""
    import pandas as pd

    from bayes_dualeval.core.errors import InputError

    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read {what} ({exc})") from None
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise InputError(
            f"{path}: {what} needs the column(s) {', '.join(missing)}; it has "
            f"{', '.join(table.columns) or 'none'}"
        )
    return table


def _costs(path: str, models) -> list[float]:
    """The cost of each of ``models`` from a CSV with columns ``model, cost``."""
    from bayes_dualeval.core.errors import InputError

    table = read_table(path, ("model", "cost"), "the cost file")
    cost = {}
    for row, (name, value) in enumerate(zip(table["model"], table["cost"], strict=True), 2):
        try:
            cost[name] = float(value)
        except ValueError:
            raise InputError(f"{path}, line {row}: cost {value!r} is not a number") from None
    absent = [m for m in models if m not in cost]
    if absent:
        raise InputError(f"{path}: no cost for {', '.join(map(repr, absent[:5]))}")
    return [cost[m] for m in models]


@click.command(context_settings=CONTEXT)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.option(
    "--cells",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    default=None,
    help="CSV of the cells to predict: columns model, item (and opponent for arena prompts).",
)
@click.option("--models", "model_list", default=None, help="Comma-separated models [all].")
@click.option("--items", "item_list", default=None, help="Comma-separated item ids [all].")
@click.option(
    "--route",
    is_flag=True,
    help="For each item, the model most likely to succeed and P(it is the best).",
)
@click.option(
    "--cost",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    default=None,
    help="With --route: CSV with columns model, cost; routes by p - cost-weight x cost.",
)
@click.option(
    "--cost-weight",
    type=click.FloatRange(0),
    default=1.0,
    show_default=True,
    help="With --cost: success probability one unit of cost is worth.",
)
@click.option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=DEFAULT_CI,
    show_default=True,
    help="Level of the intervals.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="CSV to write [RUN_DIR/predictions.csv, or RUN_DIR/routing.csv with --route].",
)
@allow_approximate_option
@clean_errors
def predict(
    run_dir, cells, model_list, item_list, route, cost, cost_weight, ci, out, allow_approximate
):
    """Predict any model-item pair of RUN_DIR, answered or not, with intervals.

    Static questions: P(correct); arena prompts: P(model beats opponent), for each other
    chosen model unless --cells names the opponent. Columns: model, opponent, item, kind,
    p_mean, p_lo, p_hi, observed (the label, or the soft target sigmoid(z_model -
    z_opponent), where the data had the cell; else empty), ci. With --route: for each item
    the model with the highest expected success (net of --cost), P(it is the best), the
    runner-up, and the routed choice against the best single model and the oracle.

    \b
    Example:
        bayes-dualeval predict runs/2pl --models gpt-4o,atlas-70b --items bench::math_bench_3
        bayes-dualeval predict runs/2pl --cells wanted.csv --out wanted-predicted.csv
        bayes-dualeval predict runs/2pl --route --cost prices.csv --cost-weight 0.1
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from pathlib import Path

    from bayes_dualeval import api
    from bayes_dualeval.core.errors import InputError

    if cells is not None and (model_list or item_list):
        raise InputError("give either --cells or --models/--items, not both")
    if cost is not None and not route:
        raise InputError("--cost only applies with --route")
    run = api.open(run_dir)
    models, items = _names(model_list), _names(item_list)
    if route:
        costs = None
        if cost is not None:
            costs = _costs(cost, models or list(run.dataset.models))
        routed = run.route(
            models, items, cost=costs, cost_weight=cost_weight, ci=ci,
            allow_approximate=allow_approximate,
        )  # fmt: skip
        summary = routed.summary
        target = routed.save(Path(out) if out else Path(run_dir) / "routing.csv")
        click.echo(
            f"routed {summary['items']:,} items over {summary['models']} models: mean P(success) "
            f"{summary['routed']:.3f} routed, {summary['best_single']:.3f} for the best single "
            f"model ({summary['best_single_model']}), {summary['oracle']:.3f} for the oracle"
        )
        if costs is not None:
            click.echo(
                f"mean utility (p - {cost_weight:g} x cost): {summary['routed_utility']:.3f} "
                f"routed, {summary['best_single_utility']:.3f} best single model, "
                f"{summary['oracle_utility']:.3f} oracle"
            )
    else:
        wanted = None
        if cells is not None:
            wanted = read_table(cells, ("model", "item"), "the cells file")
        predicted = run.predict(
            models, items, cells=wanted, ci=ci, allow_approximate=allow_approximate
        )
        table = predicted.table
        target = predicted.save(Path(out) if out else Path(run_dir) / "predictions.csv")
        seen = int(table["observed"].notna().sum())
        click.echo(f"predicted {len(table):,} cells ({seen:,} of them in the data)")
    for text in (routed if route else predicted).warnings:
        click.secho(f"warning: {text}", err=True, fg="red")
    click.echo(f"wrote {target}")
