"""Inference: NUTS, SVI and the posterior mode, and where JAX runs.

- :mod:`~bayes_dualeval.inference.sampling`: :func:`~bayes_dualeval.inference.sampling.sample`,
  the one entry point, and :func:`~bayes_dualeval.inference.sampling.check_supported`.
- :mod:`~bayes_dualeval.inference.settings`: the
  :class:`~bayes_dualeval.inference.settings.SamplerSettings`.
- :mod:`~bayes_dualeval.inference.nuts`, :mod:`~bayes_dualeval.inference.svi`,
  :mod:`~bayes_dualeval.inference.mode` (with :mod:`~bayes_dualeval.inference.item_integral`):
  the samplers; :mod:`~bayes_dualeval.inference.start`: where they start.
- :mod:`~bayes_dualeval.inference.draws`: :class:`~bayes_dualeval.inference.draws.Draws`,
  what every sampler returns, and its timings.
- :mod:`~bayes_dualeval.inference.device`: platform, host devices and compile cache.
"""
