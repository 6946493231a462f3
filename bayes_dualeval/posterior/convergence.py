"""The convergence rule: its limits, once, and the typed result of checking a posterior.

:data:`LIMITS` (a :class:`ConvergenceLimits`) holds the thresholds of Vehtari et al.
(2021) and Betancourt (2016) that every reader applies: the check itself
(:func:`bayes_dualeval.posterior.diagnostics.convergence`), the comparison of runs, the
report. :class:`Convergence` is the check's result; :meth:`Convergence.to_dict` is the
``convergence`` entry of ``diagnostics.json`` and :meth:`Convergence.from_dict` reads it
back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ConvergenceLimits:
    """The limits of the convergence rule, in one place.

    Attributes
    ----------
    rhat_max : float
        Largest R-hat allowed on any parameter.
    ess_min : int
        Smallest bulk and tail effective sample size allowed on any parameter.
    divergences_max : int
        Most divergent transitions allowed (none).
    ebfmi_min : float
        E-BFMI below this in any chain means the momentum resampling cannot move the energy
        enough (heavy tails or a funnel); Stan warns at the same level.
    treedepth_share_max : float
        Share of transitions at the tree depth cap above which trajectories are being cut
        short: an efficiency note, not a failure.
    """

    rhat_max: float = 1.01
    ess_min: int = 400
    divergences_max: int = 0
    ebfmi_min: float = 0.3
    treedepth_share_max: float = 0.05


#: The limits every check of this package applies.
LIMITS = ConvergenceLimits()


@dataclass(frozen=True)
class ParameterCheck:
    """R-hat and bulk and tail ESS of one parameter that fails a limit.

    Attributes
    ----------
    parameter : str
        ``name[label]`` as in :func:`per_parameter`.
    rhat, ess_bulk, ess_tail : float or None
        Rounded to 4, 1 and 1 digits; None where not finite.
    """

    parameter: str
    rhat: float | None = None
    ess_bulk: float | None = None
    ess_tail: float | None = None

    def to_dict(self) -> dict:
        """``parameter``, ``rhat``, ``ess_bulk`` and ``ess_tail``."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Convergence:
    """The convergence check of a run: its figures, verdict, problems and notes.

    The defaults are a run the check does not apply to (SVI, MAP, too few draws).

    Attributes
    ----------
    max_rhat : float or None
        Worst R-hat over every scalar (None with one chain or constant draws).
    min_ess_bulk, min_ess_tail : float or None
        Lowest bulk and tail ESS over every scalar.
    divergences : int or None
        Divergent transitions over all chains.
    ebfmi : tuple of float or None
        E-BFMI per chain (None without energies).
    ebfmi_min : float or None
        The lowest of ``ebfmi``.
    treedepth_hit_share : float or None
        Share of transitions at the tree depth cap (None without a known cap).
    n_parameters : int or None
        Scalars checked.
    worst : tuple of ParameterCheck
        The parameters that fail, worst first.
    converged : bool or None
        None when the sampler gives no such diagnostics.
    problems : tuple of str
        Sentences saying what failed and what to try; the run converged when there are
        none.
    notes : tuple of str
        Efficiency remarks that do not make the draws wrong (such as trajectories cut at
        the depth cap).
    divergent_site : mapping or None
        :func:`divergence_site` (``parameter`` and ``sd``), None without divergences.
    """

    max_rhat: float | None = None
    min_ess_bulk: float | None = None
    min_ess_tail: float | None = None
    divergences: int | None = None
    ebfmi: tuple[float, ...] | None = None
    ebfmi_min: float | None = None
    treedepth_hit_share: float | None = None
    n_parameters: int | None = None
    worst: tuple[ParameterCheck, ...] = ()
    converged: bool | None = None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    divergent_site: Mapping | None = None

    #: The figures ``diagnostics.json`` also lists at its top level, in this order.
    HEADLINE = (
        "max_rhat",
        "min_ess_bulk",
        "min_ess_tail",
        "divergences",
        "ebfmi_min",
        "treedepth_hit_share",
    )

    @property
    def min_ess(self) -> float | None:
        """The lower of the bulk and tail ESS (None when neither is known)."""
        ess = [v for v in (self.min_ess_bulk, self.min_ess_tail) if v is not None]
        return min(ess, default=None)

    def to_dict(self) -> dict:
        """The ``convergence`` entry of ``diagnostics.json``: every field, as plain lists.

        Returns
        -------
        dict
            ``max_rhat``, ``min_ess_bulk``, ``min_ess_tail``, ``divergences``, ``ebfmi``,
            ``ebfmi_min``, ``treedepth_hit_share``, ``n_parameters``, ``worst`` (a list of
            dicts), ``converged``, ``problems``, ``notes`` and ``divergent_site``.
        """
        return {
            "max_rhat": self.max_rhat,
            "min_ess_bulk": self.min_ess_bulk,
            "min_ess_tail": self.min_ess_tail,
            "divergences": self.divergences,
            "ebfmi": None if self.ebfmi is None else list(self.ebfmi),
            "ebfmi_min": self.ebfmi_min,
            "treedepth_hit_share": self.treedepth_hit_share,
            "n_parameters": self.n_parameters,
            "worst": [w.to_dict() for w in self.worst],
            "converged": self.converged,
            "problems": list(self.problems),
            "notes": list(self.notes),
            "divergent_site": None if self.divergent_site is None else dict(self.divergent_site),
        }

    def headline(self) -> dict:
        """The figures of :attr:`HEADLINE`, by name (the top of ``diagnostics.json``)."""
        return {name: getattr(self, name) for name in self.HEADLINE}

    @classmethod
    def from_dict(cls, data: Mapping) -> Convergence:
        """Read back :meth:`to_dict` (keys it lacks keep their defaults; others are ignored).

        Parameters
        ----------
        data : mapping
            The ``convergence`` entry of a run's ``diagnostics.json``.

        Returns
        -------
        Convergence
        """
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if values.get("ebfmi") is not None:
            values["ebfmi"] = tuple(values["ebfmi"])
        for name in ("problems", "notes"):
            if name in values:
                values[name] = tuple(values[name])
        if "worst" in values:
            values["worst"] = tuple(ParameterCheck(**w) for w in values["worst"])
        return cls(**values)
