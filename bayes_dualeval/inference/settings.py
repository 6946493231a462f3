"""Settings of an inference run: :class:`SamplerSettings`, declared once.

Each field carries its command-line description in ``metadata`` (see
:mod:`bayes_dualeval.cli.options`): ``help``, and where they apply ``choices``, ``min`` /
``max`` (with ``min_open`` / ``max_open`` for strict bounds) and ``section``. The same
metadata validates the settings, so a default, a range or a help line is written in one
place only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import bounds_text, check_fields, setting

SAMPLERS = ("nuts", "svi", "map")
GUIDES = ("normal", "lowrank")
CENTRINGS = ("auto", "none", "all")

#: Above this many static cells (or decisive arena pairs), ``subsample = "auto"`` makes SVI
#: read random batches of them: a full pass over ten million cells costs about 0.2 s per
#: step on two CPU cores, so the thousands of steps SVI takes would run for many minutes.
AUTO_TERMS = 2_000_000
#: Terms per random batch under ``subsample = "auto"``.
AUTO_BATCH = 262_144

_NUTS = "NUTS"
_SVI = "SVI and MAP"


def _setting(default, help: str, section: str | None = None, *, choices=None, **bounds):
    """A field with its command-line metadata: help line, heading, choices and bounds."""
    meta = {"help": help, **bounds}
    if section is not None:
        meta["section"] = section
    if choices is not None:
        meta["choices"] = choices
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class SamplerSettings:
    """Settings of the inference run (everything but the model).

    Attributes
    ----------
    sampler : {"nuts", "svi", "map"}
    chains, warmup, draws : int
        NUTS chains, warm-up and kept iterations per chain; SVI keeps ``draws`` draws
        from the fitted guide (as one chain).
    seed : int
        Seed of the single PRNG key split once per task.
    target_accept : float
        NUTS target acceptance probability.
    max_tree_depth : int
        NUTS maximum tree depth: at most ``2**depth - 1`` leapfrog steps per draw (the
        U-turn rule usually stops earlier; the diagnostics report how often the cap is
        hit).
    guide : {"normal", "lowrank"}
        SVI autoguide: mean-field normal or low-rank multivariate normal.
    svi_steps : int
        Maximum number of SVI optimisation steps.
    svi_lr : float
        Adam step size for SVI.
    svi_rtol : float
        SVI stops when the mean loss of the last window changed by less than the noise of
        the window or by less than ``svi_rtol`` relative to its size.
    map_steps : int
        Maximum number of 250-step optimisation windows for MAP.
    extend : int
        NUTS: when the draws fail the convergence check, up to this many more rounds of
        ``draws`` draws per chain continue the chains (0: never).
    centring : {"auto", "none", "all"}
        NUTS: how centred each item's coordinates are (``auto``: weighed per item by how
        much its data say, :func:`bayes_dualeval.model.pilot.centring`; ``none`` or
        ``all``: every item non-centred or centred); SVI and MAP always use non-centred ones.
    subsample : str
        SVI: ``"auto"`` (random batches of :data:`AUTO_BATCH` static cells and of as many
        decisive pairs, each kind above :data:`AUTO_TERMS` terms), ``"none"`` (every term,
        every step) or a number of terms per batch; see :meth:`batch_size` and
        :mod:`bayes_dualeval.model.subsample`.
    shards : int
        SVI and MAP: the devices the static cells and decisive pairs are split across
        (:mod:`bayes_dualeval.inference.sharding`); NUTS runs its chains one per device
        instead and refuses more than 1.
    progress : bool
        Show a progress bar (NUTS and SVI).
    """

    sampler: str = _setting(
        "nuts", "Full posterior (nuts), variational (svi) or point fit (map).", choices=SAMPLERS
    )
    chains: int = _setting(4, "NUTS chains.", min=1)
    warmup: int = _setting(400, "Warm-up iterations per chain.", min=0)
    draws: int = _setting(1000, "Kept draws per chain (SVI: draws from the fitted guide).", min=1)
    seed: int = _setting(0, "Seed of the one PRNG key of the run.")
    target_accept: float = _setting(
        0.8,
        "NUTS target acceptance probability.",
        _NUTS,
        min=0,
        max=1,
        min_open=True,
        max_open=True,
    )
    max_tree_depth: int = _setting(
        8,
        "NUTS trajectory cap: at most 2**depth - 1 leapfrog steps per draw.",
        _NUTS,
        min=1,
        max=15,
    )
    guide: str = _setting(
        "normal", "SVI autoguide: mean-field or low-rank normal.", _SVI, choices=GUIDES
    )
    svi_steps: int = _setting(
        20000, "Most SVI steps (stops earlier when the ELBO settles).", _SVI, min=1
    )
    svi_lr: float = _setting(0.01, "Adam step size of SVI.", _SVI, min=0, min_open=True)
    svi_rtol: float = _setting(
        1e-4,
        "SVI stops when the windowed mean loss changes by less than this fraction (or less "
        "than its noise).",
        _SVI,
        min=0,
    )
    subsample: str = _setting(
        "auto",
        "SVI: static cells and arena pairs per step, each (auto: all up to "
        f"{AUTO_TERMS:,}, else random batches of {AUTO_BATCH:,}; none: all; or a number).",
        _SVI,
    )
    shards: int = _setting(
        1,
        "SVI and MAP: split the static cells and arena pairs across this many devices (JAX "
        "sharding; on a CPU the command line makes as many host devices).",
        _SVI,
        min=1,
    )
    map_steps: int = _setting(80, "Most 250-step optimisation windows of MAP.", _SVI, min=1)
    extend: int = _setting(
        2,
        "NUTS: while the convergence check fails, up to this many more rounds of "
        f"{setting('draws')}.",
        _NUTS,
        min=0,
    )
    centring: str = _setting(
        "auto",
        "NUTS: how centred the items' coordinates are (auto: as far as each item's data speak).",
        _NUTS,
        choices=CENTRINGS,
    )
    progress: bool = False

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "subsample", _subsample_text(self.subsample))

    def batch_size(self, n_terms: int) -> int:
        """Likelihood terms of one kind per SVI step: 0 for all ``n_terms`` of them.

        ``subsample`` ``"none"``: all; a number: that many (all when there are fewer);
        ``"auto"``: all up to :data:`AUTO_TERMS`, else :data:`AUTO_BATCH`.
        """
        if self.subsample == "none":
            return 0
        size = AUTO_BATCH if self.subsample == "auto" else int(self.subsample)
        limit = AUTO_TERMS if self.subsample == "auto" else size
        return size if n_terms > limit else 0

    def to_dict(self) -> dict:
        """The settings as a plain dict."""
        return dataclasses.asdict(self)


def batches_read(info: dict) -> list[str]:
    """What each step of a run read in random batches, in words (empty: every term).

    Parameters
    ----------
    info : dict
        The run's ``sampler_info`` (``static_batch``, ``pair_batch``).
    """
    kinds = (("static_batch", "static cells"), ("pair_batch", "arena pairs"))
    return [f"{info[key]:,} {what}" for key, what in kinds if info.get(key)]


def _subsample_text(value) -> str:
    """``subsample`` as text (``auto``, ``none`` or a positive whole number), or ConfigError."""
    text = str(value).strip().lower()
    if text in ("auto", "none") or (text.isdigit() and int(text) > 0):
        return str(int(text)) if text.isdigit() else text
    raise ConfigError(f"subsample must be auto, none or a positive whole number; got {value!r}")


__all__ = ["SamplerSettings", "batches_read", "bounds_text", "check_fields"]
