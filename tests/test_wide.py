"""Wide response matrices: one row per model, one 0/1 column per question."""

import numpy as np
import pandas as pd
import pytest

from bayes_dualeval import load
from bayes_dualeval.core.errors import InputError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_wide_matrix_gives_the_dataset_its_long_form_gives(tmp_path):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=(5, 7)).astype(float)
    y[rng.random(y.shape) < 0.2] = np.nan
    models = [f"m{k}" for k in range(5)]
    wide = pd.DataFrame(y, columns=[str(q) for q in range(7)])
    wide.insert(0, "model_label", models)
    write(tmp_path / "wide" / "chem" / "quiz.csv", wide.to_csv(index=False, float_format="%g"))
    long = wide.melt("model_label", var_name="sample_index", value_name="correct").dropna()
    long["dataset"] = "quiz"
    long["correct"] = long["correct"].astype(int)
    write(tmp_path / "long" / "chem" / "quiz.csv", long.to_csv(index=False))
    a, b = load(tmp_path / "wide" / "chem"), load(tmp_path / "long" / "chem")
    assert a.items.tolist() == b.items.tolist()
    assert a.items[0].startswith("chem::quiz_")
    pd.testing.assert_frame_equal(
        a.static_frame().sort_values(["model", "item"]).reset_index(drop=True),
        b.static_frame().sort_values(["model", "item"]).reset_index(drop=True),
        check_categorical=False,
    )
    assert len(a.static_y) == int((~np.isnan(y)).sum())


def test_wide_matrix_values_and_errors(tmp_path):
    ok = write(tmp_path / "a" / "b.csv", "model,q1,q2\nm1,1,0\nm2, 1.0 ,\nm3,0,1\n")
    ds = load(ok)
    assert len(ds.static_y) == 5 and ds.items.tolist() == ["a::b_q1", "a::b_q2"]
    bad = write(tmp_path / "c" / "d.csv", "model_label,q1,q2\nm1,1,0\nm2,2,1\n")
    with pytest.raises(InputError, match=r"d.csv:3: column 'q1': correct must be 0 or 1.*got '2'"):
        load(bad)
    text = write(tmp_path / "e" / "f.csv", "model_label,q1,q2\nm1,1,0\nm2,1,yes\n")
    with pytest.raises(InputError, match=r"f.csv:3: column 'q2'.*got 'yes'"):
        load(text)
    with pytest.warns(Warning, match="invalid correct"):
        ds = load([bad, ok], skip_invalid=True)
    assert ds.skipped["invalid correct"] == 1
    twice = write(tmp_path / "g" / "h.csv", "model_label,q1,q1\nm1,1,0\nm2,0,1\n")
    with pytest.raises(InputError, match="column 'q1' appears twice"):
        load(twice)
    nameless = write(tmp_path / "i" / "j.csv", "model_label,q1\nm1,1\n,0\n")
    with pytest.raises(InputError, match="j.csv:3: the model label is empty"):
        load(nameless)


def test_a_long_file_with_a_model_column_is_not_mistaken_for_a_matrix(tmp_path):
    long = write(tmp_path / "s" / "x.csv", "model_label,dataset,sample_index,correct\n"
                 "m1,d,0,1\nm2,d,0,0\n")  # fmt: skip
    assert load(long).items.tolist() == ["s::d_0"]


def test_a_model_row_given_twice_keeps_the_later_cells(tmp_path):
    path = write(tmp_path / "a" / "b.csv", "model_label,q1,q2\nm1,1,0\nm2,0,0\nm1,0,\n")
    with pytest.warns(Warning, match="duplicate"):
        ds = load(path)
    cells = ds.static_frame().set_index(["model", "item"])["correct"]
    assert cells[("m1", "a::b_q1")] == 0 and cells[("m1", "a::b_q2")] == 0
    assert ds.skipped["duplicate (model, item)"] == 1
