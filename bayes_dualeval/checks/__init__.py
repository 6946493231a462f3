"""What a run computes about its fit: posterior predictive checks, item and cell audits.

Public functions: :func:`posterior_predictive` (a :class:`PPC`), :func:`anomalies` (the
cell table), :func:`item_table`, :func:`benchmark_audit` (the model x benchmark audit,
the run's ``contamination.csv``), :func:`benchmarks`, :func:`model_fit_table`,
:func:`dependence_table`, :func:`calibration_table`, :func:`calibration_error` and
:func:`by_qvalues` (with :func:`bh_qvalues`); :class:`CheckOptions` is what they share.
The modules, in the order a check runs:

* :mod:`~bayes_dualeval.checks.fitted`: the run's draws, data and recorded specification;
* :mod:`~bayes_dualeval.checks.options`: the options every check shares;
* :mod:`~bayes_dualeval.checks.budget`: how many draws a pass affords, and its chunks;
* :mod:`~bayes_dualeval.checks.static`, :mod:`~bayes_dualeval.checks.arena`,
  :mod:`~bayes_dualeval.checks.reward`: one pass over each kind of data;
* :mod:`~bayes_dualeval.checks.passes`: each pass made once and shared;
* :mod:`~bayes_dualeval.checks.cells`, :mod:`~bayes_dualeval.checks.fdr`: the cell table
  and its q-values; :mod:`~bayes_dualeval.checks.items` (with
  :mod:`~bayes_dualeval.checks.keys`): the items table;
  :mod:`~bayes_dualeval.checks.calibration`; :mod:`~bayes_dualeval.checks.ppc`: the
  public functions;
* :mod:`~bayes_dualeval.checks.benchmark_audit` (with
  :mod:`~bayes_dualeval.checks.arena_blocks`): the model x benchmark audit;
* the psychometric audits: :mod:`~bayes_dualeval.checks.saturation` (each benchmark's
  test information: :func:`benchmarks`), :mod:`~bayes_dualeval.checks.residuals` (one pass
  for infit, outfit and person fit) with :mod:`~bayes_dualeval.checks.item_fit` (the
  items table's columns), :mod:`~bayes_dualeval.checks.model_fit`
  (:func:`model_fit_table`, below chance) and :mod:`~bayes_dualeval.checks.person_fit`
  (the ``l_z*`` formula), :mod:`~bayes_dualeval.checks.dependence` (Yen's Q3:
  :func:`dependence_table`).

Planted-fault studies and reference estimators are not here: they are in
:mod:`bayes_dualeval.validation`, which no run imports.

The constants are defined in those modules (patch them there, e.g.
``bayes_dualeval.checks.budget.CHECK_ELEMENTS``) and named here for reading.
"""

from bayes_dualeval.checks.arena import MIN_DISPERSION
from bayes_dualeval.checks.benchmark_audit import benchmark_audit
from bayes_dualeval.checks.budget import (
    CHECK_ELEMENTS,
    CHUNK_ELEMENTS,
    MIN_CHECK_DRAWS,
    MIN_REPLICATES,
    PAIR_CHUNK_DRAWS,
    STORE_ELEMENTS,
)
from bayes_dualeval.checks.calibration import (
    CALIBRATION_BINS,
    calibration_error,
    calibration_table,
)
from bayes_dualeval.checks.cells import FLAG_Q
from bayes_dualeval.checks.dependence import dependence_table
from bayes_dualeval.checks.fdr import bh_qvalues, by_qvalues
from bayes_dualeval.checks.items import LOW_DISCRIMINATION, MISFIT_PPP, item_table
from bayes_dualeval.checks.model_fit import model_fit_table
from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.ppc import PPC, anomalies, posterior_predictive
from bayes_dualeval.checks.saturation import benchmarks

__all__ = [
    "CALIBRATION_BINS",
    "CHECK_ELEMENTS",
    "CHUNK_ELEMENTS",
    "CheckOptions",
    "FLAG_Q",
    "LOW_DISCRIMINATION",
    "MIN_CHECK_DRAWS",
    "MIN_DISPERSION",
    "MIN_REPLICATES",
    "MISFIT_PPP",
    "PAIR_CHUNK_DRAWS",
    "PPC",
    "STORE_ELEMENTS",
    "anomalies",
    "benchmark_audit",
    "benchmarks",
    "bh_qvalues",
    "by_qvalues",
    "calibration_error",
    "calibration_table",
    "dependence_table",
    "item_table",
    "model_fit_table",
    "posterior_predictive",
]
