"""The rule that a bank is a converged NUTS posterior, and why a run is not one.

``score``, ``compress``, ``adaptive`` and ``predict`` measure against a run's posterior
draws; a run that is not a converged NUTS posterior would make their intervals overstate
what is known. :func:`check_posterior` refuses it unless ``allow_approximate``, and its
reason (:func:`approximation`) then goes into every output.
"""

from __future__ import annotations

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.fields import setting


def approximation(diagnostics: dict) -> str:
    """Why a run's posterior is not one to measure against, or ``""`` when it is.

    A bank must be a NUTS posterior that passed the run's convergence check: SVI's draws
    come from a variational approximation (their intervals covered 23-65% of true values
    on simulations, docs/validation.md section 10), MAP holds a point estimate, and an
    unconverged NUTS run's intervals are not yet the posterior's.

    Parameters
    ----------
    diagnostics : dict
        The run's ``diagnostics.json`` (``sampler`` and ``convergence``).
    """
    sampler = str(diagnostics.get("sampler", {}).get("sampler", "unknown"))
    if sampler != "nuts":
        what = {"map": "a point estimate", "svi": "a variational approximation"}
        return f"fitted with {setting('sampler', sampler)}, {what.get(sampler, 'not NUTS')}"
    conv = diagnostics.get("convergence", {})
    if conv.get("converged") is not True:
        first = (conv.get("problems") or ["no convergence check recorded"])[0]
        return f"a NUTS fit that failed the convergence check: {first}"
    return ""


def check_posterior(where, diagnostics: dict, allow_approximate: bool = False) -> str:
    """Refuse a bank that is not a converged NUTS posterior, unless ``allow_approximate``.

    Returns
    -------
    str
        :func:`approximation`'s reason (``""`` for a converged NUTS posterior).

    Raises
    ------
    InputError
        The reason, and how to proceed, when ``allow_approximate`` is false.
    """
    reason = approximation(diagnostics)
    if reason and not allow_approximate:
        raise InputError(
            f"bank {where} is not a converged NUTS posterior, so its intervals would overstate "
            f"what is known ({reason}); refit it with {setting('sampler', 'nuts')} until it "
            f"converges, or use it anyway with {setting('allow_approximate', True)} (every "
            "output then says so)"
        )
    return reason
