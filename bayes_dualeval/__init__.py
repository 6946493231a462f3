"""bayes-dualeval: Bayesian DualEval for ranking language models with honest uncertainty.

Static benchmark labels and arena reward scores are joined on one latent ability scale
(two-parameter IRT for static items, distilled soft pairwise preferences for arena prompts)
and fitted with NumPyro (NUTS, SVI or MAP).

>>> import bayes_dualeval as bd
>>> run = bd.fit("data/", sampler="map")  # doctest: +SKIP
>>> run.leaderboard()  # doctest: +SKIP

The verbs ``load``, ``fit``, ``open``, ``simulate`` and the ``Run`` they return come from
:mod:`bayes_dualeval.api`, imported on first use: ``import bayes_dualeval`` does not start
JAX.
"""

__version__ = "0.1.0"

from bayes_dualeval.core.errors import DataWarning, DualEvalError, InputError

#: The names of the Python API, imported from :mod:`bayes_dualeval.api` when first used.
_API = ("load", "fit", "open", "simulate", "sbc", "measure_sbc", "Run")
_DATA = {"Dataset": "dataset", "distill": "distill", "Pairs": "distill"}


def __getattr__(name: str):
    """The API's verbs and the data classes, imported on first use (PEP 562)."""
    import importlib

    if name in _API:
        return getattr(importlib.import_module("bayes_dualeval.api"), name)
    if name in _DATA:
        return getattr(importlib.import_module(f"bayes_dualeval.data.{_DATA[name]}"), name)
    raise AttributeError(f"module 'bayes_dualeval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, *_DATA])


__all__ = [
    "Dataset",
    "DataWarning",
    "DualEvalError",
    "InputError",
    "Pairs",
    "Run",
    "distill",
    "fit",
    "load",
    "measure_sbc",
    "open",
    "sbc",
    "simulate",
    "__version__",
]
