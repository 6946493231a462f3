r"""Simulation-based calibration tables: each specification's SBC, on its own prior and perturbed.

For each ``--spec`` (a named specification, fitted in ``--mode``: ``static`` by default;
``both`` or ``arena`` for the reward likelihood, with the level term by default and
without it at ``--arena-level none``), runs
:func:`bayes_dualeval.api.sbc` with ``--sims`` simulations of one design (``--models`` x
``--items`` static questions, and ``--prompts`` arena prompts where the mode fits the
arena) on the model's own prior predictive, and again for each ``--perturb``
(generators that are not the model). Prints one row per case (quantities outside their
simultaneous 95% band, the smallest p-value, fits that failed the convergence check,
seconds) and, with ``--out DIR``, writes each case's folder (``sbc.csv``, ``ranks.csv``,
``sbc.png``, ``sbc.json``) under DIR. The sampler settings are stated in the header; the
table of docs/validation.md section 11 comes from this script.

Usage::

    python scripts/studies/sbc_study.py --spec dualeval-2pl --sims 200 --out sbc-tables/
    python scripts/studies/sbc_study.py --spec dualeval-3pl --sims 200 --perturb flip=0.05
    python scripts/studies/sbc_study.py --spec dualeval-reward --mode both --prompts 20 \
        --perturb theta_scale=2 --perturb reward_df=3 --out sbc-tables/
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", action="append", default=None, help="repeatable")
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--domains", type=int, default=3, help="with an ability per domain")
    parser.add_argument("--mode", default="static", choices=("static", "both", "arena"))
    parser.add_argument("--prompts", type=int, default=20, help="arena prompts (reward mode)")
    parser.add_argument("--features", type=int, default=0, help="item features")
    parser.add_argument("--graders", type=int, default=1, help="graders of every static answer")
    parser.add_argument(
        "--arena-level", default="mean", choices=("mean", "none"), help="reward mode's level"
    )
    parser.add_argument(
        "--perturb",
        action="append",
        default=None,
        help="KEY=VALUE, repeatable, one case each (default theta_scale=2; none: the model only)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--draws", type=int, default=250)
    parser.add_argument("--extend", type=int, default=0)
    parser.add_argument("--target-accept", type=float, default=0.9)
    parser.add_argument("--centring", default="none", choices=("auto", "none", "all"))
    parser.add_argument("--out", default=None, help="write each case's folder under this one")
    parser.add_argument(
        "--skip-model", action="store_true", help="only the perturbed generators' cases"
    )
    args = parser.parse_args(argv)

    from bayes_dualeval.inference.device import configure

    configure("cpu", args.chains)
    # a line per simulation on stderr (the table goes to stdout)
    progress = logging.getLogger("bayes_dualeval.calibration")
    progress.addHandler(logging.StreamHandler(sys.stderr))
    progress.setLevel(logging.INFO)
    from bayes_dualeval import api

    specs = args.spec or ["dualeval-2pl"]
    cases = [None, *(p for p in args.perturb or ["theta_scale=2"] if p != "none")]
    if args.skip_model:
        cases = cases[1:]
    level = {} if args.mode == "static" else {"arena_level": args.arena_level}
    sampler = dict(
        chains=args.chains, warmup=args.warmup, draws=args.draws, extend=args.extend,
        target_accept=args.target_accept, centring=args.centring,
    )  # fmt: skip
    print(
        f"# {args.sims} simulations per case, seed {args.seed}, design {args.models} models x "
        f"{args.items} static questions, {args.prompts if args.mode != 'static' else 0} arena "
        f"prompts, {args.features} item features, {args.graders} graders, mode {args.mode}"
        f"{'' if args.mode == 'static' else f', arena level {args.arena_level}'}; NUTS {sampler}"
    )
    head = (
        f"{'spec':<14} {'generator':<16} {'outside':>8} {'min p':>7} {'not conv.':>9} "
        f"{'secs':>6}  verdict"
    )
    print(head)
    print("-" * len(head))
    for spec in specs:
        for case in cases:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = api.sbc(
                    spec, sims=args.sims, mode=args.mode, n_models=args.models,
                    static_items=args.items, arena_prompts=args.prompts,
                    n_domains=args.domains, item_features=args.features,
                    graders=args.graders,
                    perturb=[case] if case else [], seed=args.seed,
                    **sampler, **level,
                )  # fmt: skip
            if args.out:
                name = f"{spec}-{case.replace('=', '-') if case else 'model'}"
                result.save(f"{args.out}/{name}")
            verdict = "passes" if result.outside <= 1 else "fails"
            print(
                f"{spec:<14} {case or 'the model':<16} "
                f"{result.outside:>3} of {len(result.summary):<2} "
                f"{result.summary['p_value'].min():>7.3f} "
                f"{result.info['fits_not_converged']:>9} "
                f"{time.perf_counter() - start:>6.0f}  {verdict}",
                flush=True,
            )
            outside = result.summary.loc[~result.summary["within_band"], "quantity"]
            if len(outside):
                print(f"{'':<31}outside: {', '.join(outside)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
