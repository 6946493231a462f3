"""Simulate static and arena evaluation data with known truth.

The generative process (documented in ``docs/simulator.md``):

1. abilities ``theta_i ~ Normal(0, 1)``;
2. per item (static question or arena prompt) ``b_q ~ Normal(0, 1)`` and
   ``log a_q ~ Normal(0, 0.3)``, items split evenly across domains;
3. static labels ``y_iq ~ Bernoulli(c + (d - c) sigmoid(a_q (theta_i - b_q)))`` with a
   guessing floor ``c = guess`` and a ceiling ``d = 1 - slip`` (both 0 by default: a 2PL);
4. arena rewards ``r_iq = c_q + gamma_reward * sigmoid(a_q (theta_i - b_q)) + e_iq`` with a
   prompt offset ``c_q ~ Normal(5, 1)`` and noise ``e_iq ~ Normal(0, reward_noise)``;
5. each (model, item) cell is dropped independently with probability ``missing``;
6. with ``samples = S > 1``, each static cell holds ``S`` answers (rows with a ``sample``
   field 0, ..., S - 1), drawn independently from the cell's probability: sample 0 is the
   single-sample data of the same seed, the others come from a generator of their own;
7. with ``judges = K > 1`` (or a style effect), every arena cell is scored by each of ``K``
   judges: judge ``k`` gives ``c_q + s_k + g_k p_iq + x [f(i) = f_k] + e * length_iq +
   noise``, with severity ``s_k ~ Normal(0, judge_severity_sd)``, slope ``g_k =
   gamma_reward exp(Normal(0, judge_slope_sd))``, a self-preference ``x`` for the models
   of its own family ``f_k`` (models are spread over ``K`` families, one per judge), and a
   style effect ``e`` on a ``length`` covariate (standard normal, plus 1.5 for the weakest
   third of the models: they are the most verbose). Rows carry ``judge``, ``family`` and
   ``length`` fields; these draws come from a generator of their own;
8. with ``graders = G > 1``, every static answer is labelled by each of ``G`` graders
   (rows with a ``judge`` field ``grader-a``, ...): grader ``g`` passes it with
   probability ``sigmoid(logit(p_iq) - s_g)``, a severity ``s_g ~ Normal(0,
   grader_severity_sd)``, independently of the other graders and from a generator of its
   own. The truth's ``graders`` holds each one's severity;
9. with ``dif_groups = G > 1``, the models are split over ``G`` groups and ``dif_items``
   static questions (chosen by a generator of their own) are harder for the last group:
   its log-odds on them fall by ``dif_shift`` (differential item functioning).

The truth records ``gamma``: the slope of z-normalised rewards on ``p``, i.e.
``gamma_reward / sd(r)``, which is what the model's ``gamma`` estimates (attenuated by
reward noise).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.core import atomic, item_ids
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.model import links
from bayes_dualeval.model.simulate_facets import graded, judged, planted_dif, repeated

MODEL_NAMES = (
    "atlas-70b", "borealis-8b", "cirrus-34b", "delta-13b", "ember-7b", "fjord-405b",
    "granite-3b", "halcyon-22b", "iris-1.5b", "juniper-72b", "kestrel-9b", "lumen-27b",
    "meridian-14b", "nimbus-32b", "onyx-4b", "polaris-120b",
)  # fmt: skip
DOMAIN_NAMES = ("math", "code", "writing", "reasoning", "knowledge", "safety")
STATIC_SOURCE = "bench"
ARENA_SOURCE = "arena"
#: Where :func:`write` puts simulated item features (skipped when responses are read).
FEATURE_FILE = "items.features.csv"
#: Where :func:`write` puts the models' groups of a DIF simulation (a families file).
META_FILE = "models.families.csv"


def model_names(n: int) -> list[str]:
    """Readable model names: the built-in list, then ``model-017``-style names."""
    if n <= len(MODEL_NAMES):
        return list(MODEL_NAMES[:n])
    return [f"model-{k:03d}" for k in range(1, n + 1)]


def simulate(
    n_models: int = 12,
    n_static: int = 300,
    n_arena: int = 100,
    *,
    n_domains: int = 3,
    missing: float = 0.0,
    gamma_reward: float = 4.0,
    reward_noise: float = 0.3,
    prompt_offset_sd: float = 1.0,
    log_a_mean: float = 0.0,
    log_a_sd: float = 0.3,
    guess: float = 0.0,
    slip: float = 0.0,
    domain_sd: float = 0.0,
    domain_deviation=None,
    dims: int = 1,
    dim_correlation: float = 0.3,
    dim_loading: float = 0.8,
    item_features: int = 0,
    feature_share: float = 0.5,
    samples: int = 1,
    judges: int = 1,
    self_preference: float = 0.0,
    style_effect: float = 0.0,
    judge_severity_sd: float = 0.5,
    judge_slope_sd: float = 0.3,
    graders: int = 1,
    grader_severity_sd: float = 1.0,
    dif_groups: int = 1,
    dif_items: int = 0,
    dif_shift: float = 2.0,
    seed: int = 0,
):
    """Draw a simulated evaluation with known truth.

    Parameters
    ----------
    n_models, n_static, n_arena : int
        Numbers of models, static questions and arena prompts.
    n_domains : int
        Domains the items are split across (at most 6 named ones, then ``domain7``...).
    missing : float
        Probability that a (model, item) cell is missing, in [0, 1).
    gamma_reward : float
        Slope of raw rewards on the success probability.
    reward_noise : float
        Standard deviation of reward noise.
    prompt_offset_sd : float
        Standard deviation of the per-prompt reward offset (the reward model's leniency on
        that prompt, around 5). With 0 the rewards carry the prompt's level:
        ``reward = 5 + gamma_reward p + noise``.
    log_a_mean, log_a_sd : float
        Discriminations are ``exp(Normal(log_a_mean, log_a_sd))``; e.g. ``1.0, 0.8`` gives
        near-deterministic items (``a`` up to ~15).
    guess, slip : float
        Static questions' guessing floor ``c`` (0.25 for four-option multiple choice) and
        slip ``1 - d``: a 3PL (``guess`` > 0) or 4PL (also ``slip`` > 0) truth.
    domain_sd : float
        Standard deviation of each model's ability deviation per domain (centred over models
        within each domain): a model's ability on a domain's items is ``theta_i +
        delta_{i,d}``. 0 (the default) gives one ability per model.
    domain_deviation : array-like of shape (n_models, n_domains), optional
        The deviations themselves (instead of drawing them with ``domain_sd``), e.g. a
        specialist: zero everywhere but +2 for one model in one domain. Used as given.
    dims : int
        Ability dimensions ``K``. Above 1, each model has ``K`` standard normal abilities
        correlated ``dim_correlation``, and an item of domain ``d`` loads
        ``dim_loading`` on dimension ``d mod K`` and the rest evenly on all ``K`` (so its
        loadings sum to one); the item sees ``theta_i . w_q``. Not combined with domain
        deviations.
    dim_correlation, dim_loading : float
        See ``dims``.
    item_features : int
        Numeric item features ``F`` to draw (0: none): correlated standard normal columns
        (a few latent factors plus noise) of which one random linear combination ``f_q``
        (standardised over items) carries ``feature_share`` of the difficulty's variance,
        ``b_q = sqrt(share) f_q + sqrt(1 - share) e_q`` with ``e_q`` the usual draw. The
        features go to ``truth["features"]`` (a DataFrame: ``item`` and ``x01``...), which
        :func:`write` writes as ``items.features.csv``. Discriminations do not depend on
        them. The other draws of a seed are unchanged.
    feature_share : float
        In [0, 1]: see ``item_features``.
    samples : int
        Answers per static cell (repeated samples, e.g. ``--repeats`` or epochs): above
        1 the static rows carry a ``sample`` field. Sample 0 is the data of ``samples =
        1`` with the same seed; every other draw of the seed is unchanged.
    judges : int
        Judges scoring every arena cell (step 7 of the module); 1: the rewards as above.
    self_preference : float
        Reward each judge adds to the models of its own family (with ``judges > 1``).
    style_effect : float
        Reward per unit of the ``length`` covariate (every judge alike).
    judge_severity_sd, judge_slope_sd : float
        Spread of the judges' severities and log slopes.
    graders, grader_severity_sd : int, float
        Graders labelling every static answer (step 8 of the module), each with a
        severity on the pass rate's logit, ``Normal(0, grader_severity_sd)``; 1: the
        labels as above.
    dif_groups, dif_items, dif_shift : int, int, float
        Differential item functioning (step 9 of the module): with ``dif_groups = G >
        1`` the models are split over ``G`` groups (``group-a``, ...: model ``i`` in group
        ``i mod G``), and ``dif_items`` static questions, chosen at random, are harder by
        ``dif_shift`` logits for the last group (its log-odds fall by ``dif_shift`` at the
        same ability). The groups go to ``truth["meta"]`` (a DataFrame ``model_label,
        group``), which :func:`write` writes as ``models.families.csv``; ``truth["dif"]``
        holds the column, the shifted group, the items and the shift.
    seed : int
        Seed of the NumPy generator.

    Returns
    -------
    static : pandas.DataFrame
        Rows in the static input format plus ``domain``.
    arena : pandas.DataFrame
        Rows in the arena input format plus ``domain``.
    truth : dict
        ``theta`` per model, ``a``/``b``/``kind`` per item id (as the loader names items),
        ``gamma``, ``gamma_reward``, ``reward_noise`` and the settings; with domain
        deviations also ``theta_domain`` (model -> domain -> ability); with ``dims > 1``
        also ``theta_dims`` (model -> list of K abilities), each item's ``loading`` (list
        of K), and ``theta`` is the ability on the average item.
    """
    if n_models < 2:
        raise InputError("need at least two models")
    if n_static < 0 or n_arena < 0 or n_static + n_arena == 0:
        raise InputError("need at least one static question or arena prompt")
    if not 0.0 <= missing < 1.0:
        raise InputError(f"missing must be in [0, 1), got {missing}")
    if n_domains < 1:
        raise InputError("need at least one domain")
    if not 0.0 <= feature_share <= 1.0:
        raise InputError(f"feature_share must be in [0, 1], got {feature_share}")
    if samples < 1:
        raise InputError(f"samples must be at least 1, got {samples}")
    if judges < 1:
        raise InputError(f"judges must be at least 1, got {judges}")
    if not (0.0 <= guess < 1.0 - slip and 0.0 <= slip < 1.0):
        raise InputError(f"need 0 <= guess < 1 - slip <= 1; got guess {guess}, slip {slip}")
    rng = np.random.default_rng(seed)
    names = model_names(n_models)
    domains = [
        DOMAIN_NAMES[d] if d < len(DOMAIN_NAMES) else f"domain{d + 1}" for d in range(n_domains)
    ]
    theta = rng.normal(0.0, 1.0, n_models)
    deviation = _domain_deviation(rng, n_models, n_domains, domain_sd, domain_deviation)
    dimensional = _dimensions(rng, n_models, dims, dim_correlation, dim_loading, deviation)

    def items(n):
        b = rng.normal(0.0, 1.0, n)
        a = np.exp(rng.normal(log_a_mean, log_a_sd, n))
        dom = np.array(domains)[np.arange(n) * n_domains // max(n, 1)]
        return a, b, dom

    a_s, b_s, dom_s = items(n_static)
    a_r, b_r, dom_r = items(n_arena)
    features = None
    if item_features > 0:
        features, b = _features(seed, n_static + n_arena, item_features, feature_share,
                                np.concatenate([b_s, b_r]))  # fmt: skip
        b_s, b_r = b[:n_static], b[n_static:]
    floor, ceiling = (guess, 1.0 - slip) if guess or slip else (None, None)
    if dimensional is not None:
        theta_dims, loading_of = dimensional
        w_s, w_r = (loading_of(pd.Index(domains).get_indexer(d)) for d in (dom_s, dom_r))
        theta = theta_dims @ np.concatenate([w_s, w_r]).mean(axis=0)
        ability_s, ability_r = theta_dims @ w_s.T, theta_dims @ w_r.T
    else:
        ability_s = _ability(theta, deviation, dom_s, domains)
        ability_r = _ability(theta, deviation, dom_r, domains)
    eta_s = links.eta(ability_s, b_s, a_s)
    planted = planted_dif(n_models, n_static, dif_groups, dif_items, dif_shift, seed)
    if planted is not None:
        eta_s = eta_s - planted["shift"]
    p_s = links.probability(eta_s, floor, ceiling)
    y = (rng.random(p_s.shape) < p_s).astype(int)
    p_r = links.probability(links.eta(ability_r, b_r, a_r))
    offset = rng.normal(5.0, prompt_offset_sd, n_arena)
    reward = offset + gamma_reward * p_r + rng.normal(0.0, reward_noise, p_r.shape)
    keep_s = rng.random(y.shape) >= missing
    keep_r = rng.random(reward.shape) >= missing

    # per-domain counters so sample_index restarts in each dataset
    idx_s = _within(dom_s)
    idx_r = _within(dom_r)
    mi, qi = np.nonzero(keep_s)
    static = pd.DataFrame(
        {
            "model_label": np.array(names)[mi],
            "dataset": np.char.add(dom_s[qi].astype(str), "_bench"),
            "sample_index": idx_s[qi],
            "correct": y[mi, qi],
            "domain": dom_s[qi],
        }
    )
    p_cell = p_s[mi, qi]
    if samples > 1:
        static = repeated(static, p_cell, samples, seed)
        p_cell = np.tile(p_cell, samples)
    severities = None
    if graders > 1:
        static, severities = graded(static, p_cell, graders, grader_severity_sd, seed)
    mi, qi = np.nonzero(keep_r)
    prompt_ids = np.array([f"{d}_prompt_{k:04d}" for d, k in zip(dom_r, idx_r, strict=True)])
    arena = pd.DataFrame(
        {
            "model_label": np.array(names)[mi],
            "item_id": prompt_ids[qi] if n_arena else np.array([], dtype=str),
            "reward": np.round(reward[mi, qi], 4),
            "domain": dom_r[qi],
        }
    )
    scored = None
    if judges > 1 or style_effect:
        scored = judged(
            arena, p_r[mi, qi], offset[qi], mi, theta, names, judges, self_preference,
            style_effect, judge_severity_sd, judge_slope_sd, gamma_reward, reward_noise, seed,
        )  # fmt: skip
        arena = scored["arena"]
        static["family"] = static["model_label"].map(scored["family"])
    benchmarks = np.char.add(dom_s.astype(str), "_bench")
    static_ids = item_ids.static_ids(STATIC_SOURCE, benchmarks, idx_s)
    arena_ids = [item_ids.arena_id(ARENA_SOURCE, p) for p in prompt_ids]
    observed = reward[keep_r]
    sd = float(observed.std()) if observed.size else 1.0
    truth = {
        "theta": dict(zip(names, theta.tolist(), strict=True)),
        "items": {
            **{
                q: {"kind": "static", "a": float(a), "b": float(b), "domain": str(d)}
                | ({"c": guess, "d": 1.0 - slip} if floor is not None else {})
                for q, a, b, d in zip(static_ids, a_s, b_s, dom_s, strict=True)
            },
            **{
                q: {"kind": "arena", "a": float(a), "b": float(b), "domain": str(d)}
                for q, a, b, d in zip(arena_ids, a_r, b_r, dom_r, strict=True)
            },
        },
        "gamma": gamma_reward / sd,
        "gamma_reward": gamma_reward,
        "reward_noise": reward_noise,
        "reward_sd": sd,
        "settings": {
            "models": n_models,
            "static_items": n_static,
            "arena_prompts": n_arena,
            "domains": n_domains,
            "missing": missing,
            "prompt_offset_sd": prompt_offset_sd,
            "log_a_mean": log_a_mean,
            "log_a_sd": log_a_sd,
            "guess": guess,
            "slip": slip,
            "samples": samples,
            "seed": seed,
        },
    }
    if scored is not None:
        truth["settings"].update(
            judges=judges, self_preference=self_preference, style_effect=style_effect
        )
        truth["judges"] = scored["judges"]
        truth["family"] = scored["family"]
        truth["gamma"] = gamma_reward / float(arena["reward"].std())
    if severities is not None:
        truth["settings"].update(graders=graders, grader_severity_sd=grader_severity_sd)
        truth["graders"] = severities
    if planted is not None:
        truth["settings"].update(dif_groups=dif_groups, dif_items=dif_items, dif_shift=dif_shift)
        truth["meta"] = pd.DataFrame({"model_label": names, "group": planted["group"]})
        truth["dif"] = {
            "column": "group",
            "group": planted["shifted"],
            "items": [static_ids[q] for q in planted["items"]],
            "shift": dif_shift,
        }
    if features is not None:
        truth["settings"].update(item_features=item_features, feature_share=feature_share)
        features.insert(0, "item", [*static_ids, *arena_ids])
        truth["features"] = features
    if dimensional is not None:
        truth["settings"].update(
            dims=dims, dim_correlation=dim_correlation, dim_loading=dim_loading
        )
        truth["theta_dims"] = dict(zip(names, theta_dims.tolist(), strict=True))
        for q, w in zip([*static_ids, *arena_ids], np.concatenate([w_s, w_r]), strict=True):
            truth["items"][q]["loading"] = w.tolist()
    if deviation is not None:
        truth["settings"]["domain_sd"] = domain_sd if domain_deviation is None else None
        truth["theta_domain"] = {
            name: {d: float(theta[i] + deviation[i, k]) for k, d in enumerate(domains)}
            for i, name in enumerate(names)
        }
    return static, arena, truth


def _domain_deviation(rng, n_models, n_domains, sd, given):
    """The models' ability deviations per domain (M, K), or None for one ability per model.

    Drawn only when asked for, so that a seed without them gives the data it always gave.
    """
    if given is not None:
        given = np.asarray(given, dtype=float)
        if given.shape != (n_models, n_domains):
            raise InputError(
                f"domain_deviation must have shape ({n_models}, {n_domains}), got {given.shape}"
            )
        return given
    if sd < 0:
        raise InputError(f"domain_sd must be at least 0, got {sd}")
    if sd == 0:
        return None
    deviation = rng.normal(0.0, sd, (n_models, n_domains))
    return deviation - deviation.mean(axis=0)


def _dimensions(rng, n_models, dims, correlation, loading, deviation):
    """Abilities (M, K) and a function from domain index to loadings (n, K); None if K = 1.

    Drawn only when asked for, so that a seed without them gives the data it always gave.
    """
    if dims == 1:
        return None
    if dims < 1:
        raise InputError(f"dims must be at least 1, got {dims}")
    if deviation is not None:
        raise InputError("dims above 1 and domain deviations are two different truths: choose one")
    if not -1.0 / (dims - 1) < correlation < 1.0:
        raise InputError(f"dim_correlation must be in (-1/(dims - 1), 1), got {correlation}")
    if not 0.0 <= loading <= 1.0:
        raise InputError(f"dim_loading must be in [0, 1], got {loading}")
    cov = np.full((dims, dims), correlation) + (1.0 - correlation) * np.eye(dims)
    theta_dims = rng.multivariate_normal(np.zeros(dims), cov, n_models)

    def loading_of(domain_index):
        w = np.full((len(domain_index), dims), (1.0 - loading) / dims)
        w[np.arange(len(domain_index)), domain_index % dims] += loading
        return w

    return theta_dims, loading_of


def _ability(theta, deviation, item_domain, domains) -> np.ndarray:
    """Each model's ability on each item, (M, n); (M, 1) without deviations (broadcasts).

    ``deviation`` has one column per entry of ``domains``, in that order.
    """
    if deviation is None:
        return theta[:, None]
    return theta[:, None] + deviation[:, pd.Index(domains).get_indexer(item_domain)]


def _features(seed, n_items, n_features, share, noise):
    """Correlated item features and difficulties of which they carry ``share`` (see above).

    Drawn from their own generator (seeded by ``seed``), so a seed's other draws do not move.
    """
    rng = np.random.default_rng([seed, 20261203])
    factors = max(1, min(8, n_features // 4))
    latent = rng.normal(size=(n_items, factors))
    x = latent @ rng.normal(size=(factors, n_features)) + rng.normal(size=(n_items, n_features))
    signal = x @ rng.normal(size=n_features)
    signal = (signal - signal.mean()) / signal.std()
    b = np.sqrt(share) * signal + np.sqrt(1.0 - share) * noise
    names = [f"x{k + 1:02d}" for k in range(n_features)]
    return pd.DataFrame(np.round(x, 5), columns=names), b


def _within(labels: np.ndarray) -> np.ndarray:
    """Running index of each element among equal labels (0, 1, ... per label)."""
    out = np.zeros(len(labels), dtype=int)
    for lab in np.unique(labels):
        where = labels == lab
        out[where] = np.arange(where.sum())
    return out


def write(out: str | Path, static, arena, truth, *, force: bool = False) -> list[Path]:
    """Write a simulation as ``bench/static.jsonl``, ``arena/arena.jsonl`` and ``truth.json``.

    With simulated item features also ``items.features.csv``; with DIF groups also
    ``models.families.csv`` (``model_label,group``: a families file for ``dif="group"``).

    Parameters
    ----------
    out : str or Path
        Output directory (created).
    static, arena : pandas.DataFrame
        Tables from :func:`simulate`.
    truth : dict
        Truth from :func:`simulate`.
    force : bool
        Overwrite existing files of the same names.

    Returns
    -------
    list of Path
        The files written.
    """
    out = Path(out)
    targets = {
        out / STATIC_SOURCE / "static.jsonl": static,
        out / ARENA_SOURCE / "arena.jsonl": arena,
    }
    truth_path = out / "truth.json"
    truth = dict(truth)
    features = truth.pop("features", None)
    if features is not None:
        targets[out / FEATURE_FILE] = features
    meta = truth.pop("meta", None)
    if meta is not None:
        targets[out / META_FILE] = meta
    if not force:
        clash = [p for p in [*targets, truth_path] if p.exists()]
        if clash:
            raise InputError(
                f"{clash[0]} already exists (use {setting('force', True)} to overwrite)"
            )
    written = []
    for path, table in targets.items():
        if len(table) and path.suffix == ".csv":
            atomic.write_text(path, table.to_csv(index=False))
            written.append(path)
        elif len(table):
            atomic.write_text(path, table.to_json(orient="records", lines=True))
            written.append(path)
        elif path.exists():  # only with force: a stale file would not match truth.json
            path.unlink()
    atomic.write_text(truth_path, json.dumps(truth, indent=1) + "\n")
    written.append(truth_path)
    return written
