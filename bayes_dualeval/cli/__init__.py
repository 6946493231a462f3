"""The ``bayes-dualeval`` command line."""
