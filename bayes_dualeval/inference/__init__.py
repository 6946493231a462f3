"""Fitting: NUTS, SVI and the posterior mode, and where JAX runs."""
