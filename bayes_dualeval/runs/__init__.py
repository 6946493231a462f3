"""A fit from data to a run folder, and back.

* :mod:`~bayes_dualeval.runs.fit`: :func:`~bayes_dualeval.runs.fit.fit` and its in-memory
  :class:`~bayes_dualeval.runs.fit.FitResult`; the staged, atomic run folder;
* :mod:`~bayes_dualeval.runs.output`: the checks and tables computed once per result
  (``tabulate``), the CSV files, the report (``write``, ``rewrite``) and the terminal table;
* :mod:`~bayes_dualeval.runs.load`: a run folder read back into a ``FitResult``.
"""
