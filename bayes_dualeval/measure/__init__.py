"""Measurement against a calibrated bank: new models and new questions on a frozen run's scale.

A fitted run is a *bank*: its posterior draws of the item parameters (and of the bank
models' abilities) stay fixed, and new models are measured against them without a refit;
new questions the bank's models answered are measured against the abilities.

* :mod:`~bayes_dualeval.measure.bank`: a run folder read as a :class:`Bank` (item draws,
  the reward normalisation and pair thresholds the fit used), and new responses aligned
  with it (:func:`~bayes_dualeval.measure.responses.responses`);
* :mod:`~bayes_dualeval.measure.grid`: each new model's ability posterior on a grid, per
  bank draw (one dimension: exact, no MCMC), and draws from it;
* :mod:`~bayes_dualeval.measure.score`: :func:`~bayes_dualeval.measure.score.score`, the
  scores, predicted accuracies and person fit of new models;
* :mod:`~bayes_dualeval.measure.calibrate`: :func:`~bayes_dualeval.measure.calibrate.calibrate`,
  new static questions' ``b`` and ``a`` (each question's posterior on a grid per bank draw
  of the abilities, :mod:`~bayes_dualeval.measure.item_grid`; the bank models' answers read
  by :mod:`~bayes_dualeval.measure.new_items`) and the drift of common ones
  (:mod:`~bayes_dualeval.measure.drift`);
* :mod:`~bayes_dualeval.measure.output`: the score and calibration folders (tables,
  summary, report).
"""
