r"""What NUTS's adapted metric leaves on the table: steps per draw against better metrics.

One process, one data set. First the package's default round (400 warm-up iterations
adapting a dense mass matrix over the global block and a diagonal one elsewhere, 1,000
draws per chain, 4 chains). Then, from the chains' last state, rounds of 1,000 draws with
the metric fixed at (after 150 warm-up iterations that tune the step size only, unless said
otherwise):

* ``continued``: the control, the same kernel continued for 1,000 more draws (no warm-up),
  as a fit's continuation round runs;
* ``from draws``: the covariance of the default round's 4,000 draws in the default's
  blocks (dense global block, diagonal elsewhere; the best metric of that form), after
  :data:`~bayes_dualeval.inference.warm.WARMUP` iterations tuning the step size, as a
  continuation round would sample with it (measured in session 65 and not adopted:
  docs/performance.md);
* ``pooled``: the mean over chains of the metrics the chains adapted (what a warm-up that
  shared its estimates across chains could reach at best with the same draws);
* ``oracle-dense`` (``--dense``): the same covariance over every coordinate, dense. With
  4,000 autocorrelated draws of several hundred coordinates its estimate is noisy, which
  costs more steps than the correlations it adds recover;
* ``oracle-low-rank`` (``--low-rank``): low rank plus diagonal over every coordinate: the
  draws' variances, and the eigen-directions of their correlation matrix whose
  eigenvalues lie outside the Marchenko-Pastur bulk of noise (``(1 +- sqrt(d / n))^2``,
  10% margin; at most :data:`MAX_RANK`) kept at their eigenvalues (the form of nutpie's
  and BlackJAX's low-rank metrics, here estimated from the posterior's draws).

Each line prints the mean leapfrog steps per draw, the ratio of steps to the default's,
the least effective sample size over every latent coordinate (bulk and tail) per 1,000
leapfrog steps (the measure issue 56 decides by), the step sizes and the seconds. Warm-up's
own steps are not counted. Run it on an idle machine::

    python scripts/studies/metric_oracle.py data/
    python scripts/studies/metric_oracle.py PAPER_DIR  # simulate PAPER_DIR --models 18
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from bayes_dualeval.inference.device import configure

CHAINS = 4
#: Most eigen-directions the low-rank metric keeps.
MAX_RANK = 40


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--dense", action="store_true", help="also the full dense oracle")
    parser.add_argument("--low-rank", action="store_true", help="also the low-rank oracle")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    configure(chains=CHAINS)

    import jax
    import numpy as np
    from numpyro.infer import MCMC

    from bayes_dualeval import load
    from bayes_dualeval.inference import nuts, nuts_round
    from bayes_dualeval.inference.buckets import padded
    from bayes_dualeval.inference.chains import CompiledInitNUTS, data_as_argument
    from bayes_dualeval.inference.metric import start_metric
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.inference.start import init_strategy
    from bayes_dualeval.inference.warm import WARMUP
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
    key = jax.random.PRNGKey(settings.seed)
    samples, stats = nuts_round.one_round(mcmc, key, inputs, config, None)
    base = float(stats["num_steps"].mean())
    state = mcmc.last_state
    print(f"data: {args.data} ({inputs.n_models} models, {inputs.n_items} items)")
    unconstrained = _unconstrained(samples, inputs, config)
    _line("default (adapted)", base, base, state, time.perf_counter() - start, unconstrained)

    # the control: the same kernel continued for as many draws (as a fit's continuation
    # round runs), from the same state as every line below
    start = time.perf_counter()
    go_on = nuts_round.continued(mcmc, settings.draws)
    go_on.post_warmup_state = state
    drawn, more = nuts_round.one_round(go_on, state.rng_key, inputs, config, None)
    steps = float(more["num_steps"].mean())
    latent = _unconstrained(drawn, inputs, config)
    _line("continued", steps, base, go_on.last_state, time.perf_counter() - start, latent)

    # each line: the metric's blocks, the metric, and the warm-up that tunes its step size
    retune = 150
    metrics = {
        "pooled": ([dense], nuts.adapted_metric(state, CHAINS), retune),
        "from draws": (  # as a continuation round would sample with it
            [dense],
            _oracle(unconstrained, state.adapt_state.inverse_mass_matrix),
            WARMUP,
        ),
    }
    every = tuple(sorted(unconstrained))
    if args.dense:
        metrics["oracle-dense"] = ([every], {every: _covariance(unconstrained, every)}, retune)
    if args.low_rank:
        metrics["oracle-low-rank"] = ([every], {every: _low_rank(unconstrained, every)}, retune)
    step = float(np.mean(state.adapt_state.step_size))
    for label, (blocks, metric, warmup) in metrics.items():
        start = time.perf_counter()
        if blocks == [dense]:  # the step size tuned again, only
            tuned = dataclasses.replace(settings, warmup=warmup)
            run = nuts.make_mcmc(inputs, config, tuned, metric, adapt_metric=False, step_size=step)
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
            run = MCMC(kernel, num_warmup=warmup, num_samples=settings.draws,
                       num_chains=CHAINS, chain_method=data_as_argument,
                       progress_bar=False, jit_model_args=True)  # fmt: skip
        drawn, more = nuts_round.one_round(run, jax.random.PRNGKey(1), inputs, config, state.z)
        steps = float(more["num_steps"].mean())
        latent = _unconstrained(drawn, inputs, config)
        _line(label, steps, base, run.last_state, time.perf_counter() - start, latent)
    return 0


def _line(label, steps, base, state, seconds, latent):
    import numpy as np

    eps = np.round(np.asarray(state.adapt_state.step_size), 3)
    ess = _least_ess(latent)
    per = ess / (steps * latent[next(iter(latent))].shape[0]) * 1000
    print(
        f"{label:18s} {steps:6.1f} steps per draw ({steps / base:.2f}x the default)  "
        f"least ESS {ess:.0f} ({per:.2f} per 1,000 steps)  step sizes {eps}  "
        f"{seconds:.1f} s with compilation"
    )


def _least_ess(latent):
    """The least bulk or tail ESS over every latent coordinate (chains kept apart)."""
    import arviz as az
    import numpy as np

    least = np.inf
    for values in latent.values():
        by_chain = values.reshape(CHAINS, -1, values.shape[1])
        for method in ("bulk", "tail"):
            ess = az.ess(az.convert_to_dataset(by_chain), method=method)
            least = min(least, float(np.nanmin(ess.to_array().values)))
    return least


def _low_rank(unconstrained, names):
    """Low rank plus diagonal (see the module): ``S (I + U (L - I) U^T) S``, float32."""
    import numpy as np

    x = np.concatenate([unconstrained[k] for k in names], axis=1).astype(np.float64)
    n, d = x.shape
    sd = x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    lam, vec = np.linalg.eigh(np.corrcoef(x / sd, rowvar=False))
    edge = np.sqrt(d / n)
    outside = (lam > 1.1 * (1 + edge) ** 2) | (lam < 0.9 * (1 - edge) ** 2)
    far = np.argsort(-np.abs(np.log(np.maximum(lam, 1e-12))))[:MAX_RANK]
    keep = np.zeros(d, bool)
    keep[far] = True
    keep &= outside
    corr = np.eye(d) + (vec[:, keep] * (lam[keep] - 1.0)) @ vec[:, keep].T
    return (sd[:, None] * corr * sd[None, :]).astype(np.float32)


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
