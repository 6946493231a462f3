"""Arena distillation against a slow, obviously correct reference."""

import itertools
import math
import warnings
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from bayes_dualeval import Dataset, DataWarning, InputError
from bayes_dualeval.data.distill import (
    DEFAULT_BB_RATIO,
    DEFAULT_TIE_RATIO,
    distill,
    enumerate_pairs,
)


def make_dataset(seed, *, n_models, n_prompts, missing, discrete, n_sources=1):
    """Random arena rewards (plus one static label per model so no model is ever lost)."""
    rng = np.random.default_rng(seed)
    models = [f"m{k:02d}" for k in range(n_models)]
    arena = []
    for q in range(n_prompts):
        for m in models:
            if rng.random() < missing:
                continue
            r = int(rng.integers(0, 4)) if discrete else float(rng.normal(q % 3, 1.0))
            arena.append(
                {"model_label": m, "item_id": f"p{q}", "reward": r, "source": f"s{q % n_sources}"}
            )
    # rows in random order: the result must not depend on it
    arena = pd.DataFrame(arena).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    static = pd.DataFrame({"model_label": models, "dataset": "d", "sample_index": 0, "correct": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # single-model prompts are dropped
        return Dataset.from_frames(static, arena)


def reference_cutoff(values, ratio):
    """The quantile, moved below an atom when that takes a share closer to ``ratio``."""
    n = len(values)
    q = float(np.float32(np.quantile(values, ratio)))
    at_most = sum(1 for v in values if v <= q) / n
    below = [float(v) for v in values if v < q]
    if abs(len(below) / n - ratio) + 1 / n < abs(at_most - ratio):
        return max(below) if below else -np.inf
    return q


def reference(ds, *, tie_ratio, bb_ratio):
    """Plain double loop over prompts and model pairs (i < j by model index).

    The library works on float32 z, so the reference does too (same rounding of dz).
    """
    cells = defaultdict(dict)
    for m, q, z in zip(ds.arena_model, ds.arena_item, ds.arena_z, strict=True):
        cells[int(q)][int(m)] = np.float32(z)
    raw = []
    for q in sorted(cells):
        ms = sorted(cells[q])
        for a in range(len(ms)):
            for b in range(a + 1, len(ms)):
                i, j = ms[a], ms[b]
                zi, zj = cells[q][i], cells[q][j]
                raw.append((q, i, j, zi - zj, max(zi, zj)))
    dz = np.array([r[3] for r in raw], dtype=np.float32)
    top = np.array([r[4] for r in raw], dtype=np.float32)
    tie_thr = reference_cutoff(np.abs(dz), tie_ratio) if tie_ratio > 0 and raw else -np.inf
    bb_thr = reference_cutoff(top, bb_ratio) if bb_ratio > 0 and raw else -np.inf
    kept, n_tie = {}, 0
    for q, i, j, d, t in raw:
        if tie_ratio > 0 and abs(d) <= tie_thr:
            n_tie += 1
            continue
        both_bad = bool(bb_ratio > 0 and t <= bb_thr)
        kept[(q, i, j)] = (1.0 / (1.0 + math.exp(-float(d))), both_bad)
    return kept, len(raw), n_tie, float(tie_thr), float(bb_thr)


def as_dict(p):
    out = {}
    for q, i, j, t, bb in zip(p.item, p.i, p.j, p.target, p.both_bad, strict=True):
        key = (int(q), int(i), int(j))
        assert key not in out, f"pair {key} listed twice"
        out[key] = (float(t), bool(bb))
    return out


CASES = [
    # seed, n_models, n_prompts, missing, discrete, n_sources
    (0, 2, 1, 0.0, False, 1),
    (1, 3, 4, 0.0, False, 1),
    (2, 5, 6, 0.3, False, 2),
    (3, 7, 9, 0.5, False, 3),
    (4, 4, 8, 0.0, True, 1),
    (5, 6, 10, 0.25, True, 2),
    (6, 9, 5, 0.4, True, 1),
    (7, 12, 3, 0.1, False, 1),
]
RATIOS = [
    (DEFAULT_TIE_RATIO, DEFAULT_BB_RATIO),
    (0.0, DEFAULT_BB_RATIO),
    (DEFAULT_TIE_RATIO, 0.0),
    (0.0, 0.0),
    (0.5, 0.5),
    (0.33, 0.9),
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{c[0]}" for c in CASES])
@pytest.mark.parametrize("ratios", RATIOS, ids=[f"tie{t}-bb{b}" for t, b in RATIOS])
def test_distill_matches_reference(case, ratios):
    seed, n_models, n_prompts, missing, discrete, n_sources = case
    tie_ratio, bb_ratio = ratios
    ds = make_dataset(
        seed,
        n_models=n_models,
        n_prompts=n_prompts,
        missing=missing,
        discrete=discrete,
        n_sources=n_sources,
    )
    p = distill(ds, tie_ratio=tie_ratio, bb_ratio=bb_ratio)
    kept, n_total, n_tie, tie_thr, bb_thr = reference(ds, tie_ratio=tie_ratio, bb_ratio=bb_ratio)
    got = as_dict(p)
    assert set(got) == set(kept)
    for key, (target, both_bad) in kept.items():
        assert got[key][0] == pytest.approx(target, abs=2e-6), key
        assert got[key][1] == both_bad, key
    assert p.n_total == n_total
    assert p.n_tie == n_tie
    assert p.n_pairs == len(kept) == n_total - n_tie
    assert p.n_both_bad == sum(bb for _, bb in kept.values())
    assert p.n_decisive == p.n_pairs - p.n_both_bad
    assert p.tie_threshold.shape == p.bb_threshold.shape == (1,)  # one judge
    tie, bb = p.tie_threshold[0], p.bb_threshold[0]
    assert tie == pytest.approx(tie_thr) or tie == tie_thr == -np.inf
    assert bb == pytest.approx(bb_thr) or bb == bb_thr == -np.inf
    assert (p.i < p.j).all()
    assert p.item.dtype == p.i.dtype == p.j.dtype == np.int32
    assert p.target.dtype == np.float32 and p.both_bad.dtype == bool
    np.testing.assert_array_equal(
        p.prompt_models, np.bincount(ds.arena_item, minlength=ds.n_items)
    )
    assert (p.prompt_models[ds.static_items] == 0).all()


def test_discrete_rewards_exact_ties_are_all_dropped():
    ds = make_dataset(4, n_models=4, n_prompts=8, missing=0.0, discrete=True)
    p = distill(ds)  # defaults
    kept, n_total, n_tie, *_ = reference(ds, tie_ratio=0.1, bb_ratio=0.15)
    assert n_total == 8 * 6 and p.n_tie == n_tie
    # every pair with equal reward on a prompt is a tie when the cut-off is at 0, and
    # none is when 0 takes far more than 10% of the pairs: the side closer to the ratio
    equal = sum(
        a == b
        for _, z in ds.arena_frame().groupby("item")["z"]
        for a, b in itertools.combinations(z, 2)
    )
    assert p.n_tie in (equal, 0) and equal > 0
    assert abs(p.n_tie / n_total - 0.1) <= abs((n_total - p.n_tie if p.n_tie else equal)
                                                / n_total - 0.1)  # fmt: skip


def test_win_draw_loss_rewards_keep_decisive_pairs():
    """A judge's verdicts against one baseline (0, 0.5, 1), most models winning most prompts.

    Every pair's larger reward is then the top value, and most differences are 0: plain
    quantiles made every pair both-bad or a tie (AlpacaEval's judges: no decisive pair).
    """
    rng = np.random.default_rng(3)
    rows = [
        {"model_label": f"m{m}", "item_id": f"p{q}",
         "reward": rng.choice([0.0, 0.5, 1.0], p=[0.1, 0.05, 0.85])}
        for m in range(8) for q in range(40)
    ]  # fmt: skip
    ds = Dataset.from_frames(arena=pd.DataFrame(rows))
    p = distill(ds)
    assert p.n_decisive > 0.5 * p.n_total
    assert p.n_both_bad / p.n_total <= 0.15 and p.n_tie / p.n_total <= 0.10
    kept, n_total, n_tie, tie_thr, bb_thr = reference(ds, tie_ratio=0.1, bb_ratio=0.15)
    assert set(as_dict(p)) == set(kept) and p.n_tie == n_tie


def test_hand_computed_example():
    # one prompt, rewards 0, 1, 2 (z = -1.2247, 0, 1.2247), model order a < b < c
    arena = pd.DataFrame({"model_label": ["c", "a", "b"], "item_id": "p", "reward": [2, 0, 1]})
    ds = Dataset.from_frames(arena=arena)
    s = math.sqrt(1.5)
    p = distill(ds, tie_ratio=0.0, bb_ratio=0.0)
    assert p.n_total == 3 and p.n_tie == 0 and p.n_both_bad == 0
    assert list(zip(p.i.tolist(), p.j.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 2)]
    expected = [1 / (1 + math.exp(s)), 1 / (1 + math.exp(2 * s)), 1 / (1 + math.exp(s))]
    np.testing.assert_allclose(p.target, expected, rtol=1e-6)
    assert p.tie_threshold[0] == p.bb_threshold[0] == -np.inf
    # |dz| = s, 2s, s: the 0.4 quantile is s, so both pairs at s are ties ("at or below")
    t = distill(ds, tie_ratio=0.4, bb_ratio=0.0)
    assert t.n_tie == 2 and list(zip(t.i, t.j, strict=True)) == [(0, 2)]
    # max z per pair = 0, s, s; the 0.3 quantile is 0.6 s: only (a, b) is both-bad
    b = distill(ds, tie_ratio=0.0, bb_ratio=0.3)
    assert b.both_bad.tolist() == [True, False, False]
    assert b.bb_threshold[0] == pytest.approx(0.6 * s, rel=1e-6)


def test_zero_ratios_disable_ties_and_both_bad():
    ds = make_dataset(6, n_models=9, n_prompts=5, missing=0.4, discrete=True)
    p = distill(ds, tie_ratio=0.0, bb_ratio=0.0)
    assert p.n_tie == 0 and p.n_both_bad == 0
    assert p.n_pairs == p.n_total == p.n_decisive > 0
    assert p.tie_threshold[0] == -np.inf and p.bb_threshold[0] == -np.inf
    assert (p.target[np.isclose(p.target, 0.5)] == 0.5).any()  # exact ties are kept
    d = p.summary_dict()
    assert d["pairs_tie"] == 0 and d["pairs_both_bad"] == 0 and d["pairs_total"] == p.n_total


def test_summary_dict():
    ds = make_dataset(2, n_models=5, n_prompts=6, missing=0.3, discrete=False)
    p = distill(ds)
    d = p.summary_dict()
    assert d["pairs_total"] == d["pairs_decisive"] + d["pairs_both_bad"] + d["pairs_tie"]
    assert d["tie_ratio"] == 0.1 and d["bb_ratio"] == 0.15
    assert d["tie_threshold"] == p.tie_threshold and d["bb_threshold"] == p.bb_threshold
    assert DEFAULT_TIE_RATIO == 0.10 and DEFAULT_BB_RATIO == 0.15


@pytest.mark.parametrize("kw", [{"bb_ratio": 1.0}, {"bb_ratio": -0.1}, {"tie_ratio": 1.5}])
def test_bad_ratios(kw):
    ds = make_dataset(1, n_models=3, n_prompts=2, missing=0.0, discrete=False)
    with pytest.raises(InputError, match="must be in \\[0, 1\\)"):
        distill(ds, **kw)


def test_no_arena_rows():
    static = pd.DataFrame(
        {"model_label": ["a", "b"], "dataset": "d", "sample_index": 0, "correct": 1}
    )
    ds = Dataset.from_frames(static)
    p = distill(ds)
    assert p.n_total == p.n_pairs == p.n_tie == 0
    assert p.tie_threshold == p.bb_threshold == -np.inf
    assert p.prompt_models.tolist() == [0]


@pytest.mark.parametrize("sizes", [[], [1], [2], [1, 3, 1, 4], [5, 2, 2, 1, 3]])
def test_enumerate_pairs_is_all_within_group_pairs(sizes):
    item = np.repeat(np.arange(len(sizes)), sizes)
    first, second = enumerate_pairs(item)
    expected = []
    start = 0
    for n in sizes:
        expected += list(itertools.combinations(range(start, start + n), 2))
        start += n
    assert list(zip(first.tolist(), second.tolist(), strict=True)) == expected


def test_each_judge_has_its_own_cut_offs():
    """A strict and a lenient judge on one scale: each sets its ties and both-bad pairs apart
    at its own quantiles, as if it were alone (pooled, the strict judge's pairs would fill
    the both-bad share)."""
    rng = np.random.default_rng(11)
    rows = [
        {"model_label": f"m{m}", "item_id": f"p{q}", "judge": judge,
         "reward": rng.normal(m / 4, 1.0) + shift}
        for judge, shift in (("strict", -2.0), ("lenient", 2.0))
        for m in range(6) for q in range(30)
    ]  # fmt: skip
    ds = Dataset.from_frames(arena=pd.DataFrame(rows))  # one source: one scale for both
    p = distill(ds, tie_ratio=0.1, bb_ratio=0.15)
    judges = list(ds.judges)
    assert p.tie_threshold.shape == p.bb_threshold.shape == (2,)
    per_judge = 15 * 30  # pairs of 6 models on 30 prompts
    for k, name in enumerate(judges):
        mine = p.judge == k
        assert per_judge - mine.sum() == pytest.approx(0.1 * per_judge, abs=1)  # ties
        assert p.both_bad[mine].sum() == pytest.approx(0.15 * (per_judge - 45), abs=12), name
        # the same pairs as the judge's rows alone give
        alone = Dataset.from_frames(arena=pd.DataFrame([r for r in rows if r["judge"] == name]))
        z_scale = np.std([r["reward"] for r in rows]) / np.std(
            [r["reward"] for r in rows if r["judge"] == name]
        )
        solo = distill(alone, tie_ratio=0.1, bb_ratio=0.15)
        assert solo.n_pairs == mine.sum() and solo.n_both_bad == p.both_bad[mine].sum()
        np.testing.assert_allclose(p.tie_threshold[k] * z_scale, solo.tie_threshold[0], rtol=1e-5)
    lenient, strict = judges.index("lenient"), judges.index("strict")
    assert p.bb_threshold[lenient] > p.bb_threshold[strict]
    assert p.summary_dict()["bb_threshold"] == pytest.approx(p.bb_threshold.tolist())
