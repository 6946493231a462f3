"""What the commands share: clean error lines, warnings on stderr, the data options.

Library errors (:class:`~bayes_dualeval.errors.DualEvalError`) become one clean line and a
non-zero exit status; warnings are shown as ``warning: ...`` lines on stderr.
"""

from __future__ import annotations

import functools
import inspect
import warnings

import click

from bayes_dualeval.cli.options import SectionOption
from bayes_dualeval.data.dataset import REWARD_NORMS, load
from bayes_dualeval.errors import DualEvalError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def clean_errors(func):
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
                text = f"{exc.filename or ''}: {exc.strerror or exc}"
                raise click.ClickException(text) from None
            finally:
                _show_warnings(caught)

    return wrapper


def _show_warnings(caught) -> None:
    from bayes_dualeval.errors import ConvergenceWarning, DataWarning, ReportWarning

    seen = set()
    for w in caught:
        if not issubclass(w.category, (DataWarning, ConvergenceWarning, ReportWarning)):
            continue
        text = str(w.message)
        if text in seen:
            continue
        seen.add(text)
        click.secho(f"warning: {text}", err=True, fg="yellow")


def say(text: str, quiet: bool) -> None:
    """Show a progress line on stderr unless ``quiet``."""
    if not quiet:
        click.echo(text, err=True)


data_argument = click.argument(
    "data", nargs=-1, required=True, type=click.Path(exists=True, path_type=str)
)
reward_norm_option = click.option(
    "--reward-norm",
    cls=SectionOption,
    section="Data",
    type=click.Choice(REWARD_NORMS),
    default=inspect.signature(load).parameters["reward_norm"].default,
    show_default=True,
    help="Z-normalise rewards per source folder, or with one global z-score (DualEval).",
)
skip_invalid_option = click.option(
    "--skip-invalid",
    cls=SectionOption,
    section="Data",
    is_flag=True,
    help="Skip and count rows with invalid values instead of stopping at the first one.",
)
