"""Extraction: one extractor per memory type, each prompting the LLM for its own knowledge."""
