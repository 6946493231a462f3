"""Reading responses at scale: wide and long, CSV and Parquet, the same labels.

Writes a random models x questions matrix (a share of the cells empty) as a wide CSV, as a
long static Parquet file (``model_label, dataset, sample_index, correct``) and as a wide
Parquet file, and, for the long CSV baseline, a smaller matrix as a long static CSV; then
times ``bayes_dualeval.load`` on each in this process (data loading and validation into a
``Dataset``) and prints seconds per million labels and the ratios. Peak memory is a whole
process's: run ``/usr/bin/time -v bayes-dualeval check DIR`` on the folders it leaves with
``--keep``. The Parquet cases need pyarrow (``pip install 'bayes-dualeval[parquet]'``).

Usage::

    python scripts/benchmarks/input_benchmark.py             # 1,000 x 20,000; long CSV 200 x 5,000
    python scripts/benchmarks/input_benchmark.py --models 300 --questions 2000 --keep /tmp/inputs
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def write_wide(path: Path, y: np.ndarray, missing: np.ndarray) -> None:
    """The matrix as a wide CSV (``model_label`` then ``q0``, ``q1``, ...)."""
    text = np.where(missing, "", np.where(y == 1, "1", "0"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write("model_label," + ",".join(f"q{k}" for k in range(y.shape[1])) + "\n")
        for i, row in enumerate(text):
            fh.write(f"model-{i:05d}," + ",".join(row) + "\n")


def write_long(path: Path, y: np.ndarray, missing: np.ndarray) -> None:
    """The same labels as a long static CSV."""
    path.parent.mkdir(parents=True, exist_ok=True)
    i, q = np.nonzero(~missing)
    with path.open("w") as fh:
        fh.write("model_label,dataset,sample_index,correct\n")
        for a, b, v in zip(i.tolist(), q.tolist(), y[i, q].tolist(), strict=True):
            fh.write(f"model-{a:05d},matrix,{b},{v}\n")


def write_parquet_long(path: Path, y: np.ndarray, missing: np.ndarray) -> None:
    """The labels as a long static Parquet file, labels dictionary-encoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    i, q = np.nonzero(~missing)
    names = pa.array([f"model-{a:05d}" for a in range(y.shape[0])])
    table = pa.table(
        {
            "model_label": pa.DictionaryArray.from_arrays(pa.array(i.astype(np.int32)), names),
            "dataset": pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(len(i), np.int32)), pa.array(["matrix"])
            ),
            "sample_index": pa.array(q.astype(np.int64)),
            "correct": pa.array(y[i, q].astype(np.int8)),
        }
    )
    pq.write_table(table, path)


def write_parquet_wide(path: Path, y: np.ndarray, missing: np.ndarray) -> None:
    """The matrix as a wide Parquet file: int8 columns, null where not answered."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {"model_label": pa.array([f"model-{a:05d}" for a in range(y.shape[0])])}
    for k in range(y.shape[1]):
        columns[f"q{k}"] = pa.array(y[:, k], mask=missing[:, k])
    pq.write_table(pa.table(columns), path)


def timed_load(folder: Path) -> tuple[float, int]:
    from bayes_dualeval import load

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load(folder)
    return time.perf_counter() - start, len(ds.static_y)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=20000)
    parser.add_argument("--long-models", type=int, default=200)
    parser.add_argument("--long-questions", type=int, default=5000)
    parser.add_argument("--missing", type=float, default=0.5)
    parser.add_argument("--keep", type=Path, default=None, help="leave the files here")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="bayes-dualeval-inputs-"))
    rows = []
    writers = {
        "wide": (write_wide, "csv"),
        "long": (write_long, "csv"),
        "parquet-long": (write_parquet_long, "parquet"),
        "parquet-wide": (write_parquet_wide, "parquet"),
    }
    for label, m, q in (
        ("wide", args.models, args.questions),
        ("parquet-long", args.models, args.questions),
        ("parquet-wide", args.models, args.questions),
        ("wide (long's size)", args.long_models, args.long_questions),
        ("long", args.long_models, args.long_questions),
    ):
        y = (np.random.default_rng([m, q]).random((m, q)) < 0.5).astype(np.int8)
        missing = np.random.default_rng([m, q, 1]).random((m, q)) < args.missing
        folder = root / label.split()[0] / f"{m}x{q}" / "matrix"
        writer, suffix = writers[label.split()[0]]
        writer(folder / f"matrix.{suffix}", y, missing)
        seconds, labels = timed_load(folder)
        rows.append((label, m, q, labels, seconds, seconds / labels * 1e6))
        print(f"{label:>20}: {m:,} x {q:,}, {labels:,} labels, {seconds:.1f} s "
              f"({seconds / labels * 1e6:.2f} s per million labels)", flush=True)  # fmt: skip
    per = {label: s for label, *_, s in rows}
    print(f"long CSV / wide CSV, same labels: {per['long'] / per[rows[3][0]]:.1f}x")
    print(f"Parquet long / wide CSV, per label: {per['parquet-long'] / per['wide']:.2f}x")
    print(f"Parquet wide / wide CSV, per label: {per['parquet-wide'] / per['wide']:.2f}x")
    print(f"files under {root}")


if __name__ == "__main__":
    main()
