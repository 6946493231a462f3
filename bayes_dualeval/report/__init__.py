"""The HTML/Markdown report of a run, rendered from its in-memory result.

* :mod:`~bayes_dualeval.report.document`: :func:`~bayes_dualeval.report.document.write_report`
  and ``build``, which write the header and then each panel of the registry in turn;
* :mod:`~bayes_dualeval.report.panels`: the registry ``PANELS`` (section, heading, drawing
  function, figures) and one module per subject (rankings, items, checks, diagnostics, run);
* :mod:`~bayes_dualeval.report.context`: what the panels share (tables, draws, the model);
* :mod:`~bayes_dualeval.report.markup`: HTML and Markdown written side by side;
* :mod:`~bayes_dualeval.report.plots`: the figures, one function each, by subject.
"""
