r"""What NUTS's adapted metric leaves on the table: steps per draw against better metrics.

One process, one data set. First the package's default round (400 warm-up iterations
adapting a dense mass matrix over the global block and a diagonal one elsewhere, 1,000
draws per chain, 4 chains). Then, from the chains' last state, rounds of 1,000 draws after
150 warm-up iterations that tune the step size only, with the metric fixed at:

* ``pooled``: the mean over chains of the metrics the chains adapted (what a warm-up that
  shared its estimates across chains could reach at best with the same draws);
* ``oracle``: the covariance of the default round's 4,000 draws, in the default's shape
  (dense global block, diagonal elsewhere): the best metric of that shape;
* ``oracle-dense`` (``--dense``): the same covariance over every coordinate, dense. With
  4,000 autocorrelated draws of several hundred coordinates its estimate is noisy, which
  costs more steps than the correlations it adds recover.

Each line prints the mean leapfrog steps per draw, the step sizes and the ratio of steps to
the default's. Fewer steps per draw is proportionally less sampling time; warm-up's own
steps are not counted. Run it on an idle machine::

    python scripts/studies/metric_oracle.py data/
    python scripts/studies/metric_oracle.py PAPER_DIR  # simulate PAPER_DIR --models 18
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from bayes_dualeval.inference.device import configure

CHAINS = 4


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--dense", action="store_true", help="also the full dense oracle")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    configure(chains=CHAINS)

    import jax
    import numpy as np
    from numpyro.infer import MCMC

    from bayes_dualeval import load
    from bayes_dualeval.inference import nuts
    from bayes_dualeval.inference.buckets import padded
    from bayes_dualeval.inference.chains import CompiledInitNUTS, data_as_argument
    from bayes_dualeval.inference.metric import start_metric
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.inference.start import init_strategy
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.joint import dualeval_model, global_sites
    from bayes_dualeval.runs.fit import DualEvalModel

    config = load_spec("dualeval-2pl")
    dataset = DualEvalModel(config).fitted_data(load(args.data))
    settings = SamplerSettings(chains=CHAINS, seed=args.seed)
    inputs, _ = build_inputs(dataset, config, centred=settings.centring)
    inputs = padded(inputs)
    dense = global_sites(config, inputs)

    start = time.perf_counter()
    mcmc = nuts.make_mcmc(
        inputs, config, settings, start_metric(inputs, config, dense, settings.seed)
    )
    samples, stats = nuts._one_round(mcmc, jax.random.PRNGKey(settings.seed), inputs, config, None)
    base = float(stats["num_steps"].mean())
    state = mcmc.last_state
    print(f"data: {args.data} ({inputs.n_models} models, {inputs.n_items} items)")
    _line("default (adapted)", base, base, state, time.perf_counter() - start)

    unconstrained = _unconstrained(samples, inputs, config)
    shape = state.adapt_state.inverse_mass_matrix
    metrics = {
        "pooled": ([dense], nuts.adapted_metric(state, CHAINS)),
        "oracle": ([dense], _oracle(unconstrained, shape)),
    }
    if args.dense:
        every = tuple(sorted(unconstrained))
        metrics["oracle-dense"] = ([every], {every: _covariance(unconstrained, every)})
    step = float(np.mean(state.adapt_state.step_size))
    fixed = dataclasses.replace(settings, warmup=150)  # the step size tuned again, only
    for label, (blocks, metric) in metrics.items():
        start = time.perf_counter()
        if blocks == [dense]:
            run = nuts.make_mcmc(inputs, config, fixed, metric, adapt_metric=False, step_size=step)
        else:  # a dense block over every coordinate: the package never samples so
            kernel = CompiledInitNUTS(
                dualeval_model,
                step_size=step,
                target_accept_prob=settings.target_accept,
                max_tree_depth=settings.max_tree_depth,
                init_strategy=init_strategy(config, inputs),
                dense_mass=blocks,
                inverse_mass_matrix=metric,
                adapt_mass_matrix=False,
            )
            run = MCMC(kernel, num_warmup=150, num_samples=settings.draws,
                       num_chains=CHAINS, chain_method=data_as_argument,
                       progress_bar=False, jit_model_args=True)  # fmt: skip
        _, more = nuts._one_round(run, jax.random.PRNGKey(1), inputs, config, state.z)
        steps = float(more["num_steps"].mean())
        _line(label, steps, base, run.last_state, time.perf_counter() - start)
    return 0


def _line(label, steps, base, state, seconds):
    import numpy as np

    eps = np.round(np.asarray(state.adapt_state.step_size), 3)
    print(
        f"{label:18s} {steps:6.1f} steps per draw ({steps / base:.2f}x the default)  "
        f"step sizes {eps}  {seconds:.1f} s with compilation"
    )


def _unconstrained(samples, inputs, config):
    """Each latent site's draws in the coordinates NUTS samples, ``(chain * draw, -1)``."""
    import numpy as np
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to

    from bayes_dualeval.model.joint import dualeval_model

    trace = handlers.trace(handlers.seed(dualeval_model, 0)).get_trace(inputs, config)
    out = {}
    for name, site in trace.items():
        if site["type"] == "sample" and not site["is_observed"]:
            values = np.asarray(biject_to(site["fn"].support).inv(samples[name]))
            out[name] = values.reshape(values.shape[0] * values.shape[1], -1)
    return out


def _covariance(unconstrained, names):
    import numpy as np

    return np.cov(np.concatenate([unconstrained[k] for k in names], axis=1).T).astype(np.float32)


def _oracle(unconstrained, shape):
    """The draws' covariance in the blocks of ``shape`` (dense where the metric is dense)."""
    import numpy as np

    out = {}
    for names, block in shape.items():
        if np.ndim(block) == 3:  # (chain, d, d): a dense block
            out[names] = _covariance(unconstrained, names)
        else:
            columns = np.concatenate([unconstrained[k] for k in names], axis=1)
            out[names] = columns.var(axis=0).astype(np.float32)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
