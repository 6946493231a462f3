"""Data: evaluation files in, a validated :class:`~bayes_dualeval.data.dataset.Dataset` out.

- :mod:`~bayes_dualeval.data.readers`: file discovery and JSONL and CSV files
  (:func:`~bayes_dualeval.data.readers.read_paths`).
- :mod:`~bayes_dualeval.data.rows`: one row's kind, fields and record
  (:func:`~bayes_dualeval.data.rows.parse_rows`), shared by every reader.
- :mod:`~bayes_dualeval.data.harness`: what evaluation harnesses write (inspect_ai logs,
  lm-evaluation-harness samples, HELM runs, AlpacaEval, Arena-Hard and MT-Bench judgments), one
  module per harness, recognised by content and read as the same rows.
- :mod:`~bayes_dualeval.data.values`: one field's checks and conversion, shared by every
  reader.
- :mod:`~bayes_dualeval.data.parquet`: Parquet files (optional pyarrow), the same rules
  applied by column (:mod:`~bayes_dualeval.data.columns`: one check per distinct value).
- :mod:`~bayes_dualeval.data.tables`: rows to canonical tables, cleaning, indexing and
  reward normalisation (:func:`~bayes_dualeval.data.tables.normalise_rewards`);
  :mod:`~bayes_dualeval.data.cells`: the cells of repeated answers and judges, and
  duplicates.
- :mod:`~bayes_dualeval.data.dataset`: the :class:`~bayes_dualeval.data.dataset.Dataset`;
  :mod:`~bayes_dualeval.data.load`: :func:`~bayes_dualeval.data.load.load` (files and a
  families file); :mod:`~bayes_dualeval.data.summary`: what a dataset holds, counted.
- :mod:`~bayes_dualeval.data.distill`: arena rewards to soft-labelled pairs
  (:func:`~bayes_dualeval.data.distill.distill`).
"""
