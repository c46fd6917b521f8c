"""Which of the chosen brokers a test runs on, for tests whose subject is not the broker."""

from __future__ import annotations

import pytest


def chosen_brokers(config: pytest.Config) -> list[str]:
    return [name.strip() for name in config.getoption("--brokers").split(",")]


def only_on_the_first_broker(config: pytest.Config, flavour: str, why: str) -> None:
    """Skip unless `flavour` is the first broker chosen with `--brokers`: for a test whose
    subject behaves the same on every broker and costs minutes per run (`why` says so)."""
    first = chosen_brokers(config)[0]
    if flavour != first:
        pytest.skip(f"run on {first} only: {why}")


def only_on_the_durable_broker(config: pytest.Config, flavour: str, why: str) -> None:
    """Skip unless `flavour` is Apache Kafka (the broker production runs), or, when it was not
    chosen, the first broker chosen."""
    chosen = chosen_brokers(config)
    kept = "apache" if "apache" in chosen else chosen[0]
    if flavour != kept:
        pytest.skip(f"run on {kept} only: {why}")
