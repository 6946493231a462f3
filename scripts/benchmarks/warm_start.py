"""Warm start against a cold fit after adding one model to the bundled example.

The leaderboard-update workflow: a run fitted on the bundled example without one model
(``--held``), then the full example fitted twice, cold and with ``--warm-start`` from that
run. Each fit is a whole ``bayes-dualeval fit`` process (``--no-report``), run in turn
cold, warm, cold, warm... (``--repeats`` pairs), with the persistent compilation cache as
the user has it (the first pair may compile; ``--no-compile-cache`` compiles every time).
Printed per fit and as medians: wall seconds, the sampler's compile and sampling seconds,
leapfrog steps of the kept draws, convergence (R-hat, bulk and tail ESS, divergences) and
whether the warm start was used; then the warm/cold ratios of the medians.

``--variants`` compares warm-up choices in this process, with leapfrog steps counted over
warm-up too (the run records only the kept draws'): see :func:`variants`.

    python scripts/benchmarks/warm_start.py --repeats 3
    python scripts/benchmarks/warm_start.py --no-processes --variants cold warm100 warm50 metric150
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"


def without(model: str, out: Path) -> Path:
    """The bundled example's files without ``model``'s rows."""
    for sub in ("bench", "arena"):
        for path in (DATA / sub).glob("*.jsonl"):
            target = out / sub / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            lines = [
                line
                for line in path.read_text().splitlines()
                if line.strip() and json.loads(line).get("model_label") != model
            ]
            target.write_text("\n".join(lines) + "\n")
    return out


def fit(data: Path, out: Path, extra: list[str], seed: int) -> dict:
    """One whole ``bayes-dualeval fit`` process; its wall seconds and diagnostics."""
    cmd = [sys.executable, "-m", "bayes_dualeval", "fit", str(data), "--out", str(out)]
    cmd += ["--no-report", "-q", "--seed", str(seed), *extra]
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0 or not (out / "diagnostics.json").is_file():
        raise SystemExit(f"fit failed: {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    d = json.loads((out / "diagnostics.json").read_text())
    import arviz as az

    steps = int(az.from_netcdf(out / "posterior.nc").sample_stats["n_steps"].sum())
    warm = d.get("warm_start") or {}
    return {
        "wall": wall,
        "compile": d["timings"].get("compile", 0.0),
        "sampling": d["timings"].get("sampling", 0.0),
        "steps": steps,
        "rounds": d["sampler_info"].get("rounds"),
        "converged": d["convergence"]["converged"],
        "max_rhat": d["max_rhat"],
        "min_ess_bulk": d["min_ess_bulk"],
        "min_ess_tail": d["min_ess_tail"],
        "divergences": d["divergences"],
        "warm_used": warm.get("used") if warm else None,
        "cache": d["timings"].get("compile_cache"),
        "said": [line for line in done.stdout.splitlines() if line.startswith("warm start")],
    }


def variants(data: Path, base: Path, seed: int, names: list[str]) -> dict:
    """Warm-up choices compared in this process: leapfrog steps, ESS and R-hat of each.

    ``cold``: the pilot's metric and the full 400-iteration warm-up adapting the metric
    (what a fit without a warm start runs); ``warmN``: the stored metric kept and ``N``
    iterations tuning the step size only; ``metricN``: the stored metric as the start of
    ``N`` iterations of NumPyro's windowed adaptation (the step size and the metric). Each
    then draws 1,000 per chain (4 chains). Steps are counted with NumPyro's
    ``collect_warmup``; they do not depend on the machine's load.
    """
    import numpyro

    numpyro.set_host_device_count(4)
    import arviz as az
    import jax
    import numpy as np

    from bayes_dualeval import load
    from bayes_dualeval.inference.buckets import padded
    from bayes_dualeval.inference.layout import laid_out
    from bayes_dualeval.inference.metric import pilot, worth_it
    from bayes_dualeval.inference.nuts import _chain_starts, make_mcmc
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.joint import global_sites
    from bayes_dualeval.model.spec import DualEvalModel
    from bayes_dualeval.runs.warm_start import prepare

    config = load_spec("dualeval-2pl")
    settings = SamplerSettings(seed=seed)
    dataset = DualEvalModel(config).fitted_data(load(data))
    inputs, _ = build_inputs(dataset, config, centred="auto")
    warm, inputs = prepare(base, dataset, inputs, config, settings)
    large = worth_it(inputs)
    inputs = laid_out(padded(inputs), config)
    metric = init = None
    if large:  # as run_nuts starts a cold fit
        metric, init = pilot(inputs, config, global_sites(config, inputs), seed, settings.chains)
    start = _chain_starts(warm.init, settings.chains)
    out = {}
    for name in names:
        if name == "cold":
            s, m, z, kw = settings, metric, init, {}
        else:
            n = int(name.removeprefix("warm").removeprefix("metric"))
            adapt = name.startswith("metric")
            s = SamplerSettings(seed=seed, warmup=n)
            m, z = warm.metric, start
            kw = {"adapt_metric": adapt, "step_size": warm.step_size}
        mcmc = make_mcmc(inputs, config, s, m, **kw)
        key = jax.random.PRNGKey(seed)
        began = time.perf_counter()
        mcmc.warmup(
            key, inputs, config, init_params=z, collect_warmup=True, extra_fields=("num_steps",)
        )
        up = int(np.sum(np.asarray(mcmc.get_extra_fields()["num_steps"])))
        mcmc.run(mcmc.post_warmup_state.rng_key, inputs, config, extra_fields=("num_steps",))
        kept = int(np.sum(np.asarray(mcmc.get_extra_fields()["num_steps"])))
        samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
        seconds = time.perf_counter() - began
        post = az.from_dict(posterior=samples)
        ess_b = _extreme(az.ess(post, method="bulk"), np.nanmin)
        ess_t = _extreme(az.ess(post, method="tail"), np.nanmin)
        rhat = _extreme(az.rhat(post), np.nanmax)
        out[name] = {
            "warmup_steps": up,
            "kept_steps": kept,
            "min_ess_bulk": ess_b,
            "min_ess_tail": ess_t,
            "max_rhat": rhat,
            "seconds": seconds,
            "ess_per_1k_steps": 1000 * min(ess_b, ess_t) / (up + kept),
        }
        print(f"  {name}: {out[name]}", flush=True)
    return out


def _extreme(result, reduce) -> float:
    """The smallest (or largest) value over every variable of an ArviZ diagnostic."""
    return float(reduce([reduce(v.values) for v in result.data_vars.values()]))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--held", default="ember-7b", help="The model the first run lacks.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-compile-cache", action="store_true")
    parser.add_argument(
        "--variants",
        nargs="*",
        default=None,
        help="Compare warm-up choices in this process (e.g. cold warm100 warm50 metric150).",
    )
    parser.add_argument("--no-processes", action="store_true", help="Only --variants.")
    args = parser.parse_args(argv)
    extra = ["--no-compile-cache"] if args.no_compile_cache else []
    work = Path(tempfile.mkdtemp(prefix="warm-start-"))
    try:
        less = without(args.held, work / "less")
        base = fit(less, work / "base", extra, args.seed)
        print(f"base run without {args.held}: {base['wall']:.1f} s, converged {base['converged']}")
        runs = {"cold": [], "warm": []}
        for r in range(0 if args.no_processes else args.repeats):
            for kind in ("cold", "warm"):
                more = ["--warm-start", str(work / "base")] if kind == "warm" else []
                row = fit(DATA, work / f"{kind}{r}", extra + more, args.seed)
                runs[kind].append(row)
                print(
                    f"{kind} {r + 1}: wall {row['wall']:.1f} s, compile {row['compile']:.1f} s "
                    f"({row['cache']}), sampling {row['sampling']:.1f} s, {row['steps']:,} "
                    f"kept-draw leapfrog steps, rounds {row['rounds']}, converged "
                    f"{row['converged']} (R-hat {row['max_rhat']}, ESS bulk "
                    f"{row['min_ess_bulk']}, tail {row['min_ess_tail']}, divergences "
                    f"{row['divergences']}), warm start used {row['warm_used']}",
                    flush=True,
                )
                for line in row["said"]:
                    print(f"  {line}")
        print("\nmedians (warm / cold):")
        for key in ("wall", "compile", "sampling", "steps") if runs["cold"] else ():
            cold = statistics.median(x[key] for x in runs["cold"])
            warm = statistics.median(x[key] for x in runs["warm"])
            print(f"  {key:9s} cold {cold:10.1f}  warm {warm:10.1f}  ratio {warm / cold:.2f}")
        if args.variants:
            print("\nwarm-up choices, in this process (steps do not depend on load):")
            variants(DATA, work / "base", args.seed, args.variants)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
