"""What the commands share: clean error lines, warnings on stderr, the data options.

Library errors (:class:`~bayes_dualeval.core.errors.DualEvalError`) become one clean line and a
non-zero exit status; warnings are shown as ``warning: ...`` lines on stderr. The library
names settings as Python does (``draws=2000``, ``sampler='nuts'``:
:func:`bayes_dualeval.core.fields.setting`); :func:`to_flags` says them as options
(``--draws 2000``, ``--sampler nuts``) in every such line.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import warnings
from contextlib import contextmanager

import click

from bayes_dualeval.cli.options import SectionOption, cli_fields, flag
from bayes_dualeval.core.errors import ConfigError, DualEvalError
from bayes_dualeval.data.dataset import REWARD_NORMS
from bayes_dualeval.data.load import load
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.runs.selection import ALL, ANOMALY_TOP, anomaly_rows

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: Keyword arguments of library functions that library messages name and that are options
#: of a command but not settings fields: ``out`` and ``force`` (``simulate``, ``fit``),
#: ``device`` (``fit``), ``rescore`` (``score``).
COMMAND_FLAGS = {
    "out": "--out", "force": "--force", "device": "--device", "rescore": "--rescore",
    "allow_approximate": "--allow-approximate", "drift_threshold": "--drift-threshold",
    "fdr": "--fdr", "arena_prompts": "--arena-prompts",
}  # fmt: skip

#: A reference to a setting as :func:`bayes_dualeval.core.fields.setting` writes it: the
#: name in backquotes, or ``name=value`` with a Python literal (a quoted string, a boolean, a
#: number).
_REFERENCE = re.compile(
    r"`(?P<alone>\w+)`"
    r"|(?<![\w.])(?P<name>\w+)="
    r"(?P<value>'[^']*'|\"[^\"]*\"|True|False|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?!\w)"
)


@functools.cache
def setting_flags() -> dict[str, str]:
    """The option of every setting a library message may name, by field or keyword name.

    Returns
    -------
    dict of str to str
        The options generated from the fields of
        :class:`~bayes_dualeval.inference.settings.SamplerSettings` and
        :class:`~bayes_dualeval.model.config.ModelConfig`
        (:func:`~bayes_dualeval.cli.options.flag`), and :data:`COMMAND_FLAGS`.
    """
    fields = [*cli_fields(SamplerSettings), *cli_fields(ModelConfig)]
    return {**{f.name: flag(f) for f in fields}, **COMMAND_FLAGS}


def to_flags(text: str) -> str:
    """A library message with its references to settings said as command-line options.

    ``draws=2000`` becomes ``--draws 2000``, ``sampler='nuts'`` ``--sampler nuts``,
    ``force=True`` the flag ``--force``, and a name in backquotes (`` `max_tree_depth` ``)
    its option (``--max-tree-depth``). Names that are no setting, and ``name=False``, are
    left as they are.

    Parameters
    ----------
    text : str
        A message of the library (an error, a warning, a convergence problem or note).

    Returns
    -------
    str

    Examples
    --------
    >>> to_flags("run longer (draws=2000, warmup=2000)")
    'run longer (--draws 2000, --warmup 2000)'
    >>> to_flags("consider item_prior='independent'; `max_tree_depth` raises the cap")
    'consider --item-prior independent; --max-tree-depth raises the cap'
    """
    flags = setting_flags()

    def say(match: re.Match) -> str:
        name = match["alone"] or match["name"]
        if name not in flags:
            return match[0]
        if match["alone"]:
            return flags[name]
        value = match["value"]
        if value == "True":
            return flags[name]
        if value == "False":
            return match[0]
        if value[0] in "'\"":  # a string: the option takes it unquoted
            value = value[1:-1]
        return f"{flags[name]} {value}"

    return _REFERENCE.sub(say, text)


def clean_errors(func):
    """Turn library errors into ``click.ClickException`` and show warnings as one line."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return func(*args, **kwargs)
            except DualEvalError as exc:
                raise click.ClickException(to_flags(str(exc))) from None
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
        text = to_flags(str(w.message))
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


class CommaList(click.ParamType):
    """A comma-separated list of names (``length,n_headers``), as a tuple."""

    name = "COL[,COL...]"

    def convert(self, value, param, ctx):
        """``"a, b"`` -> ``("a", "b")``; empty names are an error."""
        if isinstance(value, tuple):
            return value
        names = tuple(part.strip() for part in str(value).split(","))
        if not all(names):
            self.fail(f"{value!r} holds an empty name", param, ctx)
        return names


style_option = click.option(
    "--style",
    cls=SectionOption,
    section="Data",
    type=CommaList(),
    default=(),
    help="Numeric fields of the arena rows (e.g. length,n_headers) taken into the arena "
    "comparisons with a coefficient per covariate and judge: a style-adjusted leaderboard "
    "and style.csv.",
)
families_option = click.option(
    "--families",
    cls=SectionOption,
    section="Data",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    default=None,
    help="CSV with columns model_label,family: each model's family, for the judges' "
    "self-preference (judge_bias.csv); replaces the rows' family fields.",
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


allow_approximate_option = click.option(
    "--allow-approximate",
    is_flag=True,
    help="Use a bank that is not a converged NUTS posterior (SVI, or NUTS that failed its "
    "convergence check), refused otherwise; every output then says so.",
)

fit_anomalies_option = anomalies_option(default=str(ANOMALY_TOP), section="Run")
report_anomalies_option = anomalies_option(default=None, note="  [default: the run's]")


class _Lines(logging.Handler):
    """The library's progress records, one line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(record.getMessage(), err=True)


@contextmanager
def progress_lines(quiet: bool):
    """Show the library's INFO records (what each sampling round does) unless ``quiet``."""
    if quiet:
        yield
        return
    log = logging.getLogger("bayes_dualeval")
    handler, level = _Lines(level=logging.INFO), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
