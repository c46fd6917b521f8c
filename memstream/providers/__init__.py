"""The LLM and embedder clients built from settings (`clients`), and the local embedder
(`local_embedder`). Nothing is imported here, so the local embedder comes without `openai`."""
