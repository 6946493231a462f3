"""Model configuration and the named model specifications in ``models/``.

A specification is a small TOML file: the likelihood terms and the priors, as data. The
files live in the repository's top-level ``models/`` folder and are installed with the
package (as ``bayes_dualeval/_models``), so ``--model NAME`` works from a checkout and from
an installed wheel alike. Command-line options override single fields of the chosen spec.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import check_fields
from bayes_dualeval.data.distill import DEFAULT_BB_RATIO, DEFAULT_TIE_RATIO
from bayes_dualeval.model import links

MODES = ("both", "static", "arena", "bt")
ITEM_PRIORS = ("hierarchical", "independent")
ARENA_LIKELIHOODS = ("pairs", "pairs-full", "reward")
ARENA_LEVELS = ("mean", "none")
ARENA_WEIGHTS = ("fixed", "calibrated")
ABILITIES = ("single", "domain")
#: Most ability dimensions a fit may have (each adds models + items - 1 parameters).
MAX_DIMS = 5
DEFAULT_MODEL = "dualeval-2pl"

# allowed ranges of settings, as field metadata (read by the command line)
_POSITIVE = {"min": 0, "min_open": True}
_NON_NEGATIVE = {"min": 0}
_QUANTILE = {"min": 0, "max": 1, "max_open": True}
_UNIT = {"min": 0, "max": 1, "min_open": True, "max_open": True}


def _likelihood(default, help: str, bounds: dict | None = None, *, choices=None):
    """A likelihood setting: its default, and its help line, range and choices as metadata."""
    return _setting("Likelihood", default, help, bounds, choices)


def _prior(default, help: str, bounds: dict | None = None, *, choices=None):
    """A prior setting: its default, and its help line, range and choices as metadata."""
    return _setting("Priors", default, help, bounds, choices)


def _setting(section: str, default, help: str, bounds: dict | None, choices):
    # the section names the table of a specification file the setting belongs in
    meta = {"help": help, "section": section, **(bounds or {})}
    if choices is not None:
        meta["choices"] = choices
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ModelConfig:
    """Everything that defines the statistical model (not the sampler).

    Attributes
    ----------
    name : str
        Name of the specification this configuration came from.
    mode : {"both", "static", "arena", "bt"}
        Which data enter: joint (every kind present), static only, arena only, or a
        Bradley-Terry baseline on the arena soft targets.
    irt : {"1pl", "2pl", "3pl", "4pl"}
        The item response function (:mod:`bayes_dualeval.model.links`): Rasch (all
        ``a_q = 1``), two-parameter IRT (the default), 2PL with a guessing floor ``c_q`` on
        static questions (3PL), or also an upper asymptote ``d_q`` (4PL).
    item_prior : {"hierarchical", "independent"}
        Pooled item priors with a learned location and scale per (kind, source), or fixed
        weakly-informative priors.
    arena_likelihood : {"pairs", "pairs-full", "reward"}
        ``pairs``: soft-label pair terms weighted ``2 / n_q`` so a prompt answered by
        ``n_q`` models counts as ``n_q - 1`` contrasts; ``pairs-full``: every pair at weight
        one (DualEval's loss, overcounts evidence); ``reward``: a Gaussian likelihood of the
        normalised rewards, ``z_iq ~ Normal(c_q + gamma p_iq, sigma)`` with ``c_q``
        integrated out.
    arena_level : {"mean", "none"}
        How an arena prompt's level (its difficulty) is seen. ``mean``: each prompt's mean
        normalised reward follows ``Normal(c_s + gamma (mean_i p_iq - 1/2), se_q)`` per source
        ``s`` (``se_q`` the standard error of the mean from the within-prompt noise), so a
        prompt on which every model scores high is easy: this assumes the reward model is
        equally lenient on every prompt. ``none``: only
        within-prompt contrasts enter (DualEval); arena difficulties are then not
        identified and are marked so.
    dif : str
        Differential item functioning (:mod:`bayes_dualeval.model.dif`): the per-model
        column (``family``, or a column of the models' metadata such as ``open`` or
        ``released_after``) whose groups may shift each static item's log-odds; ``""``
        (default) for none.
    lambda_static, lambda_arena, lambda_bb : float
        Likelihood powers of the static, arena-pair and both-bad terms.
    arena_weight : {"fixed", "calibrated"}
        ``fixed``: the arena term's weight is ``lambda_arena``. ``calibrated``: it is
        ``lambda_arena`` times a factor the fit computes once from the data, a sandwich
        (magnitude-adjusted) weight of the pairs pseudo-likelihood with prompts as the
        independent units (:mod:`bayes_dualeval.model.arena_weight`); it applies to the
        pairs likelihoods only (the factor is 1 under ``reward`` and ``bt``).
    arena_weight_factor : float or None
        Under ``calibrated``: the factor the fit computed (None until then). Set by the fit
        and recorded with the specification, so every reader of a run applies the same
        weight; not a setting a user chooses.
    bb_ratio, tie_ratio : float
        Distillation quantiles (see :func:`bayes_dualeval.data.distill.distill`).
    theta_scale : float
        Prior standard deviation of abilities: ``theta ~ Normal(0, theta_scale)``.
    gamma_loc, gamma_scale : float
        ``gamma ~ LogNormal(gamma_loc, gamma_scale)``; the default location is ``log 4``.
    b_loc_scale, b_scale_scale : float
        Hierarchical prior: ``mu_b ~ Normal(0, b_loc_scale)``,
        ``sigma_b ~ HalfNormal(b_scale_scale)``.
    loga_loc_scale, loga_scale_scale : float
        Hierarchical prior: ``mu_log_a ~ Normal(0, loga_loc_scale)``,
        ``sigma_log_a ~ LogNormal(log(loga_scale_scale), 0.5)`` (zero-avoiding: items do
        differ in discrimination, and a scale pressed against zero makes a funnel that
        NUTS cannot cross).
    b_scale, loga_scale : float
        Independent prior: ``b ~ Normal(0, b_scale)``, ``log a ~ Normal(0, loga_scale)``.
    sigma_scale : float
        Reward likelihood: ``sigma ~ HalfNormal(sigma_scale)``.
    level_loc_scale : float
        Arena level term: ``c_s ~ Normal(0, level_loc_scale)``.
    guess_mean, guess_strength, guess_spread : float
        3PL/4PL: the mean guessing level of an item group ``mu_c ~ Beta(m k, (1 - m) k)``
        with ``m = guess_mean`` (0.25 suits four-option multiple choice) and ``k =
        guess_strength``; each floor ``logit c_q ~ Normal(logit mu_c, guess_spread)``
        (hierarchical item prior; independent: ``c_q ~ Beta(m k, (1 - m) k)``).
    ceiling_mean, ceiling_strength, ceiling_spread : float
        4PL: the same for the upper asymptote ``d_q`` (around ``mu_d``).
    abilities : {"single", "domain"}
        One ability per model, or (``domain``) an overall ability plus a deviation per item
        domain: ``theta_{i,d} = theta_i + delta_{i,d}``, the deviations of domain ``d``
        summing to zero over models, with prior sd ``tau_d`` (see
        :func:`bayes_dualeval.model.ability_priors.domain_abilities`).
    domain_scale : float
        ``domain`` abilities: ``tau_d ~ LogNormal(log(domain_scale), 0.5)``, so
        ``domain_scale`` is the prior median of a domain's spread (zero-avoiding).
    dims : int
        Ability dimensions ``K``: 1 (one ability per model, or per domain), or a
        compensatory multidimensional 2PL with ``K`` abilities per model and each item's
        loadings on them (see :func:`bayes_dualeval.model.ability_priors.dimension_abilities`).
    loading_scale : float
        ``dims > 1``: prior median of the spread of items' loading logits around their
        domain's profile, ``sigma_loading ~ LogNormal(log(loading_scale), 0.5)``.
    feature_scale, feature_loga_scale : float
        With item features: HalfNormal scales of ``tau_beta_b`` and ``tau_beta_log_a``,
        the standard deviations over items of the parts of ``b`` and ``log a`` the
        features explain (see :func:`bayes_dualeval.model.priors.feature_shift`).
    description : str
        One line on what the specification is for. A label, not part of the model:
        configurations that differ only in it are equal.
    """

    name: str = DEFAULT_MODEL
    mode: str = _likelihood(
        "both", "Data that enter: joint, static only, arena only, or Bradley-Terry.", choices=MODES
    )
    irt: str = _likelihood(
        "2pl",
        "Item response function: Rasch (a_q = 1), 2PL, 2PL with a guessing floor c_q (3PL), "
        "or also an upper asymptote d_q (4PL).",
        choices=links.LINKS,
    )
    item_prior: str = _prior(
        "hierarchical",
        "Pooled per-source item priors, or fixed weakly-informative ones.",
        choices=ITEM_PRIORS,
    )
    arena_likelihood: str = _likelihood(
        "pairs",
        "Arena term: weighted pairs (2/n), all pairs, or rewards.",
        choices=ARENA_LIKELIHOODS,
    )
    arena_level: str = _likelihood(
        "mean",
        "How a prompt's difficulty is seen: its mean reward (the reward model is equally "
        "lenient on every prompt), or not at all (leniency varies; arena b not identified).",
        choices=ARENA_LEVELS,
    )
    dif: str = _likelihood(
        "",
        "Differential item functioning: a per-model column (family, or one of the families "
        "file's columns) whose groups shift each static item's log-odds (dif.csv).",
    )
    lambda_static: float = _likelihood(1.0, "Likelihood power of static labels.", _NON_NEGATIVE)
    lambda_arena: float = _likelihood(1.0, "Likelihood power of arena pairs.", _NON_NEGATIVE)
    lambda_bb: float = _likelihood(0.0, "Weight of the both-bad anchoring term.", _NON_NEGATIVE)
    arena_weight: str = _likelihood(
        "fixed",
        "Weight of the arena pairs: lambda_arena, or lambda_arena times a factor calibrated "
        "from the data (a sandwich weight with prompts as the independent units).",
        choices=ARENA_WEIGHTS,
    )
    bb_ratio: float = _likelihood(
        DEFAULT_BB_RATIO,
        "Quantile of pairwise max(z) at or below which a pair is both-bad (0 = off).",
        _QUANTILE,
    )
    tie_ratio: float = _likelihood(
        DEFAULT_TIE_RATIO,
        "Quantile of pairwise |dz| at or below which a pair is a tie (0 = off).",
        _QUANTILE,
    )
    theta_scale: float = _prior(1.0, "Prior sd of abilities.", _POSITIVE)
    gamma_loc: float = _prior(math.log(4.0), "Log-scale location of gamma's LogNormal prior.")
    gamma_scale: float = _prior(0.5, "Log-scale sd of gamma's LogNormal prior.", _POSITIVE)
    b_loc_scale: float = _prior(2.0, "Hierarchical: prior sd of mu_b per source.", _POSITIVE)
    b_scale_scale: float = _prior(1.5, "Hierarchical: HalfNormal scale of sigma_b.", _POSITIVE)
    loga_loc_scale: float = _prior(0.5, "Hierarchical: prior sd of mu_log_a.", _POSITIVE)
    loga_scale_scale: float = _prior(0.3, "Hierarchical: prior median of sigma_log_a.", _POSITIVE)
    b_scale: float = _prior(3.0, "Independent prior sd of difficulties.", _POSITIVE)
    loga_scale: float = _prior(1.0, "Independent prior sd of log discriminations.", _POSITIVE)
    sigma_scale: float = _prior(1.0, "Reward likelihood: HalfNormal scale of sigma.", _POSITIVE)
    level_loc_scale: float = _prior(1.0, "Arena level term: prior sd of c_s.", _POSITIVE)
    guess_mean: float = _prior(0.25, "3PL/4PL: prior mean of the guessing floor c_q.", _UNIT)
    guess_strength: float = _prior(
        20.0, "3PL/4PL: Beta prior strength of the mean guessing level.", _POSITIVE
    )
    guess_spread: float = _prior(
        0.3, "3PL/4PL, hierarchical: logit-scale sd of c_q around its level.", _POSITIVE
    )
    ceiling_mean: float = _prior(0.95, "4PL: prior mean of the upper asymptote d_q.", _UNIT)
    ceiling_strength: float = _prior(
        20.0, "4PL: Beta prior strength of the mean upper asymptote.", _POSITIVE
    )
    ceiling_spread: float = _prior(
        0.3, "4PL, hierarchical: logit-scale sd of d_q around its level.", _POSITIVE
    )
    abilities: str = _prior(
        "single",
        "One ability per model, or an overall ability plus a deviation per item domain.",
        choices=ABILITIES,
    )
    domain_scale: float = _prior(
        0.5, "Domain abilities: prior median of each domain's spread tau_d.", _POSITIVE
    )
    dims: int = _prior(
        1,
        "Ability dimensions K: above 1, K abilities per model and each item's loadings on "
        "them (a multidimensional 2PL).",
        {"min": 1, "max": MAX_DIMS},
    )
    loading_scale: float = _prior(
        1.0,
        "Dimensions: prior median of the spread of items' loading logits around their "
        "domain's profile.",
        _POSITIVE,
    )
    feature_scale: float = _prior(
        1.0, "Item features: HalfNormal scale of the sd of b they explain.", _POSITIVE
    )
    feature_loga_scale: float = _prior(
        0.3, "Item features: HalfNormal scale of the sd of log a they explain.", _POSITIVE
    )
    # a label, not part of the model: left out of equality and hashing, so that compiled
    # programs (ModelConfig is a static argument of every one) are shared by specifications
    # that differ only in it (ModelConfig() and the named default, say)
    description: str = field(default="", compare=False)
    arena_weight_factor: float | None = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if f.type == "float":
                value = getattr(self, f.name)
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ConfigError(f"{f.name} must be a number, got {value!r}")
                if not math.isfinite(value):
                    raise ConfigError(f"{f.name} must be finite, got {value!r}")
        if isinstance(self.dims, bool) or not isinstance(self.dims, int):
            raise ConfigError(f"dims must be a whole number, got {self.dims!r}")
        check_fields(self)
        factor = self.arena_weight_factor
        if factor is not None and (
            isinstance(factor, bool)
            or not isinstance(factor, (int, float))
            or not math.isfinite(factor)
            or factor <= 0
        ):
            raise ConfigError(f"arena_weight_factor must be a positive number, got {factor!r}")
        by_domain, by_dims = self.abilities == "domain", self.dims > 1
        if (by_domain or by_dims) and self.mode == "bt":
            richer = "abilities 'domain'" if by_domain else f"dims {self.dims}"
            raise ConfigError(
                f"{richer} needs item parameters, and mode 'bt' has none: "
                "use mode both, static or arena"
            )
        if by_domain and by_dims:
            raise ConfigError(
                "abilities 'domain' and dims above 1 are two different models of "
                "multidimensional ability: choose one"
            )

    def replace(self, **changes) -> ModelConfig:
        """A copy with some fields changed (``None`` values are ignored)."""
        changes = {k: v for k, v in changes.items() if v is not None}
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown model setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The configuration as a plain dict."""
        return dataclasses.asdict(self)

    @property
    def arena_levels_identified(self) -> bool:
        """Whether arena prompts' difficulties (and so their ICCs) are identified."""
        return self.mode != "bt" and self.arena_level != "none"


def models_dir() -> Path:
    """The folder holding the named specifications (installed copy, else the checkout's)."""
    installed = resources.files("bayes_dualeval") / "_models"
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parents[2] / "models"


def available_models() -> dict[str, str]:
    """Names of the bundled specifications and their one-line descriptions."""
    out = {}
    for path in sorted(models_dir().glob("*.toml")):
        out[path.stem] = load_spec(path).description
    return out


def _flatten(spec: dict, where: str) -> dict:
    flat = {}
    for key, value in spec.items():
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, dict):
                    raise ConfigError(f"{where}: [{key}.{k}] nests too deep")
                if k in flat:
                    raise ConfigError(f"{where}: {k!r} is set twice")
                flat[k] = v
        else:
            flat[key] = value
    return flat


def load_spec(name_or_path: str | Path) -> ModelConfig:
    """Load a named specification (``dualeval-2pl``) or a TOML file path.

    Parameters
    ----------
    name_or_path : str or Path
        A name from :func:`available_models`, or a path to a ``.toml`` file.

    Returns
    -------
    ModelConfig

    Raises
    ------
    ConfigError
        Unknown name, unreadable TOML, or an unknown or invalid setting (typos are errors,
        never silently ignored).
    """
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = models_dir() / f"{name_or_path}.toml"
        if not path.is_file():
            names = ", ".join(p.stem for p in sorted(models_dir().glob("*.toml")))
            raise ConfigError(f"unknown model {str(name_or_path)!r}; available: {names}")
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read model specification ({exc})") from None
    flat = _flatten(spec, str(path))
    flat.setdefault("name", path.stem)
    try:
        return ModelConfig().replace(**flat)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
