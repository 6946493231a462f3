"""Repeated samples count (issue 53): several answers per model and item, read and fitted.

Static rows that share a model and item but differ in ``sample`` (or ``epoch``, ``repeat``,
``seed``) are repeated answers: a cell holds ``k`` correct of ``n``, and the model's static
term has the density of the ``n`` Bernoulli answers. The aggregated form (``n_correct``,
``n_samples``) reads the same. Rows equal in every key are still duplicates.
"""

import dataclasses
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_dualeval import load
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import DataWarning, InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.layout import with_static_matrix
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.likelihood import static_loglik, static_matrix_loglik
from bayes_dualeval.model.simulate import simulate


def _answers(seed=0, models=6, questions=30, samples=3):
    """Per-answer static rows: ``samples`` answers of each model to each question."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(models):
        for q in range(questions):
            for s in range(samples):
                correct = int(rng.random() < 0.2 + 0.1 * m)
                rows.append(
                    {"model_label": f"m{m}", "dataset": "qa", "sample_index": q,
                     "sample": s, "correct": correct}
                )  # fmt: skip
    return rows


def _quiet(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # nothing may be skipped
        return load(path)


def test_every_sample_counts_and_the_aggregated_form_reads_the_same(tmp_data):
    rows = _answers()
    ds = _quiet(tmp_data.jsonl("long/bench/static.jsonl", rows))
    assert len(ds.static_y) == 6 * 30 and set(ds.static_n.tolist()) == {3}
    assert ds.static_answers == 540 and int(ds.static_y.sum()) == sum(r["correct"] for r in rows)
    summary = ds.summary_dict()
    assert summary["static_labels"] == 540 and summary["static_cells"] == 180
    assert "repeated samples: 180 static cells hold 540 answers" in ds.summary()
    # the same cells as n_correct / n_samples rows, in CSV
    frame = pd.DataFrame(rows).groupby(["model_label", "dataset", "sample_index"], as_index=False)
    agg = frame["correct"].agg(n_correct="sum", n_samples="size")
    other = _quiet(tmp_data.csv("agg/bench/static.csv", agg.to_dict("records")))
    key = ["model", "item"]
    a = ds.static_frame().sort_values(key).reset_index(drop=True)
    b = other.static_frame().sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    # each alias of the sample field reads alike
    for alias in ("epoch", "repeat", "seed"):
        renamed = [{(alias if k == "sample" else k): v for k, v in r.items()} for r in rows]
        got = _quiet(tmp_data.jsonl(f"{alias}/bench/static.jsonl", renamed))
        assert got.static_answers == 540 and int(got.static_y.sum()) == int(ds.static_y.sum())


def test_duplicates_are_rows_equal_in_every_key(tmp_data):
    rows = _answers(models=2, questions=3, samples=2)
    again = dict(rows[0], correct=1 - rows[0]["correct"])  # same model, item and sample
    path = tmp_data.jsonl("dup/bench/static.jsonl", [*rows, again])
    with pytest.warns(DataWarning, match=r"1 duplicate \(model, item, sample\)"):
        ds = load(path)
    assert ds.static_answers == len(rows) and dict(ds.skipped) == {
        "duplicate (model, item, sample)": 1
    }
    cell = ds.static_frame().query("model == 'm0' and item == 'bench::qa_0'")
    kept = again["correct"] + rows[1]["correct"]  # the later row of sample 0 is kept
    assert cell["correct"].tolist() == [kept] and cell["n"].tolist() == [2]


def test_repeated_rows_without_a_sample_field_say_how_to_keep_them(tmp_data):
    rows = [{k: v for k, v in r.items() if k != "sample"} for r in _answers(models=2, questions=2)]
    path = tmp_data.jsonl("nosample/bench/static.jsonl", rows)
    with pytest.warns(DataWarning, match="8 duplicate \\(model, item\\).*'sample' field"):
        ds = load(path)
    assert ds.static_answers == 4 and set(ds.static_n.tolist()) == {1}
    r = CliRunner().invoke(cli, ["check", str(path)])
    assert r.exit_code == 0 and "'sample' field" in r.output


def test_bad_counts_are_one_error_line(tmp_data):
    base = {"model_label": "m0", "dataset": "qa", "sample_index": 0}
    other = {"model_label": "m1", "dataset": "qa", "sample_index": 0, "correct": 1}
    cases = {
        "clash": ([dict(base, n_correct=2, n_samples=3), dict(base, n_correct=1, n_samples=3),
                   other], "aggregated rows disagree"),
        "over": ([dict(base, n_correct=4, n_samples=3), other], "at most n_samples"),
        "zero": ([dict(base, n_correct=0, n_samples=0), other], "at least 1"),
        "both": ([dict(base, correct=1, n_correct=1, n_samples=1), other], "one or the other"),
        "half": ([dict(base, n_correct=1), other], "n_samples"),
    }  # fmt: skip
    for name, (rows, text) in cases.items():
        path = tmp_data.jsonl(f"{name}/bench/static.jsonl", rows)
        r = CliRunner().invoke(cli, ["check", str(path)])
        assert r.exit_code != 0 and r.output.startswith("Error:"), (name, r.output)
        assert text in r.output and "Traceback" not in r.output, (name, r.output)
    # equal aggregated rows are duplicates, counted
    path = tmp_data.jsonl(
        "same/bench/static.jsonl",
        [dict(base, n_correct=2, n_samples=3), dict(base, n_correct=2, n_samples=3), other],
    )
    with pytest.warns(DataWarning, match="1 duplicate"):
        ds = load(path)
    assert ds.static_answers == 4


def test_a_file_none_of_whose_rows_can_be_read_is_an_error_naming_it(tmp_data):
    good = tmp_data.jsonl("data/good/static.jsonl", _answers(models=2, questions=3, samples=1))
    typo = [{"model_label": f"m{m}", "dataset": "qa", "sample_index": 0, "corect": 1}
            for m in range(3)]  # fmt: skip
    bad = tmp_data.csv("data/typo/static.csv", typo)
    for paths in ([good.parent.parent], [bad]):
        with pytest.raises(InputError) as info:
            load(paths)
        text = str(info.value)
        assert text.startswith(f"{bad}: none of its 3 rows can be read"), text
        assert "miss the field 'correct'" in text and "corect" in text
    r = CliRunner().invoke(cli, ["check", str(good.parent.parent)])
    assert r.exit_code == 1 and r.output.startswith(f"Error: {bad}")


def test_arena_repeats_average_into_their_cell(tmp_data):
    rows = [
        {"model_label": m, "item_id": "p", "reward": r, "sample": s}
        for m, rs in (("a", (1.0, 3.0)), ("b", (0.0, 0.0)), ("c", (5.0, 5.0)))
        for s, r in enumerate(rs)
    ]
    ds = _quiet(tmp_data.jsonl("arena/x/arena.jsonl", rows))
    frame = ds.arena_frame().set_index("model")
    assert frame["reward"].to_dict() == {"a": 2.0, "b": 0.0, "c": 5.0}
    assert frame["n"].tolist() == [2, 2, 2] and ds.summary_dict()["arena_rewards"] == 6


def _per_answer(inputs, ds):
    """The inputs with one static cell per answer (k ones and n - k zeros per cell)."""
    k, n = ds.static_y, ds.static_n
    cell = np.repeat(np.arange(len(k)), n)
    first = np.r_[0, np.cumsum(n)[:-1]]
    y = (np.arange(len(cell)) - first[cell] < k[cell]).astype(np.float32)
    return dataclasses.replace(
        inputs,
        static_model=inputs.static_model[cell],
        static_item=inputs.static_item[cell],
        static_y=y,
        static_n=np.ones(len(cell), np.float32),
    )


@pytest.mark.parametrize("irt", ["2pl", "3pl"])
def test_the_static_term_is_the_density_of_every_answer(irt):
    static, _, _ = simulate(5, 12, 0, samples=4, guess=0.2 if irt == "3pl" else 0.0, seed=2)
    ds = Dataset.from_frames(static=static)
    assert set(ds.static_n.tolist()) == {4}
    inputs, _ = build_inputs(ds, ModelConfig(mode="static", irt=irt))
    rng = np.random.default_rng(0)
    theta = rng.normal(size=ds.n_models)
    a, b = np.exp(rng.normal(0, 0.3, ds.n_items)), rng.normal(size=ds.n_items)
    c = np.full(ds.n_items, 0.2) if irt == "3pl" else None
    cells = np.asarray(static_loglik(theta, a, b, inputs, c))
    answers = np.asarray(static_loglik(theta, a, b, _per_answer(inputs, ds), c))
    # per cell: the sum of its answers' Bernoulli log likelihoods
    per_cell = np.bincount(np.repeat(np.arange(len(cells)), ds.static_n), weights=answers)
    np.testing.assert_allclose(cells, per_cell, rtol=1e-5, atol=1e-4)
    matrix = static_matrix_loglik(theta, a, b, with_static_matrix(inputs), c)
    np.testing.assert_allclose(float(np.sum(matrix)), answers.sum(), rtol=1e-5)


def test_a_fit_counts_every_answer(tmp_path):
    static, arena, _ = simulate(6, 40, 10, samples=3, seed=4)
    folder = tmp_path / "sim"
    for name, frame in (("bench/static.jsonl", static), ("arena/arena.jsonl", arena)):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        frame.to_json(folder / name, orient="records", lines=True)
    out = tmp_path / "run"
    r = CliRunner().invoke(
        cli, ["fit", str(folder), "--sampler", "map", "--no-report", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    board = pd.read_csv(out / "leaderboard.csv").set_index("model")
    want = static.groupby("model_label")["correct"].agg(["mean", "size"])
    np.testing.assert_allclose(board.loc[want.index, "static_accuracy"], want["mean"], atol=1e-5)
    assert (board.loc[want.index, "n_static"] == want["size"]).all()
    data = json.loads((out / "diagnostics.json").read_text())["data"]
    assert data["static_labels"] == len(static) and data["static_cells"] == len(static) // 3
    cells = pd.read_csv(out / "anomalies.csv")
    static_cells = cells[cells["kind"] == "static"]
    share = static_cells["observed"] * 3  # the share of three answers, written to 6 digits
    assert len(static_cells) and np.allclose(share, np.rint(share), atol=1e-4)
    # a MAP run has one draw: a cell's p-value is P(k_rep >= k) under Binomial(3, p)
    from scipy import stats

    k = np.rint(static_cells["observed"] * 3)
    want_p = stats.binom.sf(k - 1, 3, static_cells["expected"])
    np.testing.assert_allclose(static_cells["p_value"], want_p, rtol=1e-4, atol=1e-6)


def test_parquet_reads_samples_and_counts_as_jsonl_does(tmp_path):
    rows = pd.DataFrame(_answers(seed=3, models=3, questions=5, samples=2))
    rows["sample"] = rows["sample"].astype(str)
    agg = rows.groupby(["model_label", "dataset", "sample_index"], as_index=False)["correct"]
    agg = agg.agg(n_correct="sum", n_samples="size")
    for name, frame in (("long", rows), ("agg", agg)):
        (tmp_path / name / "bench").mkdir(parents=True)
        frame.to_parquet(tmp_path / name / "bench" / "static.parquet")
        frame.to_json(tmp_path / name / "bench" / "static.jsonl", orient="records", lines=True)
    frames = []
    for name in ("long", "agg"):
        for suffix in ("parquet", "jsonl"):
            ds = _quiet(tmp_path / name / "bench" / f"static.{suffix}")
            frames.append(ds.static_frame().sort_values(["model", "item"]).reset_index(drop=True))
    for other in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], other)
    assert frames[0]["n"].tolist() == [2] * 15
    typo = rows.rename(columns={"correct": "corect"})
    typo.to_parquet(tmp_path / "typo.parquet")
    with pytest.raises(InputError, match="none of its 30 rows can be read: they miss the field"):
        load(tmp_path / "typo.parquet")
