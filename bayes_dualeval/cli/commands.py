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
@click.option(
    "--bb-ratio",
    type=float,
    default=0.15,
    show_default=True,
    help="Quantile of pairwise max(z) at or below which a pair is both-bad (0 = off).",
)
@click.option(
    "--tie-ratio",
    type=float,
    default=0.10,
    show_default=True,
    help="Quantile of pairwise |dz| at or below which a pair is a tie (0 = off).",
)
@_clean_errors
def check(data, reward_norm, skip_invalid, bb_ratio, tie_ratio):
    """Load and validate DATA (files or folders) and print a summary, without fitting.

    \b
    Example:
        bayes-dualeval check data/ ../more/arena.jsonl --reward-norm global
    """
    from bayes_dualeval.data.dataset import load
    from bayes_dualeval.data.distill import distill

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
@click.option(
    "--missing",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.0,
    show_default=True,
    help="Probability that a (model, item) cell is missing.",
)
@click.option("--reward-noise", type=click.FloatRange(0), default=0.3, show_default=True)
@click.option(
    "--prompt-offset-sd",
    type=click.FloatRange(0),
    default=1.0,
    show_default=True,
    help="Spread of per-prompt reward offsets (reward-model leniency); 0: rewards carry "
    "the prompt's level.",
)
@click.option(
    "--log-a",
    nargs=2,
    type=float,
    default=(0.0, 0.3),
    show_default=True,
    help="Mean and sd of log discriminations (1 0.8: near-deterministic items).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--force", is_flag=True, help="Overwrite files of a previous simulation.")
@_clean_errors
def simulate(
    out,
    n_models,
    static_items,
    arena_prompts,
    domains,
    missing,
    reward_noise,
    prompt_offset_sd,
    log_a,
    seed,
    force,
):
    """Write simulated static and arena files with known truth to OUT.

    Writes OUT/bench/static.jsonl, OUT/arena/arena.jsonl and OUT/truth.json (true theta per
    model, a and b per item id, gamma); the process is described in docs/simulator.md.

    \b
    Example:
        bayes-dualeval simulate sim/ --models 20 --static-items 400 --arena-prompts 150 \\
            --domains 3 --missing 0.1 --seed 7
    """
    from bayes_dualeval.data import simulate as sim

    static, arena, truth = sim.simulate(
        n_models,
        static_items,
        arena_prompts,
        n_domains=domains,
        missing=missing,
        reward_noise=reward_noise,
        prompt_offset_sd=prompt_offset_sd,
        log_a_mean=log_a[0],
        log_a_sd=log_a[1],
        seed=seed,
    )
    for path in sim.write(out, static, arena, truth, force=force):
        click.echo(f"wrote {path}")


@cli.command(context_settings=CONTEXT)
@_paths
@click.option(
    "--sampler",
    type=click.Choice(["nuts", "svi", "map"]),
    default="nuts",
    show_default=True,
    help="Full posterior (nuts), variational (svi) or point fit (map).",
)
@click.option(
    "--model",
    "model_name",
    default="dualeval-2pl",
    show_default=True,
    help="Named specification from models/ (see `bayes-dualeval models`) or a .toml path.",
)
@click.option(
    "--mode",
    type=click.Choice(["both", "static", "arena", "bt"]),
    default=None,
    help="Data that enter: joint, static only, arena only, or Bradley-Terry.  [spec: both]",
)
@click.option(
    "--irt",
    type=click.Choice(["2pl", "1pl"]),
    default=None,
    help="2PL, or Rasch (a_q = 1).  [spec: 2pl]",
)
@click.option(
    "--item-prior",
    type=click.Choice(["hierarchical", "independent"]),
    default=None,
    help="Pooled per-source item priors, or fixed weakly-informative ones.",
)
@click.option(
    "--arena-likelihood",
    type=click.Choice(["pairs", "pairs-full", "reward"]),
    default=None,
    help="Arena term: weighted pairs (2/n), all pairs, or rewards.",
)
@click.option(
    "--arena-level",
    type=click.Choice(["mean", "none"]),
    default=None,
    help="How a prompt's difficulty is seen: its mean reward (the reward model is equally "
    "lenient on every prompt), or not at all (leniency varies; arena b not identified).  "
    "[spec: mean]",
)
@click.option(
    "--lambda-static",
    type=click.FloatRange(0),
    default=None,
    help="Likelihood power of static labels.",
)
@click.option(
    "--lambda-arena",
    type=click.FloatRange(0),
    default=None,
    help="Likelihood power of arena pairs.",
)
@click.option(
    "--lambda-bb",
    type=click.FloatRange(0),
    default=None,
    help="Weight of the both-bad anchoring term.  [spec: 0.2]",
)
@click.option(
    "--bb-ratio",
    type=click.FloatRange(0, 1, max_open=True),
    default=None,
    help="Both-bad quantile (0 = off).  [spec: 0.15]",
)
@click.option(
    "--tie-ratio",
    type=click.FloatRange(0, 1, max_open=True),
    default=None,
    help="Tie quantile (0 = off).  [spec: 0.10]",
)
@click.option(
    "--theta-scale",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="Prior sd of abilities.  [spec: 1]",
)
@click.option(
    "--gamma-scale",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="Log-scale sd of gamma's LogNormal prior.  [spec: 0.5]",
)
@click.option(
    "--b-scale",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="Independent prior sd of difficulties.  [spec: 3]",
)
@click.option(
    "--loga-scale",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="Independent prior sd of log discriminations.  [spec: 1]",
)
@click.option("--chains", type=click.IntRange(1), default=4, show_default=True)
@click.option("--warmup", type=click.IntRange(0), default=1000, show_default=True)
@click.option("--draws", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--target-accept",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.8,
    show_default=True,
    help="NUTS target acceptance probability.",
)
@click.option(
    "--max-tree-depth",
    type=click.IntRange(1, 15),
    default=6,
    show_default=True,
    help="NUTS trajectory cap: at most 2**depth - 1 leapfrog steps per draw.",
)
@click.option(
    "--extend",
    type=click.IntRange(0),
    default=2,
    show_default=True,
    help="NUTS: while the convergence check fails, up to this many more rounds of --draws.",
)
@click.option(
    "--guide",
    type=click.Choice(["normal", "lowrank"]),
    default="normal",
    show_default=True,
    help="SVI autoguide: mean-field or low-rank normal.",
)
@click.option(
    "--svi-steps",
    type=click.IntRange(1),
    default=20000,
    show_default=True,
    help="Most SVI steps (stops earlier when the ELBO settles).",
)
@click.option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Credible interval level of every table.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="Run folder (must not exist); default a new folder under runs/.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "gpu"]),
    default="auto",
    show_default=True,
    help="Where JAX runs; auto uses a GPU when there is one.",
)
@click.option("--no-report", is_flag=True, help="Skip the HTML/Markdown report.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@_reward_norm
@_skip_invalid
@_clean_errors
def fit(
    data,
    sampler,
    model_name,
    mode,
    irt,
    item_prior,
    arena_likelihood,
    arena_level,
    lambda_static,
    lambda_arena,
    lambda_bb,
    bb_ratio,
    tie_ratio,
    theta_scale,
    gamma_scale,
    b_scale,
    loga_scale,
    chains,
    warmup,
    draws,
    seed,
    target_accept,
    max_tree_depth,
    extend,
    guide,
    svi_steps,
    ci,
    out,
    device,
    no_report,
    quiet,
    reward_norm,
    skip_invalid,
):
    """Fit the Bayesian DualEval model to DATA and write a run folder.

    The run folder holds posterior.nc (ArviZ InferenceData), diagnostics.json, the
    tables (leaderboard.csv, pairwise.csv, items.csv, anomalies.csv) and the report
    (report.html, report.md and figures/; rebuild it with `bayes-dualeval report`).

    \b
    Example:
        bayes-dualeval fit data/ --sampler nuts
        bayes-dualeval fit data/ --sampler map --mode static --out runs/static-map
    """
    import time

    from bayes_dualeval.inference.device import configure

    configure(device, chains if sampler == "nuts" else 1)

    from bayes_dualeval.data.dataset import load
    from bayes_dualeval.inference.sampling import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.runs import output
    from bayes_dualeval.runs.fit import check_out_dir, default_run_dir
    from bayes_dualeval.runs.fit import fit as run_fit

    # what is needed only after sampling (arviz alone takes seconds) is imported while the
    # sampler compiles and runs, which JAX does without holding the GIL
    after = ["arviz", "bayes_dualeval.posterior.diagnostics", "bayes_dualeval.posterior.idata"]
    _import_in_background(after + ([] if no_report else ["bayes_dualeval.report.document"]))
    config = load_spec(model_name).replace(
        mode=mode,
        irt=irt,
        item_prior=item_prior,
        arena_likelihood=arena_likelihood,
        arena_level=arena_level,
        lambda_static=lambda_static,
        lambda_arena=lambda_arena,
        lambda_bb=lambda_bb,
        bb_ratio=bb_ratio,
        tie_ratio=tie_ratio,
        theta_scale=theta_scale,
        gamma_scale=gamma_scale,
        b_scale=b_scale,
        loga_scale=loga_scale,
    )
    settings = SamplerSettings(
        sampler=sampler,
        chains=chains,
        warmup=warmup,
        draws=draws,
        seed=seed,
        target_accept=target_accept,
        max_tree_depth=max_tree_depth,
        extend=extend,
        guide=guide,
        svi_steps=svi_steps,
        progress=not quiet,
    )
    run_dir = check_out_dir(out) if out else default_run_dir(sampler)
    start = time.perf_counter()
    ds = load(data, reward_norm=reward_norm, skip_invalid=skip_invalid)
    timings = {"data": round(time.perf_counter() - start, 3)}
    _say(ds.summary(), quiet)
    _say(f"fitting {config.name} (mode {config.mode}, {config.irt}) with {sampler}...", quiet)
    result = run_fit(ds, config, settings, timings=timings)
    run_dir = output.write(result, run_dir, ci=ci, report=not no_report)
    click.echo(output.terminal_summary(result, ci=ci))
    t = result.diagnostics["timings"]
    click.echo(
        f"time: data {t.get('data', 0):.1f}s, compile {t.get('compile', 0):.1f}s, "
        f"sampling {t.get('sampling', 0):.1f}s"
    )
    click.echo(f"wrote {run_dir}")
    for problem in result.diagnostics["convergence"]["problems"]:
        click.secho(f"warning: convergence: {problem}", err=True, fg="red")
    for note in result.diagnostics["convergence"].get("notes", []):
        click.secho(f"note: {note}", err=True, fg="yellow")
    info = result.diagnostics["sampler_info"]
    if sampler != "nuts" and info.get("converged") is False:
        click.secho(
            f"warning: {sampler} optimisation did not settle within its step limit; "
            "raise --svi-steps or use --sampler nuts",
            err=True,
            fg="red",
        )


@cli.command(context_settings=CONTEXT)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=None,
    help="Credible interval level of the tables and report.  [default: the run's]",
)
@_clean_errors
def report(run_dir, ci):
    """Rebuild the report and tables of RUN_DIR from its posterior.nc, without refitting.

    Writes RUN_DIR/report.html (one self-contained file), RUN_DIR/report.md with its
    figures in RUN_DIR/figures/, and the CSV tables again (at --ci, if given).

    \b
    Example:
        bayes-dualeval report runs/20260101-120000-nuts
        bayes-dualeval report runs/20260101-120000-nuts --ci 0.9
    """
    from bayes_dualeval.inference.device import configure

    configure("cpu", 1, compile_cache=False)

    from pathlib import Path

    from bayes_dualeval.report.document import dataset_from_idata, write_report
    from bayes_dualeval.runs import output
    from bayes_dualeval.runs.fit import load_run, write_diagnostics

    idata, diagnostics = load_run(run_dir)
    ci = float(ci if ci is not None else diagnostics.get("ci") or 0.95)
    dataset = dataset_from_idata(idata, reward_norm=diagnostics.get("data", {}).get("reward_norm"))
    ppc, tables = output.rewrite_tables(run_dir, idata, diagnostics, dataset, ci=ci)
    write_diagnostics(run_dir, diagnostics)
    written = write_report(run_dir, idata, diagnostics, dataset, ci=ci, ppc=ppc)
    figures = [p for p in written if p.suffix == ".png"]
    for path in [*tables, *(p for p in written if p.suffix != ".png")]:
        click.echo(f"wrote {path}")
    click.echo(f"wrote {len(figures)} figures in {Path(run_dir) / 'figures'}")


@cli.command(context_settings=CONTEXT)
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


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        click.echo(text, err=True)


def main(argv=None) -> None:
    """Entry point of the ``bayes-dualeval`` console script."""
    cli.main(args=argv, prog_name="bayes-dualeval")
