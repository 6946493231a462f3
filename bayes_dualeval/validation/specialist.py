"""A specialist is not a leak: planted domain strength and planted leaks, audited.

Static data are simulated with several item domains, each split into benchmarks (two by
default; the last domain keeps one, where no design can tell a specialist from a leak). One
model is a *specialist*: ``lift`` logits above its overall ability on every item of the
first domain, and no leak. Other models *leak*: a share of their failures on one
benchmark are flipped to successes (as :func:`~bayes_dualeval.validation.contamination.contaminate`
flips cells, here concentrated on one model x benchmark block, the pattern of a model that
saw the benchmark's test set). :func:`specialist_study` fits the data with one ability per
model and with abilities per domain and counts, in each ``contamination.csv``, the
specialist's and the leaks' blocks flagged at ``q_value < alpha``. Used by
``tests/test_specialist.py`` and ``scripts/studies/specialist_study.py``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from bayes_dualeval.core import item_ids
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model.simulate import STATIC_SOURCE, simulate


def specialist_data(
    *,
    n_models: int = 12,
    n_domains: int = 3,
    benchmarks: int = 2,
    items: int = 40,
    lift: float = 2.0,
    leak_share: float = 0.9,
    seed: int = 0,
) -> dict:
    """Simulated static data with a planted specialist and two planted leaks.

    Parameters
    ----------
    n_models : int
        Models (at least 4).
    n_domains : int
        Item domains (``code``, ``math``, ``writing``, ...); every domain but the last has
        ``benchmarks`` benchmarks, the last one.
    benchmarks : int
        Benchmarks per domain (but the last).
    items : int
        Questions per benchmark.
    lift : float
        The specialist's ability above its overall one on the first domain's items.
    leak_share : float
        Share of a leaking model's failures on its benchmark flipped to successes.
    seed : int

    Returns
    -------
    dict
        ``dataset`` (:class:`~bayes_dualeval.data.dataset.Dataset`), ``specialist`` (the
        model), ``specialist_blocks`` (its ``(model, benchmark)`` blocks in the first
        domain), ``leaks`` (the leaked ``(model, benchmark)`` blocks: one in the
        specialist's domain, one in the second domain), ``truth`` (the simulator's, its
        ``items`` keyed by the dataset's item ids).
    """
    # the simulator splits items evenly across domains: give each domain its share
    n_static = items * benchmarks * n_domains
    rng = np.random.default_rng(seed)
    deviation = np.zeros((n_models, n_domains))
    static, _, truth = simulate(
        n_models, n_static, 0, n_domains=n_domains, domain_deviation=deviation, seed=seed
    )
    theta = pd.Series(truth["theta"])
    theta_order = theta.sort_values().index.to_list()
    specialist = theta_order[n_models // 2]  # a middling model: room to be stronger
    # the specialist's lift: redraw its first-domain answers with the lifted ability
    deviation[list(truth["theta"]).index(specialist), 0] = lift
    static, _, truth = simulate(
        n_models, n_static, 0, n_domains=n_domains, domain_deviation=deviation, seed=seed
    )
    # benchmarks within each domain: questions dealt round-robin; the last domain keeps
    # one benchmark (and only `items` of its questions)
    domains = list(dict.fromkeys(static["domain"]))
    last = static["domain"] == domains[-1]
    static = static[~last | (static["sample_index"] < items)].copy()
    part = static["sample_index"] % benchmarks
    names = np.array([chr(ord("a") + k) for k in range(benchmarks)])
    static["dataset"] = np.where(
        last[static.index], static["domain"], static["domain"] + "_" + names[part]
    )
    others = [m for m in theta_order[1:-1] if m != specialist]
    leaky = rng.choice(others, 2, replace=False)
    leaks = [(str(leaky[0]), f"{domains[0]}_b"), (str(leaky[1]), f"{domains[1]}_a")]
    for model, bench in leaks:
        fail = static.index[
            (static["model_label"] == model)
            & (static["dataset"] == bench)
            & (static["correct"] == 0)
        ]
        chosen = rng.choice(fail, int(round(leak_share * len(fail))), replace=False)
        static.loc[chosen, "correct"] = 1
    dataset = Dataset.from_frames(static=static, source="bench")
    # the truth's item parameters under the dataset's item ids
    ids = item_ids.static_ids("bench", static["dataset"], static["sample_index"])
    original = item_ids.static_ids(
        STATIC_SOURCE, static["domain"] + "_bench", static["sample_index"]
    )
    truth["items"] = {new: truth["items"][old] for new, old in zip(ids, original, strict=True)}
    return {
        "dataset": dataset,
        "specialist": specialist,
        "specialist_blocks": [(specialist, f"{domains[0]}_{name}") for name in names],
        "leaks": leaks,
        "truth": truth,
    }


def flagged_blocks(table: pd.DataFrame, blocks, alpha: float = 0.05) -> int:
    """How many of ``blocks`` (``(model, benchmark)``) have a row with ``q_value < alpha``."""
    rows = table[table["kind"] == "static"].set_index(["model", "dataset"])
    return sum(
        bool((rows.loc[[block], "q_value"] < alpha).any())
        for block in blocks
        if block in rows.index
    )


def audit_counts(table: pd.DataFrame, data: dict, alpha: float = 0.05) -> dict:
    """The specialist's, the leaks' and the other blocks flagged in one audit table."""
    planted = set(data["specialist_blocks"]) | set(data["leaks"])
    static = table[table["kind"] == "static"]
    keys = list(zip(static["model"], static["dataset"], strict=True))
    clean = [k not in planted for k in keys]
    return {
        "specialist": flagged_blocks(table, data["specialist_blocks"], alpha),
        "specialist_blocks": len(data["specialist_blocks"]),
        "leaks": flagged_blocks(table, data["leaks"], alpha),
        "leak_blocks": len(data["leaks"]),
        "clean": int((static.loc[clean, "q_value"] < alpha).sum()),
        "clean_blocks": int(sum(clean)),
    }


def specialist_study(*, seed: int = 0, settings=None, alpha: float = 0.05, **data_kw) -> dict:
    """Fit one planted data set with one ability and with domain abilities; count flags.

    Parameters
    ----------
    seed : int
        Seed of the simulation and of the sampler.
    settings : SamplerSettings, optional
        Defaults to short NUTS (2 chains, 200 warm-up, 200 draws).
    alpha : float
        The ``q_value`` threshold.
    **data_kw
        Passed to :func:`specialist_data`.

    Returns
    -------
    dict
        Per specification (``single``, ``domain``): :func:`audit_counts`, the run's
        ``converged`` flag and the audit table (``table``).
    """
    from bayes_dualeval.checks.benchmark_audit import benchmark_audit
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import ModelConfig
    from bayes_dualeval.runs.fit import fit

    data = specialist_data(seed=seed, **data_kw)
    settings = settings or SamplerSettings(
        chains=2, warmup=200, draws=200, seed=seed, progress=False
    )
    out = {"data": data}
    for name, config in (
        ("single", ModelConfig(mode="static")),
        ("domain", ModelConfig(mode="static", abilities="domain")),
    ):
        start = time.perf_counter()
        result = fit(data["dataset"], config, settings)
        table = benchmark_audit(result.idata, result.dataset)
        out[name] = {
            **audit_counts(table, data, alpha),
            "converged": bool(result.converged),
            "seconds": time.perf_counter() - start,
            "table": table,
        }
    return out
