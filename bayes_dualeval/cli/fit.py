"""``bayes-dualeval fit``: fit the model to data and write a run folder.

The sampler options come from :class:`~bayes_dualeval.inference.settings.SamplerSettings`
and the model options from :class:`~bayes_dualeval.model.config.ModelConfig` (each
overrides one setting of the ``--model`` specification), so their names, defaults, ranges
and help are written once, on the dataclass fields.
"""

from __future__ import annotations

import click

from bayes_dualeval.api.run import DEFAULT_CI
from bayes_dualeval.cli.options import (
    Sectioned,
    SectionOption,
    override_options,
    setting_options,
)
from bayes_dualeval.cli.shared import (
    CONTEXT,
    clean_errors,
    data_argument,
    families_option,
    fit_anomalies_option,
    progress_lines,
    reward_norm_option,
    say,
    skip_invalid_option,
    style_option,
    to_flags,
)
from bayes_dualeval.inference.device import DEVICES
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import DEFAULT_MODEL, ModelConfig, load_spec

_MODEL_HEADING = "{} (override the --model spec)"


def _options() -> list[click.Option]:
    """Sampler options, then the model: ``--model`` and one override per setting."""
    model = SectionOption(
        ["--model", "model_name"],
        section="Model",
        default=DEFAULT_MODEL,
        show_default=True,
        help="Named specification from models/ (see `bayes-dualeval models`) or a .toml path.",
    )
    overrides = override_options(load_spec(DEFAULT_MODEL), heading=_MODEL_HEADING)
    return [*setting_options(SamplerSettings, section="Sampler"), model, *overrides]


def _run_option(*decls, **kwargs):
    return click.option(*decls, cls=SectionOption, section="Run", **kwargs)


@click.command(context_settings=CONTEXT, cls=Sectioned, params=_options())
@data_argument
@reward_norm_option
@style_option
@families_option
@skip_invalid_option
@_run_option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=DEFAULT_CI,
    show_default=True,
    help="Credible interval level of every table.",
)
@_run_option(
    "--out",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="Run folder (must not exist); default a new folder under runs/.",
)
@_run_option(
    "--device",
    type=click.Choice(DEVICES),
    default="auto",
    show_default=True,
    help="Where JAX runs; auto uses a GPU when there is one.",
)
@_run_option(
    "--no-compile-cache",
    is_flag=True,
    help="Do not read or write JAX's compilation cache (see docs/performance.md).",
)
@_run_option(
    "--holdout",
    type=click.FloatRange(0, 0.5, max_open=False),
    default=0.0,
    show_default=True,
    help="Share of the cells to leave out of the fit and predict: their log score and AUC "
    "go to diagnostics.json, each cell to holdout.csv.",
)
@_run_option(
    "--holdout-seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the held-out split (runs of other models with the same seed hold out the "
    "same cells).",
)
@_run_option(
    "--item-features",
    "item_features",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="CSV or Parquet of numeric item features (column 'item' with the ids as items.csv "
    "writes them): a regression prior on difficulty and discrimination; items in it without "
    "responses are calibrated from their features (docs/model.md).",
)
@_run_option(
    "--coordinator",
    default=None,
    metavar="HOST:PORT",
    help="Run on several hosts: where process 0 listens; every process runs the same command "
    "with its own --process-id, and --shards splits SVI's and MAP's data over the devices of "
    "all of them (docs/performance.md). Process 0 writes the run folder.",
)
@_run_option(
    "--processes",
    type=click.IntRange(1),
    default=None,
    help="With --coordinator: how many processes take part.",
)
@_run_option(
    "--process-id",
    type=click.IntRange(0),
    default=None,
    help="With --coordinator: this process (0 to --processes minus 1).",
)
@_run_option(
    "--warm-start",
    "warm_start",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    metavar="RUN",
    help="Start NUTS from RUN's adapted metric, step size and posterior means (a run of the "
    "same specification; the data may add models or items) with a short warm-up; falls back "
    "to the full warm-up if the draws fail the convergence check.",
)
@fit_anomalies_option
@_run_option(
    "--chance",
    multiple=True,
    metavar="SOURCE=LEVEL",
    help="A static benchmark's chance level (e.g. 0.25 for four options; repeat per "
    "benchmark): a model below it is named. Default: the 3PL/4PL floor, else none.",
)
@_run_option("--no-report", is_flag=True, help="Skip the HTML/Markdown report.")
@_run_option("-q", "--quiet", is_flag=True, help="No progress bar.")
@clean_errors
def fit(
    data, model_name, ci, out, device, no_compile_cache, holdout, holdout_seed, item_features,
    coordinator, processes, process_id, anomalies, chance, no_report, quiet, reward_norm,
    skip_invalid, style, families, warm_start, **fields,
):  # fmt: skip
    """Fit the Bayesian DualEval model to DATA and write a run folder.

    The run folder holds posterior.nc (ArviZ InferenceData), diagnostics.json, the
    tables (leaderboard.csv, pairwise.csv, items.csv, anomalies.csv) and the report
    (report.html, report.md and figures/; rebuild it with `bayes-dualeval report`).
    Likelihood and prior options override single settings of the --model specification.

    \b
    Example:
        bayes-dualeval fit data/ --sampler nuts
        bayes-dualeval fit data/ --sampler map --mode static --out runs/static-map
        bayes-dualeval fit data/ --irt 3pl --guess-mean 0.25
        bayes-dualeval fit data/ --sampler svi --anomalies all
        bayes-dualeval fit data/ --item-features data/items.features.csv
        bayes-dualeval fit data/ --chance mmlu=0.25
    """
    import time

    from bayes_dualeval.inference.device import configure, is_writer

    sampler = fields["sampler"]
    cluster = _cluster(coordinator, processes, process_id, sampler, fields["shards"])
    # host devices on a CPU: one per NUTS chain, or one per shard of SVI's and MAP's data
    # (a process of a several-host run holds its share of the shards)
    per_process = fields["shards"] // (cluster.processes if cluster else 1)
    configure(
        device,
        fields["chains"] if sampler == "nuts" else per_process,
        compile_cache=not no_compile_cache,
        cluster=cluster,
    )
    writer = is_writer()
    quiet = quiet or not writer

    import warnings

    from bayes_dualeval import api
    from bayes_dualeval.core.atomic import check_new_folder
    from bayes_dualeval.core.errors import ConvergenceWarning
    from bayes_dualeval.inference.sampling import check_supported
    from bayes_dualeval.runs.fit import default_run_dir

    # what is needed only after sampling (arviz alone takes seconds) is imported while the
    # sampler compiles and runs, which JAX does without holding the GIL
    after = ["arviz", "bayes_dualeval.posterior.diagnostics", "bayes_dualeval.posterior.idata"]
    _import_in_background(after + ([] if no_report else ["bayes_dualeval.report.document"]))
    options = {k: v for k, v in fields.items() if k != "sampler"}
    options["progress"] = not quiet
    config, settings = api.settings(sampler, model_name, **options)
    check_supported(config, settings)  # e.g. MAP with 3pl: fail before reading the data
    if writer:
        run_dir = check_new_folder(out) if out else default_run_dir(sampler)
    from bayes_dualeval.checks.model_fit import check_chance, parse_chance

    levels = parse_chance(chance)
    start = time.perf_counter()
    ds = api.load(
        data, reward_norm=reward_norm, skip_invalid=skip_invalid, style=style, families=families
    )
    check_chance(levels, ds)  # before the fit, not after it
    timings = {"data": round(time.perf_counter() - start, 3)}
    say(ds.summary(), quiet)
    say(f"fitting {api.model_name(config)} with {sampler}...", quiet)
    with progress_lines(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # said below, as options
        run = api.fit(
            ds, sampler, model_name, device=device, compile_cache=not no_compile_cache,
            holdout=holdout, holdout_seed=holdout_seed, item_features=item_features,
            timings=timings, warm_start=warm_start, **options,
        )  # fmt: skip
    result = run.result
    if not writer:  # the fit needed every process; its output is process 0's to write
        return
    if item_features:
        from bayes_dualeval.data.features import describe

        say(f"item features: {describe(result.diagnostics['features'])}", quiet)
    cut = result.diagnostics["sampler_info"].get("interrupted_round")
    if cut:
        click.secho(
            f"interrupted in round {cut}: writing the draws made until then "
            "(press Ctrl-C again to abandon them)",
            err=True,
            fg="yellow",
        )
    if levels:
        result.diagnostics["chance"] = levels  # read by the tables, kept for `report`
    run_dir = run.save(run_dir, ci=ci, anomalies=anomalies, report=not no_report)
    _tell(result, run_dir, sampler, ci)


def _cluster(coordinator, processes, process_id, sampler: str, shards: int):
    """The :class:`~bayes_dualeval.inference.device.Cluster` ``--coordinator`` asks for, or None.

    Raises
    ------
    click.UsageError
        For ``--processes`` or ``--process-id`` without ``--coordinator`` (or the reverse),
        NUTS (its chains run on one host's devices), or ``--shards`` that the processes
        cannot share equally.
    """
    from bayes_dualeval.inference.device import Cluster

    if coordinator is None:
        if processes is not None or process_id is not None:
            raise click.UsageError("--processes and --process-id need --coordinator")
        return None
    if processes is None or process_id is None:
        raise click.UsageError("--coordinator needs --processes and --process-id")
    if sampler == "nuts":
        raise click.UsageError(
            "several processes split SVI's and MAP's data (--shards); NUTS runs its chains on "
            "the devices of one host (--chains)"
        )
    if shards % processes:
        raise click.UsageError(
            f"--shards {shards} cannot be shared equally by {processes} processes: use a "
            "multiple of --processes"
        )
    return Cluster(coordinator, processes, process_id)


def build_settings(
    model_name: str, fields: dict, *, progress: bool
) -> tuple[ModelConfig, SamplerSettings]:
    """The model configuration and sampler settings that ``fit``'s options ask for.

    Parameters
    ----------
    model_name : str
        ``--model``: a named specification or a ``.toml`` path.
    fields : dict
        The parsed sampler options and model overrides, by field name (an override left
        out is ``None``).
    progress : bool
        Show a progress bar.

    Returns
    -------
    ModelConfig, SamplerSettings

    Raises
    ------
    ConfigError
        Unknown specification, or a setting out of its range.
    """
    from bayes_dualeval import api

    options = {k: v for k, v in fields.items() if k != "sampler"}
    return api.settings(fields["sampler"], model_name, **options, progress=progress)


def _tell(result, run_dir, sampler: str, ci: float) -> None:
    """Print the summary, timings and any convergence warnings of a finished fit.

    The NOT CONVERGED line, the problems and the notes are the library's: their settings
    are said as options (:func:`~bayes_dualeval.cli.shared.to_flags`).
    """
    from bayes_dualeval.runs import output

    for line in output.terminal_summary(result, ci=ci).split("\n"):
        click.echo(to_flags(line) if line.startswith("NOT CONVERGED") else line)
    t = result.diagnostics["timings"]
    click.echo(
        f"time: data {t.get('data', 0):.1f}s, compile {t.get('compile', 0):.1f}s"
        f"{_cache_words(t.get('compile_cache'))}, sampling {t.get('sampling', 0):.1f}s"
    )
    by_domain = getattr(result, "tables", {}).get("leaderboard_by_domain")
    if by_domain is not None:
        click.echo(best_by_domain(by_domain))
    abilities = getattr(result, "tables", {}).get("abilities")
    if abilities is not None:
        click.echo(best_by_dimension(abilities))
    support = result.diagnostics.get("dimensions")
    if support:
        from bayes_dualeval.posterior.dimension_tables import support_warning

        unsupported = support_warning(support)
        if unsupported:
            click.secho(f"warning: {to_flags(unsupported)}", err=True, fg="red")
    held = result.diagnostics.get("holdout")
    if held:
        click.echo(holdout_line(held))
    if result.diagnostics.get("warm_start"):
        from bayes_dualeval.runs.warm_start import describe

        click.echo(describe(result.diagnostics["warm_start"]))
    click.echo(f"wrote {run_dir}")
    stored = result.diagnostics.get("posterior_file")
    if stored:
        from bayes_dualeval.posterior.stored import thinning_note

        click.secho(f"note: {thinning_note(stored)}", err=True, fg="yellow")
    conv = result.convergence
    for problem in conv.problems:
        click.secho(f"warning: convergence: {to_flags(problem)}", err=True, fg="red")
    for note in conv.notes:
        click.secho(f"note: {to_flags(note)}", err=True, fg="yellow")
    info = result.diagnostics["sampler_info"]
    if sampler == "svi":
        from bayes_dualeval.inference.settings import batches_read

        batches = batches_read(info)
        read = f"; each step read random batches of {' and '.join(batches)}" if batches else ""
        click.secho(
            "note: svi intervals are variational and too narrow on the ability scale (rankings "
            f"are closer to honest: docs/validation.md, section 10){read}",
            err=True,
            fg="yellow",
        )
    if sampler == "map" and info.get("converged") is False:
        click.secho(
            f"warning: map stopped short of the mode ({info.get('steps')} optimiser steps, "
            f"gradient norm {info.get('grad_norm', float('nan')):.3g}, tolerance "
            f"{info.get('grad_tol', float('nan')):.3g}; the optimiser said: "
            f"{info.get('message', '')}); the estimates are not the posterior mode: use "
            "--sampler nuts",
            err=True,
            fg="red",
        )
    elif sampler == "svi" and info.get("converged") is False:
        click.secho(
            f"warning: {sampler} optimisation did not settle within its step limit; "
            "raise --svi-steps or use --sampler nuts",
            err=True,
            fg="red",
        )


def best_by_domain(by_domain) -> str:
    """One line naming the best model of each domain and its probability of being best."""
    first = by_domain[by_domain["rank"] == 1]
    parts = [
        f"{row.domain}: {row.model}"
        + ("" if row.p_top1 != row.p_top1 else f" (P(best) {row.p_top1:.2f})")
        for row in first.itertuples()
    ]
    return "best by domain (leaderboard_by_domain.csv): " + "; ".join(parts)


def best_by_dimension(abilities) -> str:
    """One line naming each ability dimension (with its label) and its strongest model."""
    parts = []
    for dim, rows in abilities.groupby("dimension", sort=True):
        best = rows.loc[rows["theta_mean"].idxmax()]
        label = f" ({best.label})" if best.label else ""
        parts.append(f"{dim}{label}: {best.model}")
    return "strongest by dimension (abilities.csv, loadings.csv): " + "; ".join(parts)


def holdout_line(held: dict) -> str:
    """One line of the held-out scores (``diagnostics["holdout"]``)."""
    parts = []
    if "static" in held:
        s = held["static"]
        parts.append(
            f"{s['cells']:,} static labels (log score {s['log_score']:.3f}, AUC {s['auc']:.3f})"
        )
    if "arena" in held:
        a = held["arena"]
        parts.append(
            f"{a['cells']:,} arena rewards in {a['pairs']:,} pairs (log score "
            f"{a['log_score']:.3f}, AUC {a['auc']:.3f})"
        )
    return f"held out {held['share']:.0%}: " + "; ".join(parts)


def _cache_words(verdict: str | None) -> str:
    """`` (cache hit)`` and the like after the compile time; nothing when the cache was off."""
    return "" if verdict in (None, "off") else f" (cache {verdict})"


def _import_in_background(names: list[str]) -> None:
    """Import modules in a daemon thread; a failure is left for the main thread to meet."""
    import importlib
    import threading

    def work():
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - imported (and reported) again when used
                continue

    threading.Thread(target=work, name="import-in-background", daemon=True).start()
