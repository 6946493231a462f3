"""The simulator: files it writes load back with the truth's item ids."""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayes_dualeval import DataWarning, InputError, load
from bayes_dualeval.model.simulate import model_names, simulate, write

DATA = Path(__file__).resolve().parent.parent / "data"


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return load(path)


def test_truth_ids_match_loaded_ids(tmp_path):
    static, arena, truth = simulate(5, 40, 12, n_domains=4, missing=0.0, seed=3)
    files = write(tmp_path, static, arena, truth)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "bench/static.jsonl",
        "arena/arena.jsonl",
        "truth.json",
    ]
    ds = load(tmp_path)
    assert ds.skipped == {}
    assert ds.models.tolist() == sorted(truth["theta"])
    assert set(ds.items) == set(truth["items"])
    for q, kind, dom in zip(ds.items, ds.item_kind, ds.item_domain, strict=True):
        assert truth["items"][q]["kind"] == kind
        assert truth["items"][q]["domain"] == dom
    assert sorted(set(ds.item_domain)) == ["code", "math", "reasoning", "writing"]
    assert len(ds.static_y) == 5 * 40 and len(ds.arena_reward) == 5 * 12
    assert set(ds.item_source) == {"bench", "arena"}
    # sample_index restarts in each domain's dataset
    assert "bench::math_bench_0" in truth["items"] and "bench::code_bench_0" in truth["items"]
    assert "arena::math_prompt_0000" in truth["items"]


def test_without_prompt_offsets_the_rewards_carry_the_prompt_level():
    _, arena, truth = simulate(30, 0, 40, prompt_offset_sd=0.0, reward_noise=0.1, seed=4)
    items = truth["items"]
    mean_reward = arena.groupby("item_id")["reward"].mean()
    b = pd.Series({q.split("::", 1)[1]: v["b"] for q, v in items.items()})
    # easy prompts (low b) get high mean rewards: a strong negative rank correlation
    assert mean_reward.corr(b.reindex(mean_reward.index), method="spearman") < -0.9
    _, arena, _ = simulate(30, 0, 40, prompt_offset_sd=1.0, reward_noise=0.1, seed=4)
    offsets = arena.groupby("item_id")["reward"].mean()
    assert offsets.corr(b.reindex(offsets.index), method="spearman") > -0.9


def test_truth_contents(tmp_path):
    static, arena, truth = simulate(4, 30, 20, gamma_reward=3.0, reward_noise=0.2, seed=1)
    assert (
        list(truth["theta"])
        == model_names(4)
        == [
            "atlas-70b",
            "borealis-8b",
            "cirrus-34b",
            "delta-13b",
        ]
    )
    assert truth["gamma_reward"] == 3.0 and truth["reward_noise"] == 0.2
    assert truth["reward_sd"] == pytest.approx(arena["reward"].std(ddof=0), rel=1e-3)
    assert truth["gamma"] == pytest.approx(3.0 / truth["reward_sd"])
    assert truth["settings"] == {
        "models": 4,
        "static_items": 30,
        "arena_prompts": 20,
        "domains": 3,
        "missing": 0.0,
        "prompt_offset_sd": 1.0,
        "log_a_mean": 0.0,
        "log_a_sd": 0.3,
        "guess": 0.0,
        "slip": 0.0,
        "samples": 1,
        "seed": 1,
    }
    items = truth["items"]
    assert sum(v["kind"] == "static" for v in items.values()) == 30
    assert sum(v["kind"] == "arena" for v in items.values()) == 20
    assert all(v["a"] > 0 for v in items.values())
    # domains split evenly: 30 static items over 3 domains
    doms = pd.Series([v["domain"] for v in items.values() if v["kind"] == "static"])
    assert doms.value_counts().to_dict() == {"math": 10, "code": 10, "writing": 10}


def test_missing_fraction(tmp_path):
    static, arena, truth = simulate(10, 200, 60, missing=0.3, seed=5)
    assert len(static) / (10 * 200) == pytest.approx(0.7, abs=0.03)
    assert len(arena) / (10 * 60) == pytest.approx(0.7, abs=0.04)
    write(tmp_path, static, arena, truth)
    ds = _load(tmp_path)
    assert len(ds.static_y) == len(static)
    static_items = np.unique(ds.static_item)
    assert len(ds.static_y) / (ds.n_models * len(static_items)) == pytest.approx(0.7, abs=0.03)
    none = simulate(3, 10, 5, missing=0.0, seed=5)
    assert len(none[0]) == 30 and len(none[1]) == 15


def test_same_seed_gives_identical_files(tmp_path):
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        write(tmp_path / name, *simulate(6, 50, 20, missing=0.2, seed=seed))
    for rel in ("bench/static.jsonl", "arena/arena.jsonl", "truth.json"):
        a = (tmp_path / "a" / rel).read_bytes()
        assert a == (tmp_path / "b" / rel).read_bytes()
        assert a != (tmp_path / "c" / rel).read_bytes()


def test_rewards_follow_the_generative_model():
    static, arena, truth = simulate(16, 400, 400, reward_noise=0.0, gamma_reward=4.0, seed=9)
    # with no noise, reward - 4 * p = c_q, the same for every model on a prompt
    a = arena.copy()
    theta = a["model_label"].map(truth["theta"])
    ids = "arena::" + a["item_id"]
    av = ids.map(lambda q: truth["items"][q]["a"])
    bv = ids.map(lambda q: truth["items"][q]["b"])
    p = 1.0 / (1.0 + np.exp(-av * (theta - bv)))
    offset = a["reward"] - 4.0 * p
    spread = offset.groupby(a["item_id"]).agg(lambda s: s.max() - s.min())
    assert spread.max() < 2e-4  # rewards are rounded to 4 decimals
    assert offset.groupby(a["item_id"]).mean().mean() == pytest.approx(5.0, abs=0.15)
    # static labels: mean correct close to mean p
    s_ids = "bench::" + static["dataset"] + "_" + static["sample_index"].astype(str)
    ps = 1.0 / (
        1.0
        + np.exp(
            -s_ids.map(lambda q: truth["items"][q]["a"])
            * (
                static["model_label"].map(truth["theta"])
                - s_ids.map(lambda q: truth["items"][q]["b"])
            )
        )
    )
    assert static["correct"].mean() == pytest.approx(ps.mean(), abs=0.01)
    th = np.array(list(truth["theta"].values()))
    assert abs(th.mean()) < 0.6 and 0.5 < th.std() < 1.6


def test_write_refuses_to_overwrite(tmp_path):
    sim = simulate(3, 5, 4, seed=0)
    write(tmp_path, *sim)
    before = (tmp_path / "truth.json").read_text()
    with pytest.raises(InputError, match=r"already exists \(use force=True to overwrite\)"):
        write(tmp_path, *simulate(3, 5, 4, seed=1))
    assert (tmp_path / "truth.json").read_text() == before
    write(tmp_path, *simulate(3, 5, 4, seed=1), force=True)
    assert json.loads((tmp_path / "truth.json").read_text())["settings"]["seed"] == 1


def test_no_arena_prompts_writes_no_arena_file(tmp_path):
    files = write(tmp_path, *simulate(3, 5, 0, seed=0))
    assert [f.name for f in files] == ["static.jsonl", "truth.json"]
    assert not (tmp_path / "arena").exists()
    assert load(tmp_path).n_items == 5


def test_force_removes_a_stale_file_of_an_empty_kind(tmp_path):
    write(tmp_path, *simulate(3, 5, 4, seed=0))
    assert (tmp_path / "arena" / "arena.jsonl").exists()
    files = write(tmp_path, *simulate(3, 6, 0, seed=1), force=True)
    assert [f.name for f in files] == ["static.jsonl", "truth.json"]
    assert not (tmp_path / "arena" / "arena.jsonl").exists()
    ds = load(tmp_path)
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert set(ds.items) == set(truth["items"]) and len(ds.arena_items) == 0


def test_model_names():
    assert model_names(2) == ["atlas-70b", "borealis-8b"]
    assert len(set(model_names(16))) == 16
    assert model_names(17)[:2] == ["model-001", "model-002"] and model_names(17)[-1] == "model-017"
    static, _, truth = simulate(20, 3, 0, seed=0)
    assert sorted(truth["theta"]) == [f"model-{k:03d}" for k in range(1, 21)]
    assert len(simulate(3, 14, 0, n_domains=7)[2]["items"]) == 14
    doms = {v["domain"] for v in simulate(3, 14, 0, n_domains=7)[2]["items"].values()}
    assert "domain7" in doms and "safety" in doms


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((1, 10, 10), {}, "at least two models"),
        ((3, 0, 0), {}, "at least one static question or arena prompt"),
        ((3, -1, 5), {}, "at least one static question"),
        ((3, 5, 5), {"missing": 1.0}, "missing must be in"),
        ((3, 5, 5), {"missing": -0.1}, "missing must be in"),
        ((3, 5, 5), {"n_domains": 0}, "at least one domain"),
    ],
)
def test_bad_arguments(args, kwargs, match):
    with pytest.raises(InputError, match=match):
        simulate(*args, **kwargs)


def test_bundled_example_matches_the_documented_command(tmp_path):
    truth = json.loads((DATA / "truth.json").read_text())
    assert truth["settings"] == {
        "models": 12,
        "static_items": 300,
        "arena_prompts": 100,
        "domains": 3,
        "missing": 0.1,
        "prompt_offset_sd": 0.0,
        "log_a_mean": 0.0,
        "log_a_sd": 0.3,
        "seed": 2026,
    }
    ds = _load(DATA)
    assert ds.n_models == 12
    assert set(ds.items) == set(truth["items"])
    # regenerate with the command documented in docs/simulator.md and compare the content
    static, arena, again = simulate(
        12, 300, 100, n_domains=3, missing=0.1, prompt_offset_sd=0.0, reward_noise=0.5, seed=2026
    )
    assert again["theta"] == pytest.approx(truth["theta"])
    assert again["gamma"] == pytest.approx(truth["gamma"])
    shipped = pd.read_json(DATA / "bench" / "static.jsonl", lines=True)
    pd.testing.assert_frame_equal(shipped, static.reset_index(drop=True), check_dtype=False)
    shipped = pd.read_json(DATA / "arena" / "arena.jsonl", lines=True)
    pd.testing.assert_frame_equal(shipped, arena.reset_index(drop=True), check_dtype=False)


def test_guessing_floor_shows_in_the_weakest_models_accuracy():
    """With guess 0.25, cells far above the model's ability are right a quarter of the time."""
    static, _, truth = simulate(8, 400, 0, guess=0.25, log_a_mean=1.0, seed=5)
    ids = "bench::" + static["dataset"] + "_" + static["sample_index"].astype(str)
    b = ids.map({q: t["b"] for q, t in truth["items"].items()})
    gap = static["model_label"].map(truth["theta"]) - b
    on_hard = static[gap < -2.0]
    assert len(on_hard) > 200
    assert abs(on_hard["correct"].mean() - 0.25) < 0.06
    first = next(iter(truth["items"].values()))
    assert first["c"] == 0.25 and first["d"] == 1.0
    with pytest.raises(InputError, match="guess"):
        simulate(4, 10, 0, guess=0.9, slip=0.2)
