"""inspect_ai .eval logs: the real logs of scripts/tools/harness_fixtures.py, and bad ones."""

import json
import tracemalloc
import zipfile
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import inspect_ai, labels, limits
from bayes_dualeval.data.readers import ReadReport, find_files, read_paths

FIXTURES = Path(__file__).parent / "fixtures" / "harness"
LOGS = FIXTURES / "inspect"
#: What scripts/tools/harness_fixtures.py's mock models answer right, of questions 1-6.
RIGHT = {"mockllm/model-a": 6, "mockllm/model-b": 4, "mockllm/model-c": 2}

needs_zstd = pytest.mark.skipif(
    not hasattr(zipfile, "ZIP_ZSTANDARD")
    and not __import__("importlib").util.find_spec("zstandard"),
    reason="inspect_ai's logs are zstd zips: needs zstandard (the [test] extra has it)",
)


def rows_of(path):
    skipped = []
    out = list(inspect_ai.rows(Path(path), lambda why, where: skipped.append((why, where))))
    return [r for _, r in out], skipped


def write_log(path, *, status="success", samples=(), header=True, members=None, **ev):
    """A deflate-compressed .eval log as inspect_ai lays it out (header, summaries)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("_journal/start.json", json.dumps({"version": 2}))
        if header:
            head = {
                "version": 2,
                "status": status,
                "eval": {"task": ev.get("task", "quiz"), "model": ev.get("model", "m1")},
            }
            zf.writestr("header.json", json.dumps(head))
        zf.writestr("summaries.json", json.dumps(list(samples)))
        for name, data in (members or {}).items():
            zf.writestr(name, data)
    return path


def sample(sid, value, epoch=1, scorer="match", **extra):
    scores = {} if value is None else {scorer: {"value": value}}
    return {"id": sid, "epoch": epoch, "scores": scores, **extra}


@needs_zstd
def test_real_logs_give_every_sample_epoch_and_scorer():
    per_model = {}
    for log in sorted(LOGS.glob("*.eval")):
        rows, skipped = rows_of(log)
        assert skipped == []
        assert len(rows) == 6 * 2 * 2  # questions x epochs x scorers
        (model,) = {r["model_label"] for r in rows}
        per_model[model] = rows
        assert {r["dataset"] for r in rows} == {"arith"}
        assert {r["sample_index"] for r in rows} == set(range(1, 7))
        assert {r["sample"] for r in rows} == {1, 2}
        assert {r["judge"] for r in rows} == {"match", "includes"}
        assert {r["domain"] for r in rows} == {"arithmetic"}
    assert set(per_model) == set(RIGHT)
    for model, rows in per_model.items():
        assert sum(r["correct"] for r in rows) == RIGHT[model] * 4
    # model-b answers questions 1-4 right, in both epochs and by both scorers
    b = Counter((r["sample_index"], r["correct"]) for r in per_model["mockllm/model-b"])
    assert b == {(i, int(i <= 4)): 4 for i in range(1, 7)}


@needs_zstd
def test_a_folder_of_logs_reads_with_the_failed_log_counted():
    static, arena, report = read_paths([FIXTURES / "inspect", FIXTURES / "inspect-failed"])
    assert len(arena) == 0
    assert set(static["item"]) == {f"inspect_ai::arith_{i}" for i in range(1, 7)}
    assert set(static["source"]) == {"inspect_ai"}
    acc = static.groupby("model")["correct"].mean()
    assert acc.to_dict() == {m: n / 6 for m, n in RIGHT.items()}
    tally = report.harnesses["inspect_ai"]
    assert tally.files == 4 and tally.rows == 72
    assert tally.models == set(RIGHT) and tally.tasks == {"arith"}
    assert tally.samples == {1, 2} and tally.judges == {"match", "includes"}
    assert tally.skipped == {"log with status 'error'": 1}
    assert report.skipped == {"inspect_ai log with status 'error'": 1}


@needs_zstd
def test_epochs_are_repeated_samples_of_one_cell():
    from bayes_dualeval.data.load import load

    ds = load(LOGS)
    # 3 models x 6 questions x 2 scorers: a cell is a (model, item, judge)
    assert len(ds.static_items) == 6 and len(ds.static_y) == 36
    assert set(ds.static_n) == {2}  # two epochs per cell
    assert sorted(ds.judges) == ["includes", "match"]
    correct = {ds.models[m]: 0 for m in range(3)}
    for m, y in zip(ds.static_model, ds.static_y, strict=True):
        correct[ds.models[m]] += int(y)
    # both scorers agree on these answers: every right answer counted by each
    assert correct == {m: 4 * n for m, n in RIGHT.items()}
    assert not ds.skipped


@needs_zstd
def test_check_says_what_it_read_per_harness():
    res = CliRunner().invoke(
        cli, ["check", str(FIXTURES / "inspect"), str(FIXTURES / "inspect-failed")]
    )
    assert res.exit_code == 0, res.output
    assert "inspect_ai: 4 files, 72 records" in res.output
    assert "models (3): mockllm/model-a, mockllm/model-b, mockllm/model-c" in res.output
    assert "tasks (1): arith" in res.output
    assert "samples (2): 1, 2" in res.output
    assert "judges (2): includes, match" in res.output
    assert "skipped 1: log with status 'error' (first: " in res.output
    assert "inspect-failed-0.eval" in res.output
    assert "Traceback" not in res.output


@needs_zstd
def test_logs_and_annotations_fit_jointly_with_the_accuracy_the_logs_record(tmp_path):
    out = tmp_path / "run"
    data = [str(LOGS), str(FIXTURES / "alpaca_eval")]
    res = CliRunner().invoke(
        cli, ["fit", *data, "--sampler", "map", "--out", str(out), "-q", "--no-report"]
    )
    assert res.exit_code == 0, res.output
    board = pd.read_csv(out / "leaderboard.csv").set_index("model")
    static = board["static_accuracy"].dropna().to_dict()
    assert static == pytest.approx({m: n / 6 for m, n in RIGHT.items()})
    # two epochs (repeated samples) and two scorers (judges): four labels per question
    answers = {**dict.fromkeys(RIGHT, 24), "model-p": 0, "model-q": 0}
    assert board["n_static"].to_dict() == answers
    assert board["n_arena"].to_dict() == {**dict.fromkeys(RIGHT, 0), "model-p": 3, "model-q": 3}


def test_labels_from_grades_booleans_and_numbers(tmp_path):
    values = ["C", "I", "correct", True, False, 1, 0, 0.7, 0.3, "P", "N", 0.5, "0.9"]
    samples = [sample(i, v) for i, v in enumerate(values, start=1)]
    samples += [sample(20, 3.5), sample(21, "maybe"), sample(22, None)]
    rows, skipped = rows_of(write_log(tmp_path / "l.eval", samples=samples))
    assert [r["correct"] for r in rows] == [1, 0, 1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1]
    assert Counter(why for why, _ in skipped) == {
        "score value 3.5 not a label": 1,
        "score value 'maybe' not a label": 1,
        "sample without a score": 1,
    }
    assert skipped[-1][1].endswith("l.eval: sample 22 epoch 1")


def test_string_sample_ids_are_stable_indices_and_dict_scores_are_judges(tmp_path):
    s = [sample("q-7", {"acc": 1, "strict": 0}, epoch=2)]
    rows, _ = rows_of(write_log(tmp_path / "a.eval", samples=s))
    again, _ = rows_of(write_log(tmp_path / "b.eval", samples=s, model="m2"))
    assert [r["judge"] for r in rows] == ["match/acc", "match/strict"]
    assert [r["correct"] for r in rows] == [1, 0]
    assert rows[0]["sample_index"] == again[0]["sample_index"] == labels.question_index("q-7")
    assert rows[0]["sample"] == 2
    assert labels.question_index("12") == 12 and labels.question_index(5) == 5


@pytest.mark.parametrize("status", ["error", "cancelled"])
def test_a_failed_or_cancelled_log_is_a_counted_skip(tmp_path, status):
    rows, skipped = rows_of(
        write_log(tmp_path / "x.eval", status=status, samples=[sample(1, "C")])
    )
    assert rows == [] and skipped == [(f"log with status {status!r}", str(tmp_path / "x.eval"))]


def test_a_running_log_without_header_is_a_counted_skip(tmp_path):
    rows, skipped = rows_of(write_log(tmp_path / "x.eval", header=False))
    assert rows == [] and skipped[0][0] == "log with status 'started' (no header)"


def test_a_truncated_log_is_one_line_naming_the_file(tmp_path):
    good = write_log(tmp_path / "good.eval", samples=[sample(i, "C") for i in range(50)])
    bad = tmp_path / "logs" / "cut.eval"
    bad.parent.mkdir()
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(InputError, match=r"cut\.eval: not a readable zip archive"):
        read_paths([bad.parent])
    res = CliRunner().invoke(cli, ["check", str(bad.parent)])
    assert res.exit_code == 1
    assert res.output.startswith("Error: ") and "cut.eval" in res.output
    assert "Traceback" not in res.output


def test_a_corrupt_member_is_one_line_naming_the_member(tmp_path):
    log = write_log(tmp_path / "c.eval", samples=[sample(i, "C") for i in range(200)])
    data = bytearray(log.read_bytes())
    with zipfile.ZipFile(log) as zf:
        info = zf.getinfo("summaries.json")
    start = info.header_offset + 30 + len(info.filename) + 20
    data[start : start + 40] = bytes(40)  # zero out compressed bytes
    log.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"c\.eval:summaries\.json: (corrupt member|malformed)"):
        read_paths([log])


@pytest.mark.parametrize("name", ["../evil.json", "/abs/evil.json", "a/../../evil.json"])
def test_a_member_outside_the_archive_is_refused(tmp_path, name):
    log = write_log(tmp_path / "p.eval", samples=[sample(1, "C")], members={name: "{}"})
    with pytest.raises(InputError, match="has a path outside the archive, refused"):
        read_paths([log])


def test_a_zip_bomb_is_refused_with_bounded_memory(tmp_path):
    log = tmp_path / "bomb.eval"
    with zipfile.ZipFile(log, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr(
            "header.json", json.dumps({"status": "success", "eval": {"task": "t", "model": "m"}})
        )
        with zf.open("summaries.json", "w") as fh:  # 48 MiB of spaces: ~50 KiB compressed
            chunk = b" " * 2**20
            for _ in range(48):
                fh.write(chunk)
    assert log.stat().st_size < 2**20
    tracemalloc.start()
    with pytest.raises(InputError, match=r"summaries\.json: inflates \d+ times"):
        read_paths([log])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * 2**20


def test_a_member_over_the_cap_is_refused_without_reading_it(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", 2**20)
    big = [sample(i, "C", note="x" * 1000) for i in range(2000)]  # ~2 MB of JSON
    log = write_log(tmp_path / "big.eval", samples=big)
    with pytest.raises(InputError, match=r"big\.eval:summaries\.json: record larger than 1 MiB"):
        read_paths([log])


def test_eval_files_are_found_by_content_beside_jsonl(tmp_path):
    write_log(tmp_path / "logs" / "a.eval", samples=[sample(1, "C")])
    (tmp_path / "logs" / "notes.json").write_text('{"a": 1}')
    found = [p.name for p, _ in find_files([tmp_path / "logs"])]
    assert found == ["a.eval"]
    with pytest.raises(InputError, match="unsupported file type"):
        find_files([tmp_path / "logs" / "notes.json"])


def test_report_counts_skips_in_the_dataset(tmp_path):
    from bayes_dualeval.data.dataset import Dataset

    write_log(tmp_path / "l" / "a.eval", samples=[sample(1, "C"), sample(2, "I"), sample(3, None)])
    write_log(tmp_path / "l" / "b.eval", samples=[sample(1, "I"), sample(2, "C")], model="m2")
    write_log(tmp_path / "l" / "c.eval", status="error", model="m3")
    static, arena, report = read_paths([tmp_path / "l"])
    with pytest.warns(Warning, match="skipped while loading"):
        ds = Dataset.from_tables(static, arena, report=report)
    assert dict(ds.skipped) == {
        "inspect_ai sample without a score": 1,
        "inspect_ai log with status 'error'": 1,
    }
    assert list(ds.models) == ["m1", "m2"]
    assert isinstance(report, ReadReport)


def test_a_json_log_reads_like_an_eval_log():
    (log,) = (FIXTURES / "inspect-json").glob("*.json")
    rows, skipped = rows_of(log)
    assert skipped == []
    assert [
        (r["model_label"], r["sample_index"], r["correct"], r["sample"], r["judge"]) for r in rows
    ] == [("mockllm/model-j", i, 1, 1, "match") for i in (1, 2, 3)]
    assert [p.name for p, _ in find_files([FIXTURES / "inspect-json"])] == [log.name]


def test_a_json_log_over_the_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", 1000)
    log = tmp_path / "big.json"
    log.write_text(
        json.dumps(
            {"version": 2, "status": "success", "eval": {}, "samples": [{"id": "x" * 2000}]}
        )
    )
    with pytest.raises(
        InputError, match=r"big\.json: JSON log larger than .* 'inspect log convert'"
    ):
        read_paths([log])


@needs_zstd
def test_a_corrupt_zstd_member_is_one_line(tmp_path):
    log = tmp_path / "z.eval"
    data = bytearray((LOGS / "inspect-0.eval").read_bytes())
    with zipfile.ZipFile(LOGS / "inspect-0.eval") as zf:
        info = zf.getinfo("summaries.json")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 50
    data[start : start + 64] = bytes(64)
    log.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"z\.eval:summaries\.json: corrupt"):
        read_paths([log])


def test_zstd_logs_without_zstandard_say_what_to_install(monkeypatch):
    import sys

    if hasattr(zipfile, "ZIP_ZSTANDARD"):
        pytest.skip("this Python reads zstd zips itself")
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import fails
    with pytest.raises(
        InputError, match=r"inspect-0\.eval:header\.json: zstd-compressed .*\[harness\]"
    ):
        read_paths([LOGS / "inspect-0.eval"])
