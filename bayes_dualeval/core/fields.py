"""Settings declared once: dataclass fields whose metadata carries their allowed values.

A field's ``metadata`` may hold ``help``, ``section``, ``choices`` and the bounds ``min`` /
``max`` (with ``min_open`` / ``max_open`` for strict ones). The command line builds its
options from them (:mod:`bayes_dualeval.cli.options`) and :func:`check_fields` validates
an instance against them, so a default, a range or a help line is written in one place.

Messages of the library name a setting as a Python user writes it, through
:func:`setting` (``draws=2000``, ``sampler='nuts'``, ``max_tree_depth`` in backquotes),
never as a command-line flag: the command line rewrites these references into its own
options (:func:`bayes_dualeval.cli.shared.to_flags`).
"""

from __future__ import annotations

import dataclasses

from bayes_dualeval.core.errors import ConfigError


def check_fields(obj) -> None:
    """Check a dataclass's values against the ``choices`` and bounds in its fields' metadata.

    Parameters
    ----------
    obj : dataclass instance
        Fields without ``choices``, ``min`` or ``max`` metadata are not checked.

    Raises
    ------
    ConfigError
        Naming the first field whose value is not allowed, and what is.
    """
    for f in dataclasses.fields(obj):
        value, meta = getattr(obj, f.name), f.metadata
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            raise ConfigError(f"{f.name} must be one of {', '.join(choices)}; got {value!r}")
        if ("min" in meta or "max" in meta) and not _within(value, meta):
            raise ConfigError(f"{f.name} must be {bounds_text(meta)}, got {value}")


def _within(value, meta) -> bool:
    low, high = meta.get("min"), meta.get("max")
    if low is not None and (value <= low if meta.get("min_open") else value < low):
        return False
    return high is None or (value < high if meta.get("max_open") else value <= high)


def bounds_text(meta) -> str:
    """The allowed range of a field in words: ``positive``, ``at least 1``, ``in (0, 1)``.

    Parameters
    ----------
    meta : mapping
        A field's metadata with ``min`` and/or ``max`` (and ``min_open`` / ``max_open``).

    Returns
    -------
    str
    """
    low, high = meta.get("min"), meta.get("max")
    low_open, high_open = meta.get("min_open", False), meta.get("max_open", False)
    if high is None:
        if low == 0:
            return "positive" if low_open else "non-negative"
        return f"greater than {low}" if low_open else f"at least {low}"
    if low is None:
        return f"less than {high}" if high_open else f"at most {high}"
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    return f"in {left}{low:g}, {high:g}{right}"


def setting(name: str, value=None) -> str:
    """A setting as library messages name it: ``name=value``, or the name in backquotes.

    The one spelling of a reference to a setting (a field of
    :class:`~bayes_dualeval.model.config.ModelConfig` or
    :class:`~bayes_dualeval.inference.settings.SamplerSettings`, or a keyword argument of a
    library function such as ``out`` or ``force``) in an error, a warning or a
    convergence problem; the command line turns it into its flag.

    Parameters
    ----------
    name : str
        The field or keyword name, as in Python (``max_tree_depth``).
    value : optional
        A value to suggest, written as Python writes it (``repr``: strings quoted); None
        names the setting alone.

    Returns
    -------
    str
        ``name=value`` (``draws=2000``, ``sampler='nuts'``, ``force=True``), or the
        name in backquotes when no value is given.

    Examples
    --------
    >>> setting("draws", 2000)
    'draws=2000'
    >>> setting("item_prior", "independent")
    "item_prior='independent'"
    >>> setting("max_tree_depth")
    '`max_tree_depth`'
    """
    if value is None:
        return f"`{name}`"
    if hasattr(value, "item"):  # a NumPy scalar: its Python value, not np.float64(...)
        value = value.item()
    return f"{name}={value!r}"
