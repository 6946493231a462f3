"""``bayes-dualeval check``: load and validate data, print a summary, without fitting."""

from __future__ import annotations

import click

from bayes_dualeval.cli.options import setting_options
from bayes_dualeval.cli.shared import (
    CONTEXT,
    clean_errors,
    data_argument,
    families_option,
    reward_norm_option,
    skip_invalid_option,
    style_option,
)
from bayes_dualeval.model.config import ModelConfig


@click.command(
    context_settings=CONTEXT, params=setting_options(ModelConfig, ("bb_ratio", "tie_ratio"))
)
@data_argument
@reward_norm_option
@style_option
@families_option
@skip_invalid_option
@clean_errors
def check(data, reward_norm, style, families, skip_invalid, bb_ratio, tie_ratio):
    """Load and validate DATA (files or folders) and print a summary, without fitting.

    Evaluation harnesses' files (inspect_ai logs, lm-evaluation-harness samples, HELM
    runs, AlpacaEval annotations, Arena-Hard and MT-Bench judgments) are summarised per
    harness: files, models, tasks, samples, judges, and what was skipped and why.

    \b
    Example:
        bayes-dualeval check data/ ../more/arena.jsonl --reward-norm global
    """
    from bayes_dualeval.data.distill import distill
    from bayes_dualeval.data.load import load

    reports: list = []
    ds = load(
        data, reward_norm=reward_norm, skip_invalid=skip_invalid, style=style,
        families=families, report_to=reports,
    )  # fmt: skip
    for name, tally in reports[0].harnesses.items():
        click.echo("\n".join(tally.lines(name)))
    click.echo(ds.summary())
    if len(ds.arena_items):
        p = distill(ds, bb_ratio=bb_ratio, tie_ratio=tie_ratio)
        click.echo(
            f"arena pairs: {p.n_total} in all, {p.n_decisive} decisive, "
            f"{p.n_both_bad} both-bad, {p.n_tie} ties"
        )
