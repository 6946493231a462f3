"""Command-line options generated from the settings dataclasses, and help in sections.

A dataclass field is an option when its ``metadata`` has a ``help`` line. The field gives
the option everything else: its name (``--`` and the field name with hyphens, unless
``metadata["cli"]`` names it), its type (``choices``, or ``int``/``float`` within ``min`` /
``max``, ``min_open`` / ``max_open``), its default and the heading it is listed under
(``section``). So a default, a range or a help line is written once, next to the field:

* :func:`setting_options` gives options whose default is the field's own
  (:class:`~bayes_dualeval.inference.settings.SamplerSettings`);
* :func:`override_options` gives options that, when given, override one field of a
  configuration (:class:`~bayes_dualeval.model.config.ModelConfig` read from ``--model``);
  their help shows the value they override, ``[spec: VALUE]``.

A help line that names a setting the library's way (:func:`bayes_dualeval.core.fields.setting`)
is shown with its flag (:func:`bayes_dualeval.cli.shared.to_flags`).
"""

from __future__ import annotations

import dataclasses

import click

_TYPES = {"int": int, "float": float, "str": str}


class SectionOption(click.Option):
    """A click option listed under a heading of its command's help (see :class:`Sectioned`)."""

    def __init__(self, *args, section: str = "Options", **kwargs):
        super().__init__(*args, **kwargs)
        self.section = section


class OverrideOption(SectionOption):
    """An option that overrides one setting; its help shows the setting's current value."""

    def __init__(self, *args, current, **kwargs):
        super().__init__(*args, **kwargs)
        self.current = current

    def get_help_record(self, ctx):
        """The help line with ``[spec: VALUE]`` joined to click's own bracket (the range)."""
        decl, text = super().get_help_record(ctx)
        spec = f"spec: {_show(self.current)}"
        head, mark, tail = text.rpartition("  [")
        if mark and text.endswith("]"):
            return decl, f"{head}  [{spec}; {tail}"
        return decl, f"{text}  [{spec}]"


class Sectioned(click.Command):
    """A command whose help lists its options under headings, in order of appearance."""

    def format_options(self, ctx, formatter):
        """Write each heading and its options (``-h`` comes last, under "Options")."""
        sections: dict[str, list] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and isinstance(param, click.Option):
                sections.setdefault(getattr(param, "section", "Options"), []).append(record)
        if "Options" in sections:
            sections["Options"] = sections.pop("Options")
        for title, rows in sections.items():
            with formatter.section(title):
                formatter.write_dl(rows)


def cli_fields(cls, names=None) -> list[dataclasses.Field]:
    """The fields of a settings dataclass that are command-line options, in field order.

    Parameters
    ----------
    cls : dataclass type
    names : iterable of str, optional
        Only these fields (each must be an option field).

    Returns
    -------
    list of dataclasses.Field
    """
    fields = [f for f in dataclasses.fields(cls) if "help" in f.metadata]
    if names is None:
        return fields
    chosen = {f.name: f for f in fields}
    return [chosen[name] for name in names]


def setting_options(cls, names=None, *, section: str = "Options") -> list[click.Option]:
    """Options with the fields' own defaults (shown in the help).

    Parameters
    ----------
    cls : dataclass type
    names : iterable of str, optional
        Only these fields; default every field with a ``help``.
    section : str
        Help heading of the fields whose metadata names no ``section``.

    Returns
    -------
    list of click.Option
    """
    return [
        _option(
            f,
            SectionOption,
            section=f.metadata.get("section", section),
            default=f.default,
            show_default=True,
        )
        for f in cli_fields(cls, names)
    ]


def override_options(base, names=None, *, heading: str = "{} (override the spec)") -> list:
    """Options that override fields of ``base`` when given (default ``None``).

    Parameters
    ----------
    base : dataclass instance
        The configuration whose values the help shows as ``[spec: VALUE]``.
    names : iterable of str, optional
        Only these fields; default every field with a ``help``.
    heading : str
        Help heading, formatted with the field's ``section``.

    Returns
    -------
    list of click.Option
    """
    return [
        _option(
            f,
            OverrideOption,
            default=None,
            current=getattr(base, f.name),
            section=heading.format(f.metadata.get("section", "Settings")),
        )
        for f in cli_fields(type(base), names)
    ]


def split_values(values: dict, cls) -> tuple[dict, dict]:
    """Separate the parsed values of ``cls``'s option fields from the others.

    Parameters
    ----------
    values : dict
        Parsed parameters of a command, by name.
    cls : dataclass type

    Returns
    -------
    mine, rest : dict
        The values of ``cls``'s option fields, and everything else.
    """
    names = {f.name for f in cli_fields(cls)}
    mine = {k: v for k, v in values.items() if k in names}
    return mine, {k: v for k, v in values.items() if k not in names}


def flag(f: dataclasses.Field) -> str:
    """The option of a field: ``metadata["cli"]``, else ``--`` and its name with hyphens."""
    return f.metadata.get("cli", "--" + f.name.replace("_", "-"))


def _option(f: dataclasses.Field, kind, *, section: str, **kwargs) -> click.Option:
    # imported here: shared imports this module (and the options it makes) first
    from bayes_dualeval.cli.shared import to_flags

    return kind(
        [flag(f), f.name],
        type=_click_type(f),
        help=to_flags(f.metadata["help"]),
        section=section,
        **kwargs,
    )


def _click_type(f: dataclasses.Field):
    meta = f.metadata
    if "choices" in meta:
        return click.Choice(list(meta["choices"]))
    kind = _TYPES.get(f.type, f.type)  # annotations are strings under postponed evaluation
    if "min" not in meta and "max" not in meta:
        return kind
    bounded = click.IntRange if kind is int else click.FloatRange
    return bounded(
        meta.get("min"),
        meta.get("max"),
        min_open=meta.get("min_open", False),
        max_open=meta.get("max_open", False),
    )


def _show(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
