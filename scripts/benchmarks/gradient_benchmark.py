"""Benchmark: one value-and-gradient of the posterior's potential, against simpler densities.

A NUTS step is a few value-and-gradient evaluations of the potential (minus the log
density in unconstrained coordinates), so their cost sets the sampling time. Timed in one
process, each compiled once and run ``--evals`` times inside one compiled loop (no Python
dispatch per evaluation; the result is blocked on):

* ``package, data as arguments``: the potential with every term read from lists of cells
  and pairs (NUTS's layout before 2026-12-05), compiled as the sampler
  compiles it (the data padded to their buckets and an argument of the program, items
  centred or not per item, arena difficulties anchored to their level by a 12-step
  Newton solve);
* ``package, static labels as a matrix``: the same potential with the static labels read
  from a models x items matrix of counts (``inference/layout.py``; NUTS's layout where 60%
  or more of the matrix is observed, whatever the coverage here);
* ``package as NUTS lays it out``: the static labels and the arena's decisive pairs as
  matrices where their coverage says so (``inference/layout.py``,
  ``model/arena_matrix.py``), what the sampler evaluates;
* ``package, data compiled in as constants``: the same potential with the data closed
  over, so that XLA folds away whatever depends on the data alone (what this benchmark
  measured until 2026-12-03: it flattered the sampler's gradient);
* ``package without its Newton steps``: the same with the solve for the anchored
  difficulties cut to its start (a wrong gradient, so not a sampler: it says what the
  solve costs);
* ``hand-written``: a minimal JAX density of the same terms and priors (non-centred items,
  no anchoring, no padding): the least a gradient of these terms can cost in JAX;
* ``dense``: the hand-written density with static labels laid out as a models x items
  matrix with a mask instead of a list of cells, and decisive pairs as one models x
  models matrix per prompt (weights zero where a pair is not decisive or not observed)
  instead of a list of pairs: more arithmetic, no gathers or scatters; also each of the
  two on its own.

The package's densities are timed where the chains spend their draws (``--point warm``,
the default: the state of one chain after 300 warm-up iterations), or at the chains'
starting point (``--point start``, what this benchmark timed until 2026-12-04). The two
differ: the anchoring solve stops once it has converged, in 4-8 steps at posterior draws
and up to its cap of 12 at the start. The hand-written densities have no such solve.

Printed as microseconds per evaluation and as a ratio to the hand-written density. Run it
on an otherwise idle machine::

    python scripts/benchmarks/gradient_benchmark.py               # bundled data/
    python scripts/benchmarks/gradient_benchmark.py --data DIR --evals 2000
    python scripts/benchmarks/gradient_benchmark.py --data paper  # paper scale, simulated
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("BAYES_DUALEVAL_CACHE", "off")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def package_potential(inputs, config, *, data_as_argument: bool = False, layout="cells"):
    """The package's potential, a starting point and the data it reads, as NUTS sees them.

    ``data_as_argument``: the potential is a function of ``(z, data)`` and the data are an
    argument of the compiled program, as in the sampler (``inference/chains.py``);
    otherwise a function of ``z`` with the data compiled in as constants (the returned
    data are then None). The two differ: XLA folds computations on constant data away.
    ``layout``: every term as a list of cells and pairs (``"cells"``), the static labels
    as a matrix (``"static matrix"``), or as NUTS lays the data out (``"nuts"``: the static
    and the arena matrices where their coverage says so, ``inference/layout.py``).
    """
    from numpyro.infer.util import initialize_model

    from bayes_dualeval.inference.buckets import padded
    from bayes_dualeval.model.joint import dualeval_model

    data = padded(inputs)
    from bayes_dualeval.inference.layout import laid_out, with_static_matrix

    if layout == "static matrix":
        data = with_static_matrix(data)
    elif layout == "nuts":
        data = laid_out(data, config)
    info = initialize_model(
        jax.random.PRNGKey(0),
        dualeval_model,
        model_args=(data, config),
        dynamic_args=data_as_argument,
    )
    if data_as_argument:
        make = info.potential_fn
        return (lambda z, data: make(data, config)(z)), info.param_info.z, data
    return info.potential_fn, info.param_info.z, None


def warmed_point(inputs, config, warmup: int = 300) -> dict:
    """Where one chain is after ``warmup`` iterations of the package's NUTS (unconstrained)."""
    from bayes_dualeval.inference.buckets import padded
    from bayes_dualeval.inference.nuts import make_mcmc
    from bayes_dualeval.inference.settings import SamplerSettings

    data = padded(inputs)
    settings = SamplerSettings(chains=1, warmup=warmup, draws=1, seed=0)
    mcmc = make_mcmc(data, config, settings)
    mcmc.run(jax.random.PRNGKey(0), data, config)
    return jax.block_until_ready(mcmc.last_state.z)


def hand_written(inputs, config, static_dense: bool, pairs_dense: bool | None = None):
    """A minimal potential of the same terms.

    Static cells as a models x items matrix when ``static_dense``, decisive pairs as a
    models x models matrix per prompt when ``pairs_dense`` (default: as ``static_dense``).
    """
    pairs_dense = static_dense if pairs_dense is None else pairs_dense
    dense = static_dense or pairs_dense
    arr = {k: jnp.asarray(getattr(inputs, k)) for k in (
        "item_group", "static_model", "static_item", "static_y", "arena_model", "arena_item",
        "pair_i", "pair_j", "pair_w", "pair_t", "prompt_n", "prompt_zbar", "prompt_se",
        "level_group",
    )}  # fmt: skip
    m, q, g = inputs.n_models, inputs.n_items, arr["item_group"]
    used = np.asarray(inputs.prompt_n) > 0
    n = jnp.maximum(arr["prompt_n"], 1.0)
    if dense:
        y, mask = _matrix(inputs.static_model, inputs.static_item, inputs.static_y, m, q)
        prompts = np.flatnonzero(used)
        local = np.full(q, -1)
        local[prompts] = np.arange(len(prompts))
        am, ai = np.asarray(inputs.arena_model), np.asarray(inputs.arena_item)
        seen = np.zeros((len(prompts), m), np.float32)
        seen[local[ai], am] = 1.0
        # each decisive pair as one entry of a prompt's models x models matrix:
        # w [t log s(x) + (1 - t) log s(-x)] = C_ij log s(g (p_i - p_j)) summed both ways
        pi, pj = np.asarray(inputs.pair_i), np.asarray(inputs.pair_j)
        w, t = np.asarray(inputs.pair_w), np.asarray(inputs.pair_t)
        c = np.zeros((len(prompts), m, m), np.float32)
        np.add.at(c, (local[ai[pi]], am[pi], am[pj]), w * t)
        np.add.at(c, (local[ai[pi]], am[pj], am[pi]), w * (1 - t))
        y, mask, seen, c = map(jnp.asarray, (y, mask, seen, c))
        prompts = jnp.asarray(prompts)

    def normal(x, scale):
        return jnp.sum(-0.5 * (x / scale) ** 2 - jnp.log(scale))

    def potential(z):
        sigma_b, sigma_la, gamma = (
            jnp.exp(z["log_sigma_b"]),
            jnp.exp(z["log_sigma_la"]),
            jnp.exp(z["log_gamma"]),
        )
        theta = z["theta"]
        b = jnp.mean(theta) + z["mu_b"][g] + sigma_b[g] * z["u"]
        a = jnp.exp(z["mu_la"][g] + sigma_la[g] * z["v"])
        lp = normal(theta, config.theta_scale) + normal(z["u"], 1.0) + normal(z["v"], 1.0)
        lp += normal(z["mu_b"], config.b_loc_scale) + normal(z["mu_la"], config.loga_loc_scale)
        lp += normal(sigma_b, config.b_scale_scale) + jnp.sum(z["log_sigma_b"])
        lp += normal(z["log_sigma_la"] - np.log(config.loga_scale_scale), 0.5)
        lp += normal(z["log_gamma"] - config.gamma_loc, config.gamma_scale)
        lp += normal(z["level_c"], config.level_loc_scale)
        if static_dense:
            eta = a[None, :] * (theta[:, None] - b[None, :])
            lp += jnp.sum(mask * (y * eta - jax.nn.softplus(eta)))
        else:
            si = arr["static_item"]
            eta = a[si] * (theta[arr["static_model"]] - b[si])
            lp += jnp.sum(arr["static_y"] * eta - jax.nn.softplus(eta))
        if pairs_dense:
            ap, bp = a[prompts], b[prompts]
            p = jax.nn.sigmoid(ap[:, None] * (theta[None, :] - bp[:, None]))
            x = gamma * (p[:, :, None] - p[:, None, :])
            lp -= jnp.sum(c * jax.nn.softplus(-x))
            pbar = jnp.zeros(q).at[prompts].set(jnp.sum(seen * p, axis=1)) / n
        else:
            ai = arr["arena_item"]
            p = jax.nn.sigmoid(a[ai] * (theta[arr["arena_model"]] - b[ai]))
            x = gamma * (p[arr["pair_i"]] - p[arr["pair_j"]])
            t = arr["pair_t"]
            loss = t * jax.nn.softplus(-x) + (1 - t) * jax.nn.softplus(x)
            lp -= jnp.sum(arr["pair_w"] * loss)
            pbar = jax.ops.segment_sum(p, ai, q) / n
        resid = (arr["prompt_zbar"] - z["level_c"][arr["level_group"]] - gamma * pbar) / arr[
            "prompt_se"
        ]
        lp += jnp.sum(jnp.where(used, -0.5 * resid**2, 0.0))
        return -lp

    groups, levels = inputs.n_groups, max(inputs.n_level_groups, 1)
    start = {
        "theta": jnp.zeros(m), "u": jnp.zeros(q), "v": jnp.zeros(q), "mu_b": jnp.zeros(groups),
        "mu_la": jnp.zeros(groups), "log_sigma_b": jnp.zeros(groups),
        "log_sigma_la": jnp.zeros(groups), "log_gamma": jnp.asarray(1.0),
        "level_c": jnp.zeros(levels),
    }  # fmt: skip
    return potential, start


def _matrix(rows, cols, values, m, q):
    """Cells as a dense ``m x q`` matrix of values and one of presence."""
    rows, cols = np.asarray(rows), np.asarray(cols)
    y = np.zeros((m, q), np.float32)
    mask = np.zeros((m, q), np.float32)
    y[rows, cols] = np.asarray(values)
    mask[rows, cols] = 1.0
    return y, mask


def time_gradient(potential, z, evals: int, repeats: int, data=None) -> float:
    """Median microseconds per value-and-gradient over ``repeats`` compiled loops.

    ``data`` (not None): ``potential(z, data)``, the data an argument of the loop.
    """
    grad = jax.value_and_grad(potential if data is None else lambda z, d: potential(z, d))

    @jax.jit
    def loop(z, data):
        def body(_, carry):
            z, total = carry
            value, g = grad(z) if data is None else grad(z, data)
            # a tiny step along the gradient: every evaluation sees a new point
            z = jax.tree.map(lambda x, d: x - 1e-6 * d, z, g)
            return z, total + value

        return jax.lax.fori_loop(0, evals, body, (z, 0.0))

    jax.block_until_ready(loop(z, data))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(loop(z, data))
        times.append(time.perf_counter() - start)
    return 1e6 * float(np.median(times)) / evals


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / "data"))
    parser.add_argument("--evals", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--point",
        choices=["warm", "start"],
        default="warm",
        help="time the package where a chain is after warm-up, or at its start",
    )
    args = parser.parse_args(argv)

    from bayes_dualeval import load
    from bayes_dualeval.inference.buckets import padded
    from bayes_dualeval.inference.layout import (
        arena_layout,
        pair_coverage,
        static_coverage,
        static_layout,
    )
    from bayes_dualeval.inference.metric import n_terms
    from bayes_dualeval.model import anchoring
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.spec import DualEvalModel

    config = load_spec("dualeval-2pl")
    if args.data == "paper":
        from bayes_dualeval.data.dataset import Dataset
        from bayes_dualeval.model.simulate import simulate

        static, arena, _ = simulate(18, 300, 300, n_domains=3, seed=7)
        raw = Dataset.from_frames(static=static, arena=arena, source="sim")
    else:
        raw = load(args.data)
    dataset = DualEvalModel(config).fitted_data(raw)
    inputs, _ = build_inputs(dataset, config, centred="auto")
    plain, _ = build_inputs(dataset, config, centred="none")
    rows = []
    potential, z, data = package_potential(inputs, config, data_as_argument=True)
    if args.point == "warm":
        z = warmed_point(inputs, config)
    label = "package, data as arguments, cells and pairs as lists"
    rows.append((label, time_gradient(potential, z, args.evals, args.repeats, data)))
    if inputs.has_static:
        potential, _, data = package_potential(
            inputs, config, data_as_argument=True, layout="static matrix"
        )
        coverage = static_coverage(inputs)
        label = f"package, static labels as a matrix (coverage {coverage:.2f})"
        rows.append((label, time_gradient(potential, z, args.evals, args.repeats, data)))
    potential, _, data = package_potential(inputs, config, data_as_argument=True, layout="nuts")
    padded_inputs = padded(inputs)
    label = (
        f"package as NUTS lays it out (static {static_layout(padded_inputs)}, arena "
        f"{arena_layout(padded_inputs, config)}, pair coverage {pair_coverage(padded_inputs):.2f})"
    )
    rows.append((label, time_gradient(potential, z, args.evals, args.repeats, data)))
    potential, _, _ = package_potential(inputs, config)
    label = "package, data compiled in as constants (lists)"
    rows.append((label, time_gradient(potential, z, args.evals, args.repeats)))
    steps = anchoring.NEWTON_STEPS
    anchoring.NEWTON_STEPS = 0  # what the solve costs: not a density to sample
    try:
        potential, _, _ = package_potential(inputs, config)
        label = f"package without its (at most {steps}) Newton steps (constants; for scale only)"
        rows.append((label, time_gradient(potential, z, args.evals, args.repeats)))
    finally:
        anchoring.NEWTON_STEPS = steps
    values = []
    layouts = {
        "hand-written": (False, False),
        "dense static cells only": (True, False),
        "dense pairs only": (False, True),
        "dense": (True, True),
    }
    for label, (static_dense, pairs_dense) in layouts.items():
        potential, z = hand_written(plain, config, static_dense, pairs_dense)
        # the same density in every layout, at a point off the start
        point = jax.tree.map(lambda x: x + 0.1, z)
        values.append(float(jax.jit(potential)(point)))
        rows.append((label, time_gradient(potential, z, args.evals, args.repeats)))
    if not np.allclose(values, values[0], rtol=1e-4):
        raise SystemExit(f"the layouts are not the same density: {values}")
    base = dict(rows)["hand-written"]
    terms = n_terms(inputs)
    print(f"data: {args.data} ({terms:,} likelihood terms), {jax.devices()[0].platform}")
    print(f"the package's densities timed at the chain's {args.point} point")
    print("\n| density | us per value-and-gradient | vs hand-written |")
    print("|---|---|---|")
    for label, us in rows:
        print(f"| {label} | {us:.0f} | {us / base:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
