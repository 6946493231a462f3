"""The ``bayes-dualeval`` command line: a thin click layer over the library.

One module per command (:mod:`~bayes_dualeval.cli.check`, ``simulate``, ``fit``,
``report``, ``compare``, ``predict``, ``score``, ``calibrate``, ``compress``, ``adaptive``,
``sbc``, ``models``);
:mod:`~bayes_dualeval.cli.shared` turns library errors into one clean line, and
:mod:`~bayes_dualeval.cli.options` makes options from the settings dataclasses. JAX is
only imported by the commands that need it, after the host device count is set.
"""

from __future__ import annotations

import click

from bayes_dualeval import __version__
from bayes_dualeval.cli.adaptive import adaptive
from bayes_dualeval.cli.calibrate import calibrate
from bayes_dualeval.cli.check import check
from bayes_dualeval.cli.compare import compare
from bayes_dualeval.cli.compress import compress
from bayes_dualeval.cli.fit import fit
from bayes_dualeval.cli.models import models
from bayes_dualeval.cli.predict import predict
from bayes_dualeval.cli.report import report
from bayes_dualeval.cli.sbc import sbc
from bayes_dualeval.cli.score import score
from bayes_dualeval.cli.shared import CONTEXT
from bayes_dualeval.cli.simulate import simulate


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="bayes-dualeval")
def cli():
    """Rank language models on one latent scale from static benchmarks and arena rewards.

    \b
    Example:
        bayes-dualeval check data/
        bayes-dualeval fit data/ --sampler nuts
        bayes-dualeval compare runs/rasch runs/2pl
        bayes-dualeval score new/ --bank runs/2pl --out scored/
    """


for _command in (
    check,
    simulate,
    fit,
    report,
    compare,
    predict,
    score,
    calibrate,
    compress,
    adaptive,
    sbc,
    models,
):
    cli.add_command(_command)


def main(argv=None) -> None:
    """Entry point of the ``bayes-dualeval`` console script."""
    cli.main(args=argv, prog_name="bayes-dualeval")
