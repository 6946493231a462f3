"""Measurement against a calibrated bank: new models placed on a frozen run's scale.

A fitted run is a *bank*: its posterior draws of the item parameters (and of the bank
models' abilities) stay fixed, and new models are measured against them without a refit.

* :mod:`~bayes_dualeval.measure.bank`: a run folder read as a :class:`Bank` (item draws,
  the reward normalisation and pair thresholds the fit used), and new responses aligned
  with it (:func:`~bayes_dualeval.measure.responses.responses`);
* :mod:`~bayes_dualeval.measure.grid`: each new model's ability posterior on a grid, per
  bank draw (one dimension: exact, no MCMC), and draws from it;
* :mod:`~bayes_dualeval.measure.score`: :func:`~bayes_dualeval.measure.score.score`, the
  scores, predicted accuracies and person fit of new models;
* :mod:`~bayes_dualeval.measure.output`: the score folder (tables, summary, report).
"""
