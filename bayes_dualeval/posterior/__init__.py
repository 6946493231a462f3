"""The fitted posterior: InferenceData, convergence diagnostics, summaries.

- :mod:`~bayes_dualeval.posterior.idata`: draws to :class:`arviz.InferenceData`
  (:func:`~bayes_dualeval.posterior.idata.to_inference_data`) with the pointwise log
  likelihood.
- :mod:`~bayes_dualeval.posterior.diagnostics`: R-hat, ESS, divergences, E-BFMI and the
  convergence verdict (:func:`~bayes_dualeval.posterior.diagnostics.convergence`).
- :mod:`~bayes_dualeval.posterior.summaries`: the leaderboard and pairwise tables.
"""
