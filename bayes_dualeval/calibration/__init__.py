"""Simulation-based calibration (SBC): do the fits recover the model's own prior draws.

* :mod:`~bayes_dualeval.calibration.generate`: the fixed design and the data drawn from the
  specification's prior predictive (the NumPyro model itself), or from a perturbed
  generator that is not the model;
* :mod:`~bayes_dualeval.calibration.quantities`: the ranked quantities and the ranks of the truth;
* :mod:`~bayes_dualeval.calibration.ecdf`: ECDF differences and their simultaneous bands
  (Säilynoja et al. 2022);
* :mod:`~bayes_dualeval.calibration.study`: :func:`sbc`, the loop and its result;
* :mod:`~bayes_dualeval.calibration.plot`: ``sbc.png``;
* :mod:`~bayes_dualeval.calibration.measure` and :mod:`~bayes_dualeval.calibration.conditional`:
  :func:`measure_sbc`, the conditional calibration of ``score`` and ``adaptive`` against a
  frozen bank (no refit).
"""

from bayes_dualeval.calibration.conditional import MeasureSBCResult, measure_sbc
from bayes_dualeval.calibration.ecdf import Band, band
from bayes_dualeval.calibration.generate import prior_predictive
from bayes_dualeval.calibration.study import SBCResult, sbc

__all__ = [
    "Band",
    "MeasureSBCResult",
    "SBCResult",
    "band",
    "measure_sbc",
    "prior_predictive",
    "sbc",
]
