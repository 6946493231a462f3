"""What the commands share: clean error lines, warnings on stderr, the data options.

Library errors (:class:`~bayes_dualeval.core.errors.DualEvalError`) become one clean line and a
non-zero exit status; warnings are shown as ``warning: ...`` lines on stderr.
"""

from __future__ import annotations

import functools
import inspect
import warnings

import click

from bayes_dualeval.cli.options import SectionOption
from bayes_dualeval.core.errors import ConfigError, DualEvalError
from bayes_dualeval.data.dataset import REWARD_NORMS, load
from bayes_dualeval.runs.selection import ALL, ANOMALY_TOP, anomaly_rows

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
    from bayes_dualeval.core.errors import ConvergenceWarning, DataWarning, ReportWarning

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


class AnomalyRows(click.ParamType):
    """``--anomalies``: ``all`` or a whole number of rows.

    Checked by :func:`~bayes_dualeval.runs.selection.anomaly_rows`.
    """

    name = f"{ALL}|N"

    def convert(self, value, param, ctx):
        """The checked setting (``"all"`` or an int); a bad value is a usage error."""
        try:
            return anomaly_rows(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


#: What ``--anomalies`` means, in the help of ``fit`` and ``report``.
ANOMALIES_HELP = (
    f"Rows of anomalies.csv, most surprising first: '{ALL}' (every cell) or N (the N most "
    "surprising cells and every cell flagged by its q-value)."
)


def anomalies_option(*, default, section: str = "Options", note: str = ""):
    """The ``--anomalies`` option (default ``default``; ``None``: the run's setting)."""
    return click.option(
        "--anomalies",
        cls=SectionOption,
        section=section,
        type=AnomalyRows(),
        default=default,
        show_default=default is not None,
        help=ANOMALIES_HELP + note,
    )


fit_anomalies_option = anomalies_option(default=str(ANOMALY_TOP), section="Run")
report_anomalies_option = anomalies_option(default=None, note="  [default: the run's]")
