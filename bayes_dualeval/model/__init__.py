"""The statistical model: specifications, inputs, IRT links, priors and likelihood."""
