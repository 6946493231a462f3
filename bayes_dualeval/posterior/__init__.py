"""The fitted posterior: InferenceData, convergence diagnostics, summaries."""
