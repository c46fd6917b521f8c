"""Benchmark suites: each module has `run(context) -> SuiteResult` (see bench/core.py)."""
