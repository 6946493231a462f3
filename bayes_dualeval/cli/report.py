"""``bayes-dualeval report``: rebuild a run's report and tables from its posterior."""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT, clean_errors, report_anomalies_option


@click.command(context_settings=CONTEXT)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=None,
    help="Credible interval level of the tables and report.  [default: the run's]",
)
@report_anomalies_option
@clean_errors
def report(run_dir, ci, anomalies):
    """Rebuild the report and tables of RUN_DIR from its posterior.nc, without refitting.

    Writes RUN_DIR/report.html (one self-contained file), RUN_DIR/report.md with its
    figures in RUN_DIR/figures/, and the CSV tables again (at --ci and with --anomalies
    rows, if given; else as the run recorded them).

    \b
    Example:
        bayes-dualeval report runs/20260101-120000-nuts
        bayes-dualeval report runs/20260101-120000-nuts --ci 0.9
        bayes-dualeval report runs/20260101-120000-nuts --anomalies all
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from pathlib import Path

    from bayes_dualeval import api

    # None: the run's recorded level and anomalies setting
    written = api.open(run_dir).rewrite(ci=ci, anomalies=anomalies)
    figures = [p for p in written if p.suffix == ".png"]
    for path in (p for p in written if p.suffix != ".png"):
        click.echo(f"wrote {path}")
    click.echo(f"wrote {len(figures)} figures in {Path(run_dir) / 'figures'}")
