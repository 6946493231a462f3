"""``bayes-dualeval simulate``: write simulated evaluation files with known truth.

The defaults are those of :func:`bayes_dualeval.model.simulate.simulate` (a test holds them
equal); they are written out here because importing the simulator imports JAX, which every
command would then wait for.
"""

from __future__ import annotations

import click

from bayes_dualeval.cli.shared import CONTEXT, clean_errors

_PROBABILITY = click.FloatRange(0, 1, max_open=True)


@click.command(context_settings=CONTEXT)
@click.argument("out", type=click.Path(file_okay=False, path_type=str))
@click.option("--models", "n_models", type=click.IntRange(2), default=12, show_default=True)
@click.option("--static-items", type=click.IntRange(0), default=300, show_default=True)
@click.option("--arena-prompts", type=click.IntRange(0), default=100, show_default=True)
@click.option("--domains", type=click.IntRange(1), default=3, show_default=True)
@click.option(
    "--missing",
    type=_PROBABILITY,
    default=0.0,
    show_default=True,
    help="Probability that a (model, item) cell is missing.",
)
@click.option(
    "--reward-noise",
    type=click.FloatRange(0),
    default=0.3,
    show_default=True,
)
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
@click.option(
    "--guess",
    type=_PROBABILITY,
    default=0.0,
    show_default=True,
    help="Guessing floor c of static questions (0.25: four-option multiple choice; a 3PL truth).",
)
@click.option(
    "--slip",
    type=_PROBABILITY,
    default=0.0,
    show_default=True,
    help="Slip 1 - d of static questions: their ceiling is 1 - slip (with --guess, a 4PL truth).",
)
@click.option(
    "--domain-sd",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="Spread of each model's ability deviation per domain (0: one ability per model; "
    "truth.json then has theta_domain).",
)
@click.option(
    "--dims",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Ability dimensions of the truth (a compensatory multidimensional 2PL; truth.json "
    "then has theta_dims and each item's loading).",
)
@click.option(
    "--dim-correlation",
    type=click.FloatRange(-1, 1, min_open=True, max_open=True),
    default=0.3,
    show_default=True,
    help="With --dims: correlation of the models' abilities between dimensions.",
)
@click.option(
    "--dim-loading",
    type=click.FloatRange(0, 1),
    default=0.8,
    show_default=True,
    help="With --dims: the loading of a domain's items on its own dimension (the rest is "
    "spread evenly over all).",
)
@click.option(
    "--item-features",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Numeric item features to draw, written to OUT/items.features.csv (for fit "
    "--item-features); they carry --feature-share of the difficulty's variance.",
)
@click.option(
    "--feature-share",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="With --item-features: the share of the difficulty's variance the features carry.",
)
@click.option(
    "--samples",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Answers per static (model, question) cell: repeated samples, rows with a "
    "'sample' field.",
)
@click.option(
    "--judges",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Judges scoring every arena cell, each with its own severity and slope; rows get "
    "judge, family and length fields (docs/simulator.md).",
)
@click.option(
    "--self-preference",
    type=float,
    default=0.0,
    show_default=True,
    help="With --judges: reward each judge adds to the models of its own family.",
)
@click.option(
    "--style-effect",
    type=float,
    default=0.0,
    show_default=True,
    help="Reward per unit of the rows' length covariate (the weakest third of the models "
    "the most verbose); fit it with --style length.",
)
@click.option(
    "--graders",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Graders labelling every static answer, each with its own severity on the pass "
    "rate; rows get a judge field (docs/simulator.md).",
)
@click.option(
    "--dif-groups",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Groups of models (written to OUT/models.families.csv, column group: fit with "
    "--families OUT/models.families.csv --dif group).",
)
@click.option(
    "--dif-items",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="With --dif-groups: static questions harder for the last group by --dif-shift.",
)
@click.option(
    "--dif-shift",
    type=float,
    default=2.0,
    show_default=True,
    help="With --dif-items: the log-odds the last group loses on those questions.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--force", is_flag=True, help="Overwrite files of a previous simulation.")
@clean_errors
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
    guess,
    slip,
    domain_sd,
    dims,
    dim_correlation,
    dim_loading,
    item_features,
    feature_share,
    samples,
    judges,
    self_preference,
    style_effect,
    graders,
    dif_groups,
    dif_items,
    dif_shift,
    seed,
    force,
):
    """Write simulated static and arena files with known truth to OUT.

    Writes OUT/bench/static.jsonl, OUT/arena/arena.jsonl and OUT/truth.json (true theta per
    model, a and b per item id (and c, d with --guess or --slip), gamma); the process is
    described in docs/simulator.md.

    \b
    Example:
        bayes-dualeval simulate sim/ --models 20 --static-items 400 --arena-prompts 150 \\
            --domains 3 --missing 0.1 --seed 7
        bayes-dualeval simulate sim-mc/ --guess 0.25
        bayes-dualeval simulate sim-2d/ --domains 2 --dims 2 --dim-loading 0.9
        bayes-dualeval simulate sim-feat/ --item-features 64 --feature-share 0.6
        bayes-dualeval simulate sim-rep/ --samples 3
        bayes-dualeval simulate sim-judges/ --judges 3 --self-preference 1 --style-effect 0.8
        bayes-dualeval simulate sim-dif/ --models 40 --dif-groups 2 --dif-items 10
    """
    from bayes_dualeval import api

    simulated = api.simulate(
        out,
        force=force,
        n_models=n_models,
        n_static=static_items,
        n_arena=arena_prompts,
        n_domains=domains,
        missing=missing,
        reward_noise=reward_noise,
        prompt_offset_sd=prompt_offset_sd,
        log_a_mean=log_a[0],
        log_a_sd=log_a[1],
        guess=guess,
        slip=slip,
        domain_sd=domain_sd,
        dims=dims,
        dim_correlation=dim_correlation,
        dim_loading=dim_loading,
        item_features=item_features,
        feature_share=feature_share,
        samples=samples,
        judges=judges,
        self_preference=self_preference,
        style_effect=style_effect,
        graders=graders,
        dif_groups=dif_groups,
        dif_items=dif_items,
        dif_shift=dif_shift,
        seed=seed,
    )
    for path in simulated.files:
        click.echo(f"wrote {path}")
