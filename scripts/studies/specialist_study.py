"""A specialist is not a leak: planted domain strength and leaks in contamination.csv.

For each seed, static data with three domains are simulated (two benchmarks in each of the
first two domains, one in the last; ``--models`` models, ``--items`` questions per
benchmark); one middling model is ``--lift`` logits stronger on every question of the first
domain (a specialist, no leak), and two other models leak: ``--leak-share`` of their
failures on one benchmark (one in the specialist's domain, one in the second) are flipped
to successes. Each data set is fitted with one ability per model and with abilities per
domain (short NUTS), and the model x benchmark audit counts the specialist's blocks, the
leaks' blocks and the clean blocks flagged at ``q_value < 0.05``
(:func:`bayes_dualeval.validation.specialist.specialist_study`).

Usage::

    python scripts/studies/specialist_study.py --seeds 3
"""

from __future__ import annotations

import argparse
import sys
import warnings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0, 1, ...)")
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--lift", type=float, default=2.0)
    parser.add_argument("--leak-share", type=float, default=0.9)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args(argv)

    from bayes_dualeval.inference.sampling import SamplerSettings
    from bayes_dualeval.validation.specialist import specialist_study

    head = (
        f"{'seed':>4}  {'model':>6}  {'specialist':>10}  {'leaks':>5}  {'clean':>6}  "
        f"{'converged':>9}  {'secs':>5}  leak p-values"
    )
    print(head)
    print("-" * len(head))
    totals = {}
    for seed in range(args.seeds):
        settings = SamplerSettings(
            chains=2, warmup=args.warmup, draws=args.draws, seed=seed, progress=False
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = specialist_study(
                seed=seed, settings=settings, n_models=args.models, items=args.items,
                lift=args.lift, leak_share=args.leak_share,
            )  # fmt: skip
        for name in ("single", "domain"):
            c = r[name]
            rows = c["table"].set_index(["model", "dataset"])
            leak_p = " ".join(f"{rows.loc[b, 'p_value']:.1e}" for b in r["data"]["leaks"])
            spec_p = " ".join(
                f"{rows.loc[b, 'p_value']:.1e}" for b in r["data"]["specialist_blocks"]
            )
            print(
                f"{seed:>4}  {name:>6}  {c['specialist']:>4}/{c['specialist_blocks']:<5}  "
                f"{c['leaks']}/{c['leak_blocks']}  {c['clean']:>2}/{c['clean_blocks']:<3}  "
                f"{c['converged']!s:>9}  {c['seconds']:5.0f}  leaks {leak_p}; "
                f"specialist {spec_p}",
                flush=True,
            )
            t = totals.setdefault(name, [0, 0, 0, 0, 0, 0])
            for k, key in enumerate(
                (
                    "specialist",
                    "specialist_blocks",
                    "leaks",
                    "leak_blocks",
                    "clean",
                    "clean_blocks",
                )
            ):
                t[k] += c[key]
    print()
    for name, t in totals.items():
        print(
            f"{name}: specialist blocks flagged {t[0]}/{t[1]}, leaks {t[2]}/{t[3]}, "
            f"clean {t[4]}/{t[5]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
