"""``bayes-dualeval models``: list the named model specifications."""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT


@click.command(context_settings=CONTEXT)
def models():
    """List the named model specifications that --model accepts.

    \b
    Example:
        bayes-dualeval models
    """
    from bayes_dualeval.model.config import available_models, models_dir

    for name, description in available_models().items():
        click.echo(f"{name:<18} {description}")
    click.echo(f"(specifications in {models_dir()})")
