"""Validation studies: planted faults and reference estimators, kept out of a run's path.

A run never imports this package; the tests and the studies of ``scripts/`` do.

* :mod:`~bayes_dualeval.validation.audit`: ranking metrics (AUROC, AUPRC, precision at k),
  the order of an anomaly table as a score, the planting of arena and static faults
  (reversed answer keys too: ``reverse_keys``), and the simple baselines a model must beat;
* :mod:`~bayes_dualeval.validation.contamination`: the planted-contamination study
  (simulate, flip unlikely failures to successes, fit, score the anomaly table);
* :mod:`~bayes_dualeval.validation.reference`: a classical 2PL estimator to compare with,
  and the classic calibration data it is compared on (``calibration_data``);
* :mod:`~bayes_dualeval.validation.compilations`: where the test suite's XLA compilation
  goes (the records of ``scripts/tools/suite_compilations.py``);
* :mod:`~bayes_dualeval.validation.psychometrics`: planted truths of the psychometric
  audits (saturated benchmarks, guessing floors, inverted models, testlets).
"""
