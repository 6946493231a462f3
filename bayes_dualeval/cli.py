"""The ``bayes-dualeval`` command line: a thin click layer over the library.

Library errors (:class:`~bayes_dualeval.errors.DualEvalError`) become one clean line and a
non-zero exit status; warnings are shown as ``warning: ...`` lines on stderr. JAX is only
imported by the commands that need it, after the host device count is set.
"""

from __future__ import annotations

import functools
import warnings

import click

from bayes_dualeval import __version__
from bayes_dualeval.errors import DualEvalError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _clean_errors(func):
    """Turn library errors into ``click.ClickException`` and show warnings as one line."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return func(*args, **kwargs)
            except DualEvalError as exc:
                raise click.ClickException(str(exc)) from None
            except OSError as exc:
                raise click.ClickException(f"{exc.filename or ''}: {exc.strerror or exc}") from None
            finally:
                _show_warnings(caught)

    return wrapper


def _show_warnings(caught) -> None:
    from bayes_dualeval.errors import ConvergenceWarning, DataWarning

    seen = set()
    for w in caught:
        if not issubclass(w.category, (DataWarning, ConvergenceWarning)):
            continue
        text = str(w.message)
        if text in seen:
            continue
        seen.add(text)
        click.secho(f"warning: {text}", err=True, fg="yellow")


_paths = click.argument(
    "data", nargs=-1, required=True, type=click.Path(exists=True, path_type=str)
)
_reward_norm = click.option(
    "--reward-norm",
    type=click.Choice(["source", "global"]),
    default="source",
    show_default=True,
    help="Z-normalise rewards per source folder, or with one global z-score (DualEval).",
)
_skip_invalid = click.option(
    "--skip-invalid",
    is_flag=True,
    help="Skip and count rows with invalid values instead of stopping at the first one.",
)


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="bayes-dualeval")
def cli():
    """Rank language models on one latent scale from static benchmarks and arena rewards.

    \b
    Example:
        bayes-dualeval check data/
        bayes-dualeval fit data/ --sampler nuts
    """


@cli.command(context_settings=CONTEXT)
@_paths
@_reward_norm
@_skip_invalid
@click.option("--bb-ratio", type=float, default=0.15, show_default=True,
              help="Quantile of pairwise max(z) at or below which a pair is both-bad (0 = off).")
@click.option("--tie-ratio", type=float, default=0.10, show_default=True,
              help="Quantile of pairwise |dz| at or below which a pair is a tie (0 = off).")
@_clean_errors
def check(data, reward_norm, skip_invalid, bb_ratio, tie_ratio):
    """Load and validate DATA (files or folders) and print a summary, without fitting.

    \b
    Example:
        bayes-dualeval check data/ ../more/arena.jsonl --reward-norm global
    """
    from bayes_dualeval.dataset import load
    from bayes_dualeval.distill import distill

    ds = load(data, reward_norm=reward_norm, skip_invalid=skip_invalid)
    click.echo(ds.summary())
    if len(ds.arena_items):
        p = distill(ds, bb_ratio=bb_ratio, tie_ratio=tie_ratio)
        click.echo(
            f"arena pairs: {p.n_total} in all, {p.n_decisive} decisive, "
            f"{p.n_both_bad} both-bad, {p.n_tie} ties"
        )


@cli.command(context_settings=CONTEXT)
@click.argument("out", type=click.Path(file_okay=False, path_type=str))
@click.option("--models", "n_models", type=click.IntRange(2), default=12, show_default=True)
@click.option("--static-items", type=click.IntRange(0), default=300, show_default=True)
@click.option("--arena-prompts", type=click.IntRange(0), default=100, show_default=True)
@click.option("--domains", type=click.IntRange(1), default=3, show_default=True)
@click.option("--missing", type=click.FloatRange(0, 1, max_open=True), default=0.0,
              show_default=True, help="Probability that a (model, item) cell is missing.")
@click.option("--reward-noise", type=click.FloatRange(0), default=0.3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--force", is_flag=True, help="Overwrite files of a previous simulation.")
@_clean_errors
def simulate(out, n_models, static_items, arena_prompts, domains, missing, reward_noise, seed,
             force):
    """Write simulated static and arena files with known truth to OUT.

    Writes OUT/bench/static.jsonl, OUT/arena/arena.jsonl and OUT/truth.json (true theta per
    model, a and b per item id, gamma); the process is described in docs/simulator.md.

    \b
    Example:
        bayes-dualeval simulate sim/ --models 20 --static-items 400 --arena-prompts 150 \\
            --domains 3 --missing 0.1 --seed 7
    """
    from bayes_dualeval import simulate as sim

    static, arena, truth = sim.simulate(
        n_models, static_items, arena_prompts, n_domains=domains, missing=missing,
        reward_noise=reward_noise, seed=seed,
    )
    for path in sim.write(out, static, arena, truth, force=force):
        click.echo(f"wrote {path}")


def main(argv=None) -> None:
    """Entry point of the ``bayes-dualeval`` console script."""
    cli.main(args=argv, prog_name="bayes-dualeval")
