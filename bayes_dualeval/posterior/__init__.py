"""The fitted posterior: InferenceData, convergence diagnostics, summaries.

- :mod:`~bayes_dualeval.posterior.idata`: draws to :class:`arviz.InferenceData`
  (:func:`~bayes_dualeval.posterior.idata.to_inference_data`).
- :mod:`~bayes_dualeval.posterior.loglik`: the data's pointwise log likelihood, the
  ``log_likelihood`` group.
- :mod:`~bayes_dualeval.posterior.diagnostics`: R-hat, ESS, divergences, E-BFMI and the
  convergence verdict (:func:`~bayes_dualeval.posterior.diagnostics.convergence`).
- :mod:`~bayes_dualeval.posterior.summaries`: the leaderboard and pairwise tables.
- :mod:`~bayes_dualeval.posterior.stored`: what ``posterior.nc`` keeps of the draws
  (evenly thinned above a bound).
"""
