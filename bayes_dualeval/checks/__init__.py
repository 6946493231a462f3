"""Posterior predictive checks, item and cell audits, planted-fault studies."""
