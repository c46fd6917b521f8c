"""The `memstream` command: one module per group of verbs."""
