"""Low-level helpers every stage may use: the layer below ``data/``.

* :mod:`~bayes_dualeval.core.errors`: the exceptions and warnings the user sees;
* :mod:`~bayes_dualeval.core.fields`: settings declared once in dataclass field metadata;
* :mod:`~bayes_dualeval.core.atomic`: files written so that a failure leaves none half-written;
* :mod:`~bayes_dualeval.core.thinning`: evenly spaced subsets of posterior draws;
* :mod:`~bayes_dualeval.core.item_ids`: the ``<source>::<name>`` item ids, built and parsed;
* :mod:`~bayes_dualeval.core.grouping`: sums by group (a sparse grouping matrix).

Nothing here imports another stage of the package.
"""
