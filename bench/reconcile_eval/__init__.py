"""Labelled evaluation of reconciliation: memory pairs, thresholds, and the LLM band."""
