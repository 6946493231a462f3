"""``bayes-dualeval calibrate``: place new static questions on a fitted run's scale."""

from __future__ import annotations

import click

from bayes_dualeval.api.run import DEFAULT_CI
from bayes_dualeval.cli.shared import (
    CONTEXT,
    allow_approximate_option,
    clean_errors,
    data_argument,
)
from bayes_dualeval.measure.bank import BANK_DRAWS
from bayes_dualeval.measure.calibrate import DRIFT_FDR, DRIFT_THRESHOLD

#: Rows of each table the terminal summary shows.
SHOWN = 5


@click.command(context_settings=CONTEXT)
@data_argument
@click.option(
    "--bank", required=True, type=click.Path(path_type=str),
    help="A run folder of `bayes-dualeval fit` (NUTS, 1PL or 2PL) whose models answered DATA.",
)  # fmt: skip
@click.option(
    "--out", required=True, type=click.Path(path_type=str),
    help="Folder to write (must not exist or be empty).",
)  # fmt: skip
@click.option(
    "--ci", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=DEFAULT_CI,
    show_default=True, help="Credible interval level.",
)  # fmt: skip
@click.option(
    "--drift-threshold", type=click.FloatRange(0, min_open=True), default=DRIFT_THRESHOLD,
    show_default=True, help="A common question drifted when its b moved by more than this "
    "(logits).",
)  # fmt: skip
@click.option(
    "--fdr", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=DRIFT_FDR,
    show_default=True, help="False discovery level of the drift flag.",
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the draws.")
@click.option(
    "--draws", "max_draws", type=click.IntRange(2), default=BANK_DRAWS, show_default=True,
    help="Posterior draws of the bank used (evenly spaced; fewer is faster).",
)  # fmt: skip
@allow_approximate_option
@clean_errors
def calibrate(data, bank, out, ci, drift_threshold, fdr, seed, max_draws, allow_approximate):
    """Calibrate the static questions of DATA on the scale of the run BANK (its models fixed).

    The dual of `score`: the bank's models answered DATA's questions, and each question's
    difficulty b and discrimination a are computed on a grid for every posterior draw of
    the bank models' abilities (no refit). Questions the bank does not hold are new
    (OUT/items.csv); questions it holds are common, calibrated afresh and compared with
    the bank (OUT/drift.csv: how far b moved, the probability it moved by more than
    --drift-threshold, and a flag at false discovery level --fdr). Rows of models not in
    the bank are left out. Also writes OUT/summary.json.

    \b
    Example:
        bayes-dualeval calibrate bench_v2/ --bank runs/bench_v1 --out v2_items/
    """
    from bayes_dualeval.core.atomic import check_new_folder
    from bayes_dualeval.inference.device import configure

    check_new_folder(out)
    configure("cpu", 1)

    from bayes_dualeval import api

    cal = api.open(bank).calibrate(
        list(data), ci=ci, drift_threshold=drift_threshold, fdr=fdr, seed=seed,
        draws=max_draws, allow_approximate=allow_approximate,
    )  # fmt: skip
    path = cal.save(out)
    _summary(cal.result, ci)
    for text in cal.warnings:
        click.echo(f"warning: {text}", err=True)
    click.echo(f"wrote {path}")


def _summary(result, ci: float) -> None:
    """One screen: counts, the hardest and easiest new questions, the drifted common ones."""
    s, items, drift = result.summary, result.items, result.drift
    click.echo(
        f"{s['new_items']} new and {s['common_items']} common question(s) on the scale of "
        f"{s['bank']} ({s['bank_models']} bank models, {s['bank_draws']} draws, "
        f"{ci:.0%} intervals; linked by {s['linked_by']})"
    )
    if len(items):
        ordered = items.sort_values("b_mean", ascending=False)
        picks = (
            ordered
            if len(ordered) <= 2 * SHOWN
            else ordered.iloc[[*range(SHOWN), *range(-SHOWN, 0)]]
        )
        for row in picks.itertuples():
            click.echo(
                f"  {row.item}: b {row.b_mean:+.2f} [{row.b_lo:+.2f}, {row.b_hi:+.2f}], "
                f"a {row.a_mean:.2f}, {row.n_models} models"
            )
    if len(drift):
        click.echo(
            f"drift (|shift| > {s['drift_threshold']:g}): {s['flagged']} of "
            f"{s['common_items']} common question(s) flagged at false discovery level "
            f"{s['fdr']:g}"
        )
        for row in drift.head(SHOWN).itertuples():
            mark = "FLAGGED " if row.flagged else ""
            click.echo(
                f"  {mark}{row.item}: shift {row.shift_mean:+.2f} [{row.shift_lo:+.2f}, "
                f"{row.shift_hi:+.2f}], p_drift {row.p_drift:.2f}"
            )
        if "common_shift_mean" in s:
            click.echo(
                f"mean shift of the unflagged common questions {s['common_shift_mean']:+.2f} "
                f"[{s['common_shift_lo']:+.2f}, {s['common_shift_hi']:+.2f}]"
            )
