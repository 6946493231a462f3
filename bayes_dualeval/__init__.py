"""bayes-dualeval: Bayesian DualEval for ranking language models with honest uncertainty.

Static benchmark labels and arena reward scores are joined on one latent ability scale
(two-parameter IRT for static items, distilled soft pairwise preferences for arena prompts)
and fitted with NumPyro (NUTS, SVI or MAP).
"""

__version__ = "0.1.0"

from bayes_dualeval.core.errors import DataWarning, DualEvalError, InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import Pairs, distill
from bayes_dualeval.data.load import load

__all__ = [
    "Dataset",
    "DataWarning",
    "DualEvalError",
    "InputError",
    "Pairs",
    "distill",
    "load",
    "__version__",
]
