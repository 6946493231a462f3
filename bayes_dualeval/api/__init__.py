"""The Python API: the verbs of the command line, for a notebook.

``load`` reads data, ``fit`` fits and returns a :class:`Run`, ``open`` reads a saved run
folder into the same kind of object, ``simulate`` draws data with known truth. A ``Run``
has the run folder's tables, its posterior, diagnostics and figures, and the measurement
verbs (``score``, ``calibrate``, ``compress``, ``adaptive``, ``predict``, ``route``).
Every command of ``bayes-dualeval`` is a thin call of these functions.
"""

from bayes_dualeval.api.calibration import measure_sbc, sbc
from bayes_dualeval.api.fitting import Simulated, fit, load, open, settings, simulate
from bayes_dualeval.api.measures import (
    AdaptiveTest,
    ItemCalibration,
    Predictions,
    Scores,
    ShortForm,
)
from bayes_dualeval.api.run import DEFAULT_CI, Run
from bayes_dualeval.api.summary import Diagnostics, model_name

__all__ = [
    "DEFAULT_CI",
    "AdaptiveTest",
    "Diagnostics",
    "ItemCalibration",
    "Predictions",
    "Run",
    "Scores",
    "ShortForm",
    "Simulated",
    "fit",
    "load",
    "measure_sbc",
    "model_name",
    "open",
    "sbc",
    "settings",
    "simulate",
]
