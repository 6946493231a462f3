"""The simulator's repeated samples and judges (:mod:`bayes_dualeval.model.simulate`).

Each draws from a generator of its own, seeded by the simulation's seed, so that a seed
gives the same data as before wherever these are not asked for.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError


def judged(arena, p, offset, model, theta, names, judges, self_preference, style_effect,
            severity_sd, slope_sd, gamma_reward, noise, seed) -> dict:  # fmt: skip
    """The arena rows as ``judges`` judges score them (step 8 of the simulator).

    ``p``, ``offset`` and ``model`` belong to the rows of ``arena`` (one per cell). Returns
    the rows (``judge``, ``family`` and ``length`` fields added), the truth per judge
    (``severity`` at a success probability of 0, ``slope``, and ``level``: the severity
    plus the slope times the cells' mean success probability, the judge's shift on the
    average answer) and each model's family.
    """
    rng = np.random.default_rng([seed, 2])
    families = [f"family-{chr(ord('a') + k)}" for k in range(judges)]
    family_of = {m: families[k % judges] for k, m in enumerate(names)}
    judge_names = [f"judge-{chr(ord('a') + k)}" for k in range(judges)]
    severity = rng.normal(0.0, severity_sd, judges) if judges > 1 else np.zeros(1)
    spread = rng.normal(0.0, slope_sd, judges) if judges > 1 else np.zeros(1)
    slope = gamma_reward * np.exp(spread)  # one per judge (one judge: the reward scale)
    weak = theta <= np.quantile(theta, 1 / 3)
    length = rng.normal(0.0, 1.0, len(p)) + 1.5 * weak[model]
    own = np.array([family_of[names[i]] for i in model])
    parts = []
    for k in range(judges):
        reward = (
            offset + severity[k] + slope[k] * p + style_effect * length
            + self_preference * (own == families[k]) * (judges > 1)
            + rng.normal(0.0, noise, len(p))
        )  # fmt: skip
        part = arena.assign(reward=np.round(reward, 4), length=np.round(length, 4))
        if judges > 1:
            part = part.assign(judge=judge_names[k])
        parts.append(part)
    rows = pd.concat(parts, ignore_index=True)
    rows["family"] = rows["model_label"].map(family_of)
    # a judge's level at the average answer: what judges.csv's severity estimates
    level = severity + slope * float(np.mean(p))
    truth = {
        name: {
            "severity": float(severity[k]), "slope": float(slope[k]),
            "level": float(level[k]), "family": families[k],
        }
        for k, name in enumerate(judge_names[: len(severity)])
    }  # fmt: skip
    return {"arena": rows, "judges": truth, "family": family_of}


def repeated(static: pd.DataFrame, p: np.ndarray, samples: int, seed: int) -> pd.DataFrame:
    """``static`` (one answer per cell, success probability ``p``) with ``samples`` answers.

    The given answers are sample 0; samples 1, ... are drawn from a generator of their own
    (seeded by ``seed``), so the other draws of the seed do not move.
    """
    extra = np.random.default_rng([seed, 1]).random((samples - 1, len(p))) < p
    parts = [static.assign(sample=0)]
    for k, row in enumerate(extra, start=1):
        parts.append(static.assign(correct=row.astype(int), sample=k))
    return pd.concat(parts, ignore_index=True)


def graded(static: pd.DataFrame, p: np.ndarray, graders: int, severity_sd: float, seed: int):
    """``static`` (one row per answer, success probability ``p``) graded by ``graders`` graders.

    Each answer is labelled by every grader: grader ``g`` passes it with probability
    ``sigmoid(logit(p) - s_g)``, a severity ``s_g ~ Normal(0, severity_sd)`` (positive:
    strict), independently of the other graders, from a generator of its own (seeded by
    ``seed``). Returns the rows (a ``judge`` field added: ``grader-a``, ...) and each
    grader's severity.
    """
    rng = np.random.default_rng([seed, 3])
    severity = rng.normal(0.0, severity_sd, graders)
    names = [f"grader-{chr(ord('a') + k)}" for k in range(graders)]
    logit = np.log(p) - np.log1p(-p)
    parts = []
    for name, s in zip(names, severity, strict=True):
        passed = rng.random(len(p)) < 1.0 / (1.0 + np.exp(-(logit - s)))
        parts.append(static.assign(correct=passed.astype(int), judge=name))
    return pd.concat(parts, ignore_index=True), dict(zip(names, severity.tolist(), strict=True))


def planted_dif(n_models: int, n_static: int, groups: int, items: int, shift: float, seed: int):
    """Groups of models and the static questions that are harder for the last group.

    Model ``i`` is in group ``i mod groups`` (``group-a``, ...); ``items`` static questions,
    chosen from a generator of their own (seeded by ``seed``), are harder by ``shift``
    logits for the last group. Returns None with fewer than two groups, else a dict:
    ``group`` (each model's group name), ``shifted`` (the last group's name), ``items``
    (the questions' indices, sorted) and ``shift`` (M, n_static), the log-odds each
    model loses on each question.
    """
    if groups < 2:
        if items:
            raise InputError("planted DIF items need two groups of models or more")
        return None
    if not 0 <= items <= n_static:
        raise InputError(f"dif_items must be in [0, {n_static}], got {items}")
    names = [f"group-{chr(ord('a') + k)}" for k in range(groups)]
    member = np.arange(n_models) % groups
    rng = np.random.default_rng([seed, 20261206])
    chosen = np.sort(rng.choice(n_static, size=items, replace=False))
    table = np.zeros((n_models, n_static))
    table[np.ix_(member == groups - 1, chosen)] = shift
    return {
        "group": [names[k] for k in member],
        "shifted": names[-1],
        "items": chosen.tolist(),
        "shift": table,
    }
