"""The model object: one statistical model per specification.

A :class:`DualEvalModel` owns its :class:`~bayes_dualeval.model.config.ModelConfig` and
answers what the rest of the package asks of the model: its IRT link and the per-item
parameters the link has, which kinds of data it fits and with which arena term, and the
pointwise log likelihoods. Checks, the report, the
simulator and later features read the success probability from the
:mod:`~bayes_dualeval.model.links` it names, so the predictive formula lives in one place.

A fitted posterior records its specification (``posterior.attrs["model_config"]``);
:meth:`DualEvalModel.from_idata` reads it back, so nothing downstream guesses which model
made a run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from bayes_dualeval.core.errors import ConfigError, InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import links
from bayes_dualeval.model.arena_term import ArenaTerm
from bayes_dualeval.model.config import ModelConfig

#: Attribute of ``idata.posterior`` holding the specification as JSON.
CONFIG_ATTR = "model_config"


@dataclass(frozen=True)
class DualEvalModel:
    """A named statistical model: configuration, sites, likelihood and simulation.

    Parameters
    ----------
    config : ModelConfig
    """

    config: ModelConfig

    @classmethod
    def from_idata(cls, idata) -> DualEvalModel:
        """The model that produced a fitted posterior (its recorded specification).

        Raises
        ------
        InputError
            When the posterior does not record its specification (runs written before
            bayes-dualeval recorded it must be fitted again).
        """
        text = idata.posterior.attrs.get(CONFIG_ATTR)
        if not text:
            raise InputError(
                "the posterior does not record which model produced it "
                f"(posterior.attrs[{CONFIG_ATTR!r}] is missing): fit it again"
            )
        return cls(ModelConfig().replace(**json.loads(text)))

    def to_attrs(self) -> dict:
        """Attributes that record this model in an InferenceData group."""
        return {CONFIG_ATTR: json.dumps(self.config.to_dict())}

    @property
    def name(self) -> str:
        """The specification's name."""
        return self.config.name

    @property
    def link(self) -> links.Link:
        """The item response function (:mod:`bayes_dualeval.model.links`)."""
        return links.get(self.config.irt)

    @property
    def item_sites(self) -> tuple[str, ...]:
        """Per-item quantities in the posterior (none under Bradley-Terry)."""
        return () if self.config.mode == "bt" else self.link.item_sites

    @property
    def asymptotes(self) -> bool:
        """Whether items have a guessing floor or an upper asymptote (3PL, 4PL; not ``bt``)."""
        return self.arena_items and self.link.asymptotes

    @property
    def arena_items(self) -> bool:
        """Whether arena prompts have item parameters (every mode but Bradley-Terry)."""
        return self.config.mode != "bt"

    @property
    def arena(self) -> ArenaTerm:
        """The arena likelihood and its weights (:mod:`bayes_dualeval.model.arena_term`)."""
        return ArenaTerm.from_config(self.config)

    def uses_level(self, inputs) -> bool:
        """Whether the arena level term is part of the model on ``inputs`` (ModelInputs)."""
        level = self.config.arena_level == "mean" and self.arena.has_items
        return level and inputs.n_level_groups > 0

    @property
    def arena_term(self) -> str:
        """The arena likelihood: ``"bt"``, ``"reward"`` or ``"pairs"`` (also ``pairs-full``).

        ``"pairs"`` and ``"bt"`` read distilled pairs; ``"reward"`` the rewards themselves.
        """
        return self.arena.kind

    def kinds(self, dataset: Dataset, *, strict: bool = True) -> tuple[bool, bool]:
        """Which kinds of data this model fits from ``dataset``: ``(use_static, use_arena)``.

        Parameters
        ----------
        dataset : Dataset
        strict : bool
            Raise when the mode needs a kind of data the dataset lacks (else report it
            as unused).

        Raises
        ------
        ConfigError
            With ``strict``, when the mode needs a kind of data the dataset does not have.
        """
        mode = self.config.mode
        has_static, has_arena = len(dataset.static_y) > 0, len(dataset.arena_z) > 0
        if strict and mode == "static" and not has_static:
            raise ConfigError("mode 'static' needs static labels, and the data has none")
        if strict and mode in ("arena", "bt") and not has_arena:
            raise ConfigError(f"mode {mode!r} needs arena rewards, and the data has none")
        fits_static, fits_arena = self.fitted_kinds
        return has_static and fits_static, has_arena and fits_arena

    @property
    def fitted_kinds(self) -> tuple[bool, bool]:
        """Which kinds of data the mode fits, whatever the data hold: ``(static, arena)``."""
        mode = self.config.mode
        return mode in ("both", "static"), mode != "static"

    def item_kinds(self, dataset: Dataset) -> tuple[bool, bool]:
        """The kinds of data fitted with item parameters: static, and arena unless ``bt``."""
        use_static, use_arena = self.kinds(dataset, strict=False)
        return use_static, use_arena and self.arena_items

    def fitted_data(self, dataset: Dataset) -> Dataset:
        """``dataset`` restricted to the kinds this model fits (see :meth:`kinds`)."""
        use_static, use_arena = self.kinds(dataset)
        if use_static and not use_arena and len(dataset.arena_z):
            return dataset.only("static")
        if use_arena and not use_static and len(dataset.static_y):
            return dataset.only("arena")
        return dataset

    @property
    def domain_abilities(self) -> bool:
        """Whether each item domain has abilities of its own (``theta_domain``)."""
        return self.config.abilities == "domain"

    @property
    def dims(self) -> int:
        """Ability dimensions (1: one ability per model, or per domain)."""
        return self.config.dims

    def abilities(self, draws: Mapping, inputs):
        """The abilities the items see in one draw: ``theta``, or an ability map.

        With domain abilities the map of ``theta_domain``, with dimensions that of
        ``theta_dims`` and the items' ``loading``
        (:class:`~bayes_dualeval.model.ability_map.AbilityMap`).
        """
        from bayes_dualeval.model.ability_map import abilities_of

        return abilities_of(draws, inputs.item_domain)

    def item_parameters(self, draws: Mapping) -> dict:
        """The link's per-item arrays from ``draws`` (None where the link has none)."""
        return {
            name: draws.get(name) if name in self.item_sites else None
            for name in links.ITEM_PARAMETERS
        }

    def static_loglik(self, draws: Mapping, inputs):
        """Pointwise log likelihood of the static cells for one draw, shape (S,)."""
        from bayes_dualeval.model import dif
        from bayes_dualeval.model.graders import SITE, has_graders
        from bayes_dualeval.model.likelihood import static_loglik

        par = self.item_parameters(draws)
        theta = self.abilities(draws, inputs)
        severity = _site(draws, SITE) if has_graders(inputs) else None
        shifts = _site(draws, dif.SITE) if dif.has_dif(inputs) else None
        return static_loglik(
            theta, par["a"], par["b"], inputs, par["c"], par["d"], severity, shifts
        )

    def arena_loglik(self, draws: Mapping, inputs):
        """Arena log likelihood per item for one draw, shape (Q,)."""
        from bayes_dualeval.model.facets import Facets, has_facets
        from bayes_dualeval.model.likelihood import arena_loglik

        par = self.item_parameters(draws)
        term = self.arena
        gamma = _site(draws, "gamma") if term.has_items else None
        sigma = _site(draws, "sigma") if term.kind == "reward" else None
        level = _site(draws, "level_c") if self.uses_level(inputs) else None
        facets = Facets.from_draws(draws, gamma) if has_facets(inputs) else None
        return arena_loglik(
            self.abilities(draws, inputs), par["a"], par["b"], gamma, sigma,
            inputs, self.config, level, facets,
        )  # fmt: skip


def _site(draws: Mapping, name: str):
    """The value of site ``name`` in ``draws``; an error naming it when it is missing."""
    if name not in draws:
        raise InputError(f"the posterior has no {name!r}, which the model's likelihood reads")
    return draws[name]
