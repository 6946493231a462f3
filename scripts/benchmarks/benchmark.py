"""Benchmark: data loading, distillation, compilation and sampling, timed separately.

Sizes: DualEval's paper scale (18 models, 300 static questions, 300 arena prompts, all
answered: 45,900 pairs) and a large one (60 models x 2,000 items). For each, the tuned
sampler of the package is compared with a naive NumPyro version of the same model run in
the same process (centred abilities, ``jax.nn`` log-sigmoids per pair, diagonal mass
matrix, default tree depth 10), and the ratio is printed. Also measures the distillation
of 200 models x 805 prompts (16 million pairs): time and peak memory.

``--only write`` times what comes after sampling (InferenceData with the pointwise log
likelihood, ``posterior.nc`` and the tables with their checks, the report) and the peak
resident memory, each case in a fresh process: DualEval's paper scale with ``--sampler
map``, a wide static set (12 models x 42,000 questions) with SVI, and an AlpacaEval-sized
arena (56 models x 805 prompts, about a million decisive pairs; ``--alpaca DIR`` uses the
real data) with SVI. ``--code DIR`` runs the cases with another copy of the package first
on the path (an older checkout, for a before/after comparison).

Timings block on the results (``jax.block_until_ready``), so asynchronous dispatch cannot
flatter them. Run it on an otherwise idle machine::

    python scripts/benchmarks/benchmark.py                 # everything (several minutes)
    python scripts/benchmarks/benchmark.py --only paper    # one size
    python scripts/benchmarks/benchmark.py --only distill
    python scripts/benchmarks/benchmark.py --only write    # after sampling (a few minutes)
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
import warnings

SIZES = {"paper": (18, 300, 300), "large": (60, 1000, 1000)}


def make_data(name: str, tmp: str) -> str:
    """Simulate a dataset of the named size into files (so loading is timed too)."""
    from bayes_dualeval.model import simulate as sim

    m, s, a = SIZES[name]
    out = os.path.join(tmp, name)
    if not os.path.exists(os.path.join(out, "truth.json")):
        static, arena, truth = sim.simulate(m, s, a, n_domains=3, seed=7)
        sim.write(out, static, arena, truth)
    return out


def naive_model(inputs, config):
    """A direct NumPyro transcription of the model: the baseline the package is timed against."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    with numpyro.plate("model", inputs.n_models):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0))
    g = inputs.item_group
    with numpyro.plate("group", inputs.n_groups):
        mu_b = numpyro.sample("mu_b", dist.Normal(0.0, 2.0))
        sigma_b = numpyro.sample("sigma_b", dist.HalfNormal(1.5))
        mu_la = numpyro.sample("mu_log_a", dist.Normal(0.0, 0.5))
        sigma_la = numpyro.sample("sigma_log_a", dist.LogNormal(jnp.log(0.3), 0.5))
    with numpyro.plate("item", inputs.n_items):
        b = mu_b[g] + sigma_b[g] * numpyro.sample("b_raw", dist.Normal(0.0, 1.0))
        a = jnp.exp(mu_la[g] + sigma_la[g] * numpyro.sample("log_a_raw", dist.Normal(0.0, 1.0)))
    gamma = numpyro.sample("gamma", dist.LogNormal(jnp.log(4.0), 0.5))
    eta = a[inputs.static_item] * (theta[inputs.static_model] - b[inputs.static_item])
    numpyro.sample("y", dist.Bernoulli(logits=eta), obs=inputs.static_y)
    eta_r = a[inputs.arena_item] * (theta[inputs.arena_model] - b[inputs.arena_item])
    p = jax.nn.sigmoid(eta_r)
    x = gamma * (p[inputs.pair_i] - p[inputs.pair_j])
    t = inputs.pair_t
    ll = inputs.pair_w * (t * jax.nn.log_sigmoid(x) + (1 - t) * jax.nn.log_sigmoid(-x))
    numpyro.factor("arena", ll.sum() + config.lambda_bb * jnp.dot(inputs.bb_count, jnp.log1p(-p)))


def run_case(name: str, tmp: str, draws: int, warmup: int, naive: bool) -> None:
    import arviz as az
    import jax
    import numpy as np
    from numpyro.infer import MCMC, NUTS

    from bayes_dualeval.data.load import load
    from bayes_dualeval.inference import sampling as inference
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs

    folder = make_data(name, tmp)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load(folder)
    t_load = time.perf_counter() - t0
    config = load_spec("dualeval-2pl")
    t0 = time.perf_counter()
    inputs, pairs = build_inputs(ds, config)
    jax.block_until_ready(inputs.pair_w)
    t_distill = time.perf_counter() - t0
    print(
        f"\n== {name}: {ds.n_models} models, {len(ds.static_items)} static, "
        f"{len(ds.arena_items)} arena prompts, {pairs.n_total:,} pairs "
        f"({pairs.n_decisive:,} decisive, {pairs.n_both_bad:,} both-bad)"
    )
    print(f"load {t_load:.2f}s  distill+inputs {t_distill:.2f}s")

    def report(label, samples, seconds, compile_s, steps):
        idata = az.from_dict(
            posterior={k: v for k, v in samples.items() if k in ("theta", "a", "b")}
        )
        ess = az.ess(idata, method="bulk")
        rhat = az.rhat(idata)
        min_ess = float(min(ess[v].min() for v in ess.data_vars))
        max_rhat = float(max(rhat[v].max() for v in rhat.data_vars))
        sampling = seconds - compile_s
        print(
            f"{label:<8} compile {compile_s:6.1f}s  sampling {sampling:7.1f}s  "
            f"leapfrog/draw {steps:5.1f}  min ESS {min_ess:7.0f}  max R-hat {max_rhat:.3f}  "
            f"ESS/s {min_ess / sampling:7.1f}"
        )
        return sampling, min_ess / sampling

    settings = inference.SamplerSettings(chains=4, warmup=warmup, draws=draws)
    draws_ours = inference.run_nuts(inputs, config, settings)
    ours = report(
        "package",
        draws_ours.samples,
        draws_ours.timings["total"],
        draws_ours.timings["compile"],
        float(draws_ours.stats["n_steps"].mean()),
    )
    if not naive:
        return
    inference._CLOCK.seconds, inference._CLOCK.active = 0.0, True
    t0 = time.perf_counter()
    method = "parallel" if jax.local_device_count() >= 4 else "vectorized"
    mcmc = MCMC(
        NUTS(naive_model),
        num_warmup=warmup,
        num_samples=draws,
        num_chains=4,
        chain_method=method,
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(0), inputs, config, extra_fields=("num_steps",))
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    total = time.perf_counter() - t0
    inference._CLOCK.active = False
    a = np.exp(np.asarray(samples["log_a_raw"]))  # only used for ESS shape; R-hat/ESS on theta
    base = report(
        "naive",
        {"theta": np.asarray(samples["theta"]), "a": a},
        total,
        inference._CLOCK.seconds,
        float(np.asarray(mcmc.get_extra_fields()["num_steps"]).mean()),
    )
    print(
        f"ratio    sampling time naive/package {base[0] / ours[0]:.2f}x   "
        f"ESS/s package/naive {ours[1] / base[1]:.2f}x"
    )


def distill_case() -> None:
    """Distil 200 models x 805 prompts in a child process and report time and peak RSS."""
    code = r"""
import resource, time, numpy as np, pandas as pd, warnings
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import distill
rng = np.random.default_rng(0)
m, q = 200, 805
frame = pd.DataFrame({"model_label": np.repeat([f"m{i}" for i in range(m)], q),
                      "item_id": np.tile([f"p{k}" for k in range(q)], m),
                      "reward": rng.normal(size=m * q)})
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ds = Dataset.from_frames(arena=frame)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter(); pairs = distill(ds); t = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"distill 200 x 805: {pairs.n_total:,} pairs in {t:.2f}s; kept {pairs.n_pairs:,}; "
      f"peak RSS {peak / 1024:.0f} MiB (before distilling {before / 1024:.0f} MiB)")
"""
    subprocess.run([sys.executable, "-c", code], check=True)


#: Cases of ``--only write``: (models, static items, arena prompts, sampler).
WRITE_CASES = {
    "paper-map": (18, 300, 300, "map"),
    "wide-svi": (12, 42_000, 0, "svi"),
    "alpaca-svi": (56, 0, 805, "svi"),
}

WRITE_CHILD = r"""
import json, os, resource, sys, time, warnings
start = time.perf_counter()
from bayes_dualeval.inference.device import configure
configure("cpu", 1)
from bayes_dualeval.runs import output
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.data.load import load
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.runs.fit import fit
import arviz, bayes_dualeval.report.document  # the CLI imports these while sampling: untimed
imports = time.perf_counter() - start
data, sampler, out = sys.argv[1:4]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t = time.perf_counter()
    ds = load([data])
    timings = {"data": time.perf_counter() - t}
    result = fit(ds, load_spec("dualeval-2pl"), SamplerSettings(sampler=sampler, progress=False),
                 timings=timings)
    rss_fit = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    output.write(result, out, ci=0.95)
    after = time.perf_counter() - t
t = result.diagnostics["timings"]
print(json.dumps({
    "imports": imports, "data": t["data"], "compile": t.get("compile", 0.0),
    "sampling": t.get("sampling", 0.0), "posterior": t["posterior"],
    "tables": t["write"], "report": after - t["write"],
    "after_sampling": t["posterior"] + after, "wall": time.perf_counter() - start,
    "rss_fit_mib": rss_fit,
    "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "posterior_mb": os.path.getsize(os.path.join(out, "posterior.nc")) / 1e6,
}))
"""


def write_case(name: str, tmp: str, alpaca: str | None, code: str | None) -> None:
    """Fit one case in a child process; print its phase timings and peak memory."""
    import json
    import shutil

    m, s, a, sampler = WRITE_CASES[name]
    tmp = os.path.abspath(tmp)
    if name == "alpaca-svi" and alpaca:
        folder = os.path.abspath(alpaca)
    else:
        from bayes_dualeval.model import simulate as sim

        folder = os.path.join(tmp, f"write-{name}")
        if not os.path.exists(os.path.join(folder, "truth.json")):
            static, arena, truth = sim.simulate(m, s, a, n_domains=3, seed=7)
            sim.write(folder, static, arena, truth)
    out = os.path.join(tmp, f"write-{name}-run")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [code, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", WRITE_CHILD, folder, sampler, out],
        env=env,
        cwd=tmp,  # not the checkout: with --code, its package must come first on the path
        check=True,
        capture_output=True,
        text=True,
    )
    shutil.rmtree(out, ignore_errors=True)
    r = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"{name:<11} imports {r['imports']:5.1f}s  compile {r['compile']:5.1f}s  "
        f"sampling {r['sampling']:6.1f}s  | posterior {r['posterior']:5.1f}s  "
        f"tables {r['tables']:5.1f}s  report {r['report']:5.1f}s  = after sampling "
        f"{r['after_sampling']:5.1f}s  | wall {r['wall']:6.1f}s  peak RSS "
        f"{r['rss_peak_mib']:5.0f} MiB (after the fit {r['rss_fit_mib']:5.0f})  "
        f"posterior.nc {r['posterior_mb']:.0f} MB"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["paper", "large", "distill", "write"], default=None)
    parser.add_argument("--alpaca", default=None, help="AlpacaEval folder for --only write")
    parser.add_argument("--code", default=None, help="package copy to time (--only write)")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--no-naive", action="store_true", help="skip the naive baseline")
    parser.add_argument("--tmp", default=os.path.join("runs", "benchmark-data"))
    args = parser.parse_args(argv)
    if args.only == "write":
        os.makedirs(args.tmp, exist_ok=True)
        for name in WRITE_CASES:
            write_case(name, args.tmp, args.alpaca, args.code)
        return 0
    import numpyro

    numpyro.set_host_device_count(4)
    os.makedirs(args.tmp, exist_ok=True)
    if args.only in (None, "distill"):
        distill_case()
    for name in ("paper", "large"):
        if args.only in (None, name):
            run_case(name, args.tmp, args.draws, args.warmup, naive=not args.no_naive)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process {rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
