"""Running the pipeline: infrastructure, stage workers, supervision, the local LLM and embedder."""
