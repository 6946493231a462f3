"""``bayes-dualeval compare``: rank fitted runs by PSIS-LOO (ArviZ ``loo`` and ``compare``)."""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT, clean_errors, to_flags


def _unit_line(table) -> str:
    """What one left-out value is, and how many there are."""
    unit, parts = table.attrs.get("unit", {}), []
    if "static" in unit:
        parts.append(f"{table.attrs['n_static']:,} static labels")
    if "arena" in unit:
        parts.append(f"{table.attrs['n_arena']:,} arena prompts (each {unit['arena']})")
    return "PSIS-LOO, leaving out one at a time: " + " and ".join(parts)


def format_table(table) -> str:
    """The comparison as aligned text, the preferred run, then one line per warning."""
    from bayes_dualeval.posterior.loo import CLEAR_DIFF, CLEAR_DSE

    columns = ["rank", "run", "elpd_loo", "se", "elpd_diff", "dse", "dse_crossed", "p_loo",
               "n_bad_k"]  # fmt: skip
    shown = table[[c for c in columns if c in table]]
    text = shown.to_string(index=False, float_format=lambda x: f"{x:.2f}")
    lines = [_unit_line(table), "", text, ""]
    (choice,) = table.loc[table["preferred"], "run"]
    if len(table) > 1:
        lines.append(
            f"preferred: {choice} (the fewest effective parameters, p_loo, among the runs "
            f"whose elpd_diff is at most {CLEAR_DIFF:g} or {CLEAR_DSE:g} dse)"
        )
        if "dse_note" in table.attrs:
            lines.append(f"note: {table.attrs['dse_note']}")
    else:
        lines.append(f"preferred: {choice} (the only run)")
    lines += [
        f"warning: {r['run']}: {to_flags(r['warning'])}"
        for _, r in table.iterrows()
        if r["warning"]
    ]
    return "\n".join(lines)


@click.command(context_settings=CONTEXT)
@click.argument(
    "runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=str)
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="Also write the table to this CSV file.",
)
@clean_errors
def compare(runs, out):
    """Rank RUNS (run folders fitted to the same data) by PSIS-LOO.

    One elpd per run over the same left-out units: one static label, one arena prompt
    with its set of pairs (or its rewards). Rank 1 has the highest elpd_loo; elpd_diff and
    dse are the difference to rank 1 and its standard error (units independent), and
    dse_crossed its standard error summed by model and by item (never below dse); n_bad_k
    counts units with Pareto k > 0.7; preferred marks the run to choose: the smallest
    p_loo among those whose elpd_diff is within noise (at most 4, or at most 2 dse). Runs fitted to
    different data, with a different arena likelihood, or without a pointwise log
    likelihood are refused.

    \b
    Example:
        bayes-dualeval compare runs/rasch runs/2pl --out compare.csv
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from bayes_dualeval.core import atomic
    from bayes_dualeval.runs.compare import compare_runs

    table = compare_runs(runs)
    click.echo(format_table(table))
    if out:
        path = atomic.write_text(out, table.to_csv(index=False, float_format="%.6g"))
        click.echo(f"wrote {path}")
