"""Exceptions and warnings raised by bayes-dualeval.

Every error caused by the user's input or options is a :class:`DualEvalError`; the
command-line interface turns these into one clean line and a non-zero exit status.
"""


class DualEvalError(Exception):
    """Base class of every error that the user can fix (bad data, bad option, bad path)."""


class InputError(DualEvalError, ValueError):
    """Input data that cannot be read or fitted.

    The message names the file and line where one is known.
    """


class ConfigError(DualEvalError, ValueError):
    """An option or model specification that is invalid."""


class DataWarning(UserWarning):
    """Something in the input was skipped or repaired (missing fields, duplicates, ...)."""


class ConvergenceWarning(UserWarning):
    """The sampler's diagnostics say the posterior may not be trustworthy."""


class PerformanceWarning(UserWarning):
    """The run works but is slower than it needs to be, and the message says how to fix it."""


class ReportWarning(UserWarning):
    """A report panel, or the whole report, could not be written (the run itself is safe)."""
