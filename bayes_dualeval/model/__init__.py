"""The statistical model: specifications, inputs, IRT links, priors, likelihood, simulator."""
