"""Test helpers (scripted OpenAI-compatible server, ...)."""
