r"""Issue 56, item 2: MAMS (Metropolis-adjusted microcanonical sampling) against the NUTS fit.

MAMS (arXiv 2503.01707; BlackJAX ``adjusted_mclmc_dynamic`` with
``adjusted_mclmc_find_L_and_step_size``) is measured on the package's own posterior: the
same NumPyro model (:func:`bayes_dualeval.model.joint.dualeval_model`), the same inputs
(layout, centring and anchoring of the default fit) and the same start, so the only
difference is the sampler. Both are scored alike: the least effective sample size over
every latent coordinate, bulk and tail (chains kept apart), per 1,000 gradient
evaluations of the log density, warm-up excluded and included.

* ``nuts``: the package's default round (:func:`bayes_dualeval.inference.nuts.make_mcmc`:
  400 warm-up iterations adapting a dense metric over the global block, 1,000 draws per
  chain, 4 chains); one gradient per leapfrog step.
* ``mams``: BlackJAX 1.7's tuner per chain (step size by dual averaging at the target
  acceptance, a diagonal preconditioner, the trajectory length ``L`` from the draws'
  autocorrelation with ``--tune3``, which BlackJAX 1.7.1 then resets to ``--avg-steps``
  steps of the tuned size), then ``--draws`` draws with random trajectory lengths of
  mean ``L / step_size``; the isokinetic McLachlan integrator costs two gradients per
  step. The tuner's own steps are counted as warm-up.

BlackJAX is installed for this script only, never a dependency of the package::

    pip install --target /tmp/bjx-lib blackjax==1.7.1 optax absl-py chex toolz --no-deps
    PYTHONPATH=/tmp/bjx-lib python scripts/studies/mams_probe.py data/

Run it on an idle machine; one data set, one seed per call (use ``--seed``).
"""

from __future__ import annotations

import argparse
import time

from bayes_dualeval.inference.device import configure

CHAINS = 4
#: Gradients per step of the isokinetic McLachlan integrator (two force evaluations).
GRADS_PER_STEP = 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune-steps", type=int, default=4000, help="the tuner's budget")
    parser.add_argument("--target", type=float, default=0.9, help="MAMS acceptance target")
    parser.add_argument("--tune3", type=float, default=0.1, help="share tuning L")
    parser.add_argument(
        "--avg-steps", type=float, default=2.0,
        help="mean integration steps per proposal (BlackJAX 1.7's default 2: L = 2 eps)",
    )  # fmt: skip
    parser.add_argument("--skip-nuts", action="store_true")
    args = parser.parse_args(argv)
    configure(chains=CHAINS)

    import jax
    import numpy as np

    # the script's folder is on the path: the same unconstrained draws as the metric's study
    from metric_oracle import _unconstrained

    from bayes_dualeval import load
    from bayes_dualeval.inference import nuts, nuts_round
    from bayes_dualeval.inference.buckets import padded
    from bayes_dualeval.inference.metric import start_metric
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.joint import global_sites
    from bayes_dualeval.runs.fit import DualEvalModel

    config = load_spec("dualeval-2pl")
    dataset = DualEvalModel(config).fitted_data(load(args.data))
    settings = SamplerSettings(chains=CHAINS, seed=args.seed, draws=args.draws)
    inputs, _ = build_inputs(dataset, config, centred=settings.centring)
    inputs = padded(inputs)
    print(
        f"data: {args.data} ({inputs.n_models} models, {inputs.n_items} items), seed {args.seed}"
    )

    if not args.skip_nuts:
        start = time.perf_counter()
        dense = global_sites(config, inputs)
        mcmc = nuts.make_mcmc(
            inputs, config, settings, start_metric(inputs, config, dense, settings.seed)
        )
        samples, stats = nuts_round.one_round(
            mcmc, jax.random.PRNGKey(settings.seed), inputs, config, None
        )
        steps = np.asarray(stats["num_steps"], np.float64)
        latent = _unconstrained(samples, inputs, config)
        ess = _least_ess(_stack(latent))
        sampling = steps.sum()
        # NumPyro does not return the warm-up's steps; 400 iterations at about the
        # sampling's mean depth is the estimate (stated in the output)
        warm = settings.warmup * CHAINS * steps.mean()
        _line("nuts", ess, sampling, warm, time.perf_counter() - start, steps.mean(), "")

    start = time.perf_counter()
    draws, grads, tune_grads, info = _mams(inputs, config, args)
    ess = _least_ess(draws)
    _line("mams", ess, grads, tune_grads, time.perf_counter() - start, info["mean_steps"],
          f"acceptance {info['acceptance']:.2f}, step size {info['step_size']}, "
          f"L {info['L']}, divergences {info['divergent']}")  # fmt: skip
    return 0


def _mams(inputs, config, args):
    """Tune and run MAMS on 4 chains (vmapped); draws (chain, draw, dim) and gradient counts."""
    import blackjax
    import jax
    import jax.numpy as jnp
    import numpy as np
    from blackjax.adaptation.adjusted_mclmc_adaptation import (
        adjusted_mclmc_find_L_and_step_size,
    )
    from blackjax.mcmc.adjusted_mclmc_dynamic import make_random_trajectory_length_fn
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import initialize_model

    from bayes_dualeval.inference.start import init_strategy
    from bayes_dualeval.model.joint import dualeval_model

    keys = jax.random.split(jax.random.PRNGKey(args.seed), CHAINS)
    init = initialize_model(
        keys[0], dualeval_model, model_args=(inputs, config),
        init_strategy=init_strategy(config, inputs),
    )  # fmt: skip
    flat0, unravel = ravel_pytree(init.param_info.z)
    potential = init.potential_fn

    def logdensity(x):
        return -potential(unravel(x))

    starts = []
    for key in keys:
        z = initialize_model(
            key, dualeval_model, model_args=(inputs, config),
            init_strategy=init_strategy(config, inputs),
        ).param_info.z  # fmt: skip
        starts.append(ravel_pytree(z)[0])
    starts = jnp.stack(starts)
    steps_fn = make_random_trajectory_length_fn(True)
    kernel = blackjax.mcmc.adjusted_mclmc_dynamic.build_kernel(integration_steps_fn=steps_fn)

    def chain(key, x0):
        init_key, tune_key, run_key = jax.random.split(key, 3)
        state = blackjax.mcmc.adjusted_mclmc_dynamic.init(x0, logdensity, init_key)
        state, params, tune_steps = adjusted_mclmc_find_L_and_step_size(
            mclmc_kernel=kernel, logdensity_fn=logdensity, num_steps=args.tune_steps,
            state=state, rng_key=tune_key, target=args.target, frac_tune3=args.tune3,
            target_num_integration_steps=args.avg_steps,
        )  # fmt: skip
        avg = params.L / params.step_size

        def step(state, k):
            state, info = kernel(
                rng_key=k, state=state, logdensity_fn=logdensity, step_size=params.step_size,
                inverse_mass_matrix=params.inverse_mass_matrix,
                integration_steps_params=(avg,),
            )  # fmt: skip
            return state, (
                state.position, info.num_integration_steps, info.acceptance_rate,
                info.is_divergent,
            )  # fmt: skip

        _, (xs, n, acc, div) = jax.lax.scan(step, state, jax.random.split(run_key, args.draws))
        return xs, n, acc, div, tune_steps, params.step_size, params.L

    xs, n, acc, div, tune, eps, big_l = jax.block_until_ready(
        jax.jit(jax.vmap(chain))(keys, starts)
    )
    n = np.asarray(n, np.float64)
    info = {
        "mean_steps": float(n.mean()),
        "acceptance": float(np.mean(acc)),
        "step_size": np.round(np.asarray(eps), 3).tolist(),
        "L": np.round(np.asarray(big_l), 2).tolist(),
        "divergent": int(np.sum(div)),
    }
    grads = n.sum() * GRADS_PER_STEP
    tune_grads = float(np.sum(tune)) * GRADS_PER_STEP
    del flat0
    return np.asarray(xs), grads, tune_grads, info


def _line(label, ess, grads, warm_grads, seconds, mean_steps, extra):
    per = ess / grads * 1000
    total = ess / (grads + warm_grads) * 1000
    print(
        f"{label:5s} least ESS {ess:7.0f}  {mean_steps:6.1f} steps per draw  "
        f"{per:5.2f} ESS per 1,000 gradients sampling ({total:5.2f} with warm-up)  "
        f"{seconds:6.1f} s  {extra}",
        flush=True,
    )


def _stack(latent):
    """Each site's ``(chain * draw, k)`` draws as one ``(chain, draw, dim)`` array."""
    import numpy as np

    x = np.concatenate([v for v in latent.values()], axis=1)
    return x.reshape(CHAINS, -1, x.shape[1])


def _least_ess(draws):
    """The least bulk or tail ESS over every coordinate of ``draws`` (chain, draw, dim)."""
    import arviz as az
    import numpy as np

    data = az.convert_to_dataset(np.asarray(draws, np.float64))
    return min(
        float(np.nanmin(az.ess(data, method=m).to_array().values)) for m in ("bulk", "tail")
    )


if __name__ == "__main__":
    raise SystemExit(main())
