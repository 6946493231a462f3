"""Conditional SBC of the measure stage on small NUTS banks (docs/validation.md 12.1).

Fits each bank once with NUTS (the simulator of ``bayes_dualeval.model.simulate``; sizes,
seeds and sampler settings below and in the output), writes the run folder, reads it with
``Bank.from_run`` (an unconverged bank is used and counted: ``approximate`` says why) and
runs :func:`bayes_dualeval.calibration.conditional.measure_sbc` on it:

* ``score`` with every static question answered, and with a random 30-question subset;
* ``score`` from generators that are not the bank (``theta_scale=2``, ``b_shift=0.5``);
* ``adaptive`` (Fisher selection, at most 30 questions, target sd 0.3), and perturbed;

each from bank draws the scores do not use (``held_out``), or with ``--same-draws`` from
the draws scored.

Prints one JSON object per case (the ``sbc.csv`` rows, the coverage table, the distance
between the equal-weight and the weighted mixture, ``fit_p``'s null quantiles) and, with
``--out DIR``, keeps each bank and each case's folder under DIR.

Usage::

    python scripts/studies/measure_sbc_study.py --sims 10000 --adaptive-sims 300 --out msbc/
    python scripts/studies/measure_sbc_study.py --banks static --sims 2000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

#: name: (models, static questions, arena prompts, simulator seed)
BANKS = {"static": (20, 200, 0, 21), "joint": (20, 200, 40, 22)}


def fit_bank(name: str, root: Path, args) -> Path:
    """Simulate and fit bank ``name``; its run folder."""
    from bayes_dualeval import load
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.simulate import simulate, write
    from bayes_dualeval.runs.fit import fit, write_run

    n_models, n_static, n_arena, seed = BANKS[name]
    static, arena, truth = simulate(
        n_models=n_models, n_static=n_static, n_arena=n_arena, seed=seed
    )
    write(root / f"data-{name}", static, arena, truth)
    settings = SamplerSettings(
        sampler="nuts", chains=args.chains, warmup=args.warmup, draws=args.draws,
        seed=seed, extend=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit(load(root / f"data-{name}"), settings=settings)
    write_run(result, root / f"bank-{name}")
    return root / f"bank-{name}"


def cases(args):
    """(label, measure_sbc keywords) of every case run on each bank."""
    adaptive = dict(measure="adaptive", sims=args.adaptive_sims, select="fisher",
                    max_items=30, target_se=0.3)  # fmt: skip
    return [
        ("score, all questions", dict(sims=args.sims)),
        ("score, 30 random questions", dict(sims=args.sims, items=30)),
        ("score, theta_scale=2", dict(sims=args.sims // 5, perturb={"theta_scale": 2.0})),
        ("score, b_shift=0.5", dict(sims=args.sims // 5, perturb={"b_shift": 0.5})),
        ("adaptive, at most 30", adaptive),
        ("adaptive, theta_scale=2", {**adaptive, "perturb": {"theta_scale": 2.0}}),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--banks", nargs="+", default=list(BANKS), choices=list(BANKS))
    parser.add_argument("--sims", type=int, default=10_000)
    parser.add_argument("--adaptive-sims", type=int, default=300)
    parser.add_argument("--bank-draws", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--cases",
        type=int,
        nargs="+",
        default=None,
        help="run only these cases (0-5, in the order of the module's list)",
    )
    args = parser.parse_args(argv)

    from bayes_dualeval.inference.device import configure

    configure("cpu", args.chains)
    from bayes_dualeval.calibration.conditional import measure_sbc
    from bayes_dualeval.measure.bank import Bank

    root = args.out or Path(tempfile.mkdtemp(prefix="measure-sbc-"))
    root.mkdir(parents=True, exist_ok=True)
    for name in args.banks:
        started = time.perf_counter()
        run = root / f"bank-{name}"
        if not run.exists():
            run = fit_bank(name, root, args)
        bank = Bank.from_run(run, allow_approximate=True)
        print(json.dumps({
            "bank": name, "design": dict(zip(("models", "static", "arena", "seed"),
                                             BANKS[name], strict=True)),
            "sampler": {"chains": args.chains, "warmup": args.warmup, "draws": args.draws},
            "approximate": bank.approximate or None,
            "fit_seconds": round(time.perf_counter() - started, 1),
        }), flush=True)  # fmt: skip
        chosen = cases(args)
        for label, kwargs in [chosen[i] for i in args.cases or range(len(chosen))]:
            result = measure_sbc(bank, bank_draws=args.bank_draws, seed=args.seed,
                                 held_out=not args.same_draws, **kwargs)  # fmt: skip
            folder = root / f"{name}-{label.replace(', ', '-').replace(' ', '_')}"
            if not folder.exists():
                result.save(folder)
            print(json.dumps({
                "bank": name, "case": label,
                "sbc": result.summary.round(4).to_dict("records"),
                "coverage": result.coverage.round(4).to_dict("records"),
                "info": {k: v for k, v in result.info.items() if k not in ("bank",)},
            }), flush=True)  # fmt: skip
            print(f"{name} / {label}: {result.info['seconds']} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
