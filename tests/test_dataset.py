"""The Dataset container: arrays, views, summaries and construction from frames."""

import dataclasses
import doctest
import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_dualeval import Dataset, DataWarning, InputError, load
from bayes_dualeval.data.tables import normalise_rewards

ARRAYS = [
    "models",
    "items",
    "item_kind",
    "item_source",
    "item_domain",
    "item_group",
    "groups",
    "static_model",
    "static_item",
    "static_y",
    "arena_model",
    "arena_item",
    "arena_reward",
    "arena_z",
]


@pytest.fixture
def ds(tmp_data):
    """3 models; static d_0..d_2 with m3 missing d_1; arena p0, p1 with m1 missing p1."""
    static = [
        {"model_label": m, "dataset": "d", "sample_index": k, "correct": int(m == "m1" or k == 0)}
        for m in ("m3", "m1", "m2")
        for k in range(3)
        if not (m == "m3" and k == 1)
    ]
    arena = [
        {"model_label": m, "item_id": p, "reward": r}
        for (m, p, r) in [
            ("m1", "p0", 1.0),
            ("m2", "p0", 2.0),
            ("m3", "p0", 3.0),
            ("m2", "p1", 5.0),
            ("m3", "p1", 7.0),
        ]
    ]
    tmp_data.jsonl("math/bench/s.jsonl", static)
    tmp_data.csv("chat/arena/a.csv", arena)
    return load(tmp_data.root)


def test_shapes_order_and_indices(ds):
    assert ds.models.tolist() == ["m1", "m2", "m3"]  # sorted
    # items: static then arena, each in order of first appearance (m3's rows come first)
    assert ds.items.tolist() == [
        "bench::d_0",
        "bench::d_2",
        "bench::d_1",
        "arena::p0",
        "arena::p1",
    ]
    assert ds.n_models == 3 and ds.n_items == 5
    assert ds.static_items.tolist() == [0, 1, 2]
    assert ds.arena_items.tolist() == [3, 4]
    assert ds.groups.tolist() == ["arena:arena", "static:bench"]
    assert ds.item_group.tolist() == [1, 1, 1, 0, 0]
    assert ds.item_domain.tolist() == ["math"] * 3 + ["chat"] * 2
    assert len(ds.static_y) == 8 and len(ds.arena_reward) == 5
    assert ds.static_model.dtype == np.int32 and ds.static_item.dtype == np.int32
    assert ds.arena_model.dtype == np.int32 and ds.arena_item.dtype == np.int32
    assert ds.static_y.dtype == np.int32 and ds.static_n.tolist() == [1] * 8
    assert ds.arena_reward.dtype == np.float64 and ds.arena_z.dtype == np.float64
    pairs = set(zip(ds.static_model.tolist(), ds.static_item.tolist(), strict=True))
    assert (2, 2) not in pairs and len(pairs) == 8  # m3 did not answer d_1
    arena = set(zip(ds.arena_model.tolist(), ds.arena_item.tolist(), strict=True))
    assert arena == {(0, 3), (1, 3), (2, 3), (1, 4), (2, 4)}
    assert (
        "3 models" in repr(ds) and "3 static items" in repr(ds) and "2 arena prompts" in repr(ds)
    )


@pytest.mark.parametrize("name", ARRAYS)
def test_arrays_are_read_only(ds, name):
    arr = getattr(ds, name)
    assert isinstance(arr, np.ndarray)
    assert not arr.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        arr[0] = arr[0]


def test_dataset_is_frozen(ds):
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.models = np.array(["x"])
    with pytest.raises(TypeError):
        ds.skipped["new"] = 1


def test_static_cells(ds):
    cells = ds.static_frame().pivot(index="model", columns="item", values="correct")
    cells = cells.reindex(index=ds.models, columns=ds.items[ds.static_items])
    expected = np.array([[1, 1, 1], [1, 0, 0], [1, 0, np.nan]])  # columns d_0, d_2, d_1
    np.testing.assert_array_equal(cells.to_numpy(dtype=float), expected)


def test_arena_cells_carry_z(ds):
    cells = ds.arena_frame().pivot(index="model", columns="item", values="z")
    cells = cells.reindex(index=ds.models, columns=ds.items[ds.arena_items]).to_numpy()
    r = np.array([1.0, 2.0, 3.0, 5.0, 7.0])  # one source: z over all its rewards
    z = (r - r.mean()) / r.std()
    np.testing.assert_allclose(cells[:, 0], z[:3])
    np.testing.assert_allclose(cells[1:, 1], z[3:])
    assert np.isnan(cells[0, 1])  # m1 did not answer p1


def test_only_keeps_one_kind_and_rejects_others(ds):
    static = ds.only("static")
    assert static.items.tolist() == ds.items[ds.static_items].tolist()
    assert len(static.arena_z) == 0 and static.skipped == ds.skipped
    np.testing.assert_array_equal(static.static_y, ds.static_y)
    arena = ds.only("arena")
    np.testing.assert_allclose(arena.arena_z, ds.arena_z)
    with pytest.raises(InputError, match="kind must be one of"):
        ds.only("both")


def test_frames_and_counts(ds):
    sf = ds.static_frame()
    assert list(sf.columns) == ["model", "item", "source", "domain", "correct", "n"]
    assert len(sf) == 8
    row = sf[(sf.model == "m2") & (sf.item == "bench::d_0")]
    assert row["correct"].tolist() == [1] and row["domain"].tolist() == ["math"]
    af = ds.arena_frame()
    assert list(af.columns) == ["model", "item", "source", "domain", "reward", "z", "n"]
    assert af.set_index(["model", "item"]).loc[("m3", "arena::p1"), "reward"] == 7.0
    assert sf.groupby("model").size().tolist() == [3, 3, 2]
    assert af.groupby("model").size().tolist() == [1, 2, 2]


def test_summary(ds):
    d = ds.summary_dict()
    assert d["models"] == 3 and d["items"] == 5
    assert d["static_items"] == 3 and d["arena_items"] == 2
    assert d["static_labels"] == 8 and d["arena_rewards"] == 5
    assert d["domains"] == ["chat", "math"]
    assert d["files"] == 2 and d["skipped"] == {} and d["reward_norm"] == "source"
    g = d["groups"]["static:bench"]
    assert g == {"kind": "static", "source": "bench", "items": 3, "cells": 8, "coverage": 8 / 9}
    assert d["groups"]["arena:arena"]["coverage"] == pytest.approx(5 / 6)
    text = ds.summary()
    assert "3 models, 5 items (3 static questions, 2 arena prompts)" in text
    assert "8 static labels, 5 arena rewards (z-normalised per source)" in text
    assert "coverage 89%" in text and "domains: chat, math" in text


def test_normalise_rewards_function():
    r = np.array([1.0, 3.0, 10.0, 10.0, 20.0])
    src = np.array(["a", "a", "b", "b", "b"])
    z = normalise_rewards(r, src, "source")
    np.testing.assert_allclose(z[:2], [-1.0, 1.0])
    b = r[2:]
    np.testing.assert_allclose(z[2:], (b - b.mean()) / b.std())
    g = normalise_rewards(r, src, "global")
    np.testing.assert_allclose(g, (r - r.mean()) / r.std())
    assert normalise_rewards(np.zeros(0), np.zeros(0, dtype=str), "source").shape == (0,)


@pytest.mark.parametrize("how", ["source", "global"])
def test_normalise_rewards_huge_values_do_not_overflow(how):
    src = np.array(["a"] * 4)
    z = normalise_rewards(np.array([1e308, -1e308, 1e308, -1e308]), src, how)
    np.testing.assert_allclose(z, [1.0, -1.0, 1.0, -1.0])
    z = normalise_rewards(np.array([-1e308, -1e308, -1e308, -1e308]), src, how)
    assert z.tolist() == [0.0, 0.0, 0.0, 0.0]
    z = normalise_rewards(np.array([1e200, 3e200, 1e200, 3e200]), src, how)
    np.testing.assert_allclose(z, [-1.0, 1.0, -1.0, 1.0])
    # tiny and huge sources side by side keep full precision per source
    r = np.array([1e-300, 3e-300, 1e300, 5e300])
    z = normalise_rewards(r, np.array(["a", "a", "b", "b"]), "source")
    np.testing.assert_allclose(z, [-1.0, 1.0, -1.0, 1.0])


# --------------------------------------------------------------------------- from_frames


def test_docstring_examples_run():
    from bayes_dualeval.data import dataset, distill, readers, tables

    attempted = 0
    for module in (dataset, distill, readers, tables):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 4  # Dataset.from_frames; the file-reading ones are skipped


def test_from_frames_minimal():
    static = pd.DataFrame(
        {"model_label": ["m1", "m2"], "dataset": "qa", "sample_index": 0, "correct": [1, 0]}
    )
    ds = Dataset.from_frames(static=static)
    assert ds.items.tolist() == ["frame::qa_0"]
    assert ds.static_y.tolist() == [1, 0]
    assert ds.files == ()


def test_from_frames_sources_domains_and_norm():
    static = pd.DataFrame(
        {
            "model_label": ["a", "b", "a", "b"],
            "dataset": ["x", "x", "y", "y"],
            "sample_index": [1, 1, 2, 2],
            "correct": [True, False, 1, 0],
            "domain": ["math", "math", None, None],
        }
    )
    arena = pd.DataFrame(
        {
            "model_label": ["a", "b", "a", "b"],
            "item_id": ["p", "p", "p", "p"],
            "reward": [1.0, 3.0, 10.0, 30.0],
            "source": ["s1", "s1", "s2", "s2"],
        }
    )
    ds = Dataset.from_frames(static, arena, source="bench", reward_norm="source")
    assert ds.items.tolist() == ["bench::x_1", "bench::y_2", "s1::p", "s2::p"]
    assert ds.item_domain.tolist() == ["math", "", "", ""]
    assert ds.item_source.tolist() == ["bench", "bench", "s1", "s2"]
    np.testing.assert_allclose(ds.arena_z, [-1.0, 1.0, -1.0, 1.0])
    g = Dataset.from_frames(static, arena, source="bench", reward_norm="global")
    r = np.array([1.0, 3.0, 10.0, 30.0])
    np.testing.assert_allclose(g.arena_z, (r - r.mean()) / r.std())


def test_from_frames_matches_load(tmp_data):
    rows = [
        {"model_label": m, "item_id": f"p{q}", "reward": float((3 * i + q) % 5)}
        for i, m in enumerate(["a", "b", "c"])
        for q in range(4)
    ]
    tmp_data.jsonl("arena/a.jsonl", rows)
    from_file = load(tmp_data.root / "arena")
    frame = Dataset.from_frames(arena=pd.DataFrame(rows), source="arena")
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(from_file, name), getattr(frame, name), name)


def test_from_frames_missing_cells_are_counted():
    static = pd.DataFrame(
        {
            "model_label": ["a", "b", "a", "b"],
            "dataset": ["x", "x", "x", None],
            "sample_index": [0, 0, 1, 1],
            "correct": [1, 0, np.nan, 1],
        }
    )
    with pytest.warns(DataWarning, match="1 missing correct, 1 missing dataset"):
        ds = Dataset.from_frames(static)
    assert dict(ds.skipped) == {"missing correct": 1, "missing dataset": 1}
    assert ds.items.tolist() == ["frame::x_0"]


def test_from_frames_invalid_values():
    static = pd.DataFrame(
        {
            "model_label": ["a", "b", "c", "c"],
            "dataset": "x",
            "sample_index": [0, 0, 0, 1],
            "correct": [1, 0, 5, 1],
        }
    )
    with pytest.raises(InputError, match=r"static frame \(source frame\):3: correct must be"):
        Dataset.from_frames(static)
    with pytest.warns(DataWarning, match="1 invalid correct"):
        ds = Dataset.from_frames(static, skip_invalid=True)
    assert ds.models.tolist() == ["a", "b", "c"]
    assert ds.items.tolist() == ["frame::x_0", "frame::x_1"]
    assert len(ds.static_y) == 3


def test_from_frames_wrong_kind_and_empty():
    arena_like = pd.DataFrame({"model_label": ["a", "b"], "item_id": "p", "reward": [1.0, 2.0]})
    with pytest.raises(InputError, match="the static frame holds arena rows"):
        Dataset.from_frames(static=arena_like)
    with pytest.raises(InputError, match="no usable rows"):
        Dataset.from_frames()
    with pytest.raises(InputError, match="no usable rows"):
        Dataset.from_frames(static=pd.DataFrame(), arena=pd.DataFrame())
    with pytest.raises(InputError, match="reward_norm must be one of"):
        Dataset.from_frames(arena=arena_like, reward_norm="robust")


def test_from_frames_numpy_scalar_types():
    static = pd.DataFrame(
        {
            "model_label": np.array(["a", "b"]),
            "dataset": "x",
            "sample_index": np.array([3, 3], dtype=np.int16),
            "correct": np.array([True, False]),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = Dataset.from_frames(static)
    assert ds.items.tolist() == ["frame::x_3"]
    assert ds.static_y.tolist() == [1, 0]
