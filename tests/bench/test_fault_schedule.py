"""The long fault profile's schedule (`python -m bench.fault.run`)."""

from __future__ import annotations

import random

from bench.fault.run import schedule


def kinds(chosen: list[object]) -> list[str]:
    return [getattr(fault, "__qualname__", "").split(".")[0] for fault in chosen]


def test_with_two_workers_per_stage_any_worker_is_killed_and_one_is_added_and_one_removed() -> None:
    chosen = kinds(schedule(random.Random(7), 16, broker_restart=True, workers_per_stage=2))
    assert chosen.count("add_worker") == 1 and chosen.count("remove_worker") == 1
    assert chosen.count("kill_any_worker") == 11 and "kill_stage" not in chosen
    assert chosen.count("broker_restart") == 1


def test_with_one_worker_per_stage_the_killed_stage_is_started_again() -> None:
    chosen = kinds(schedule(random.Random(7), 16, broker_restart=False))
    assert chosen.count("kill_stage") == 11 and "add_worker" not in chosen
    assert "broker_restart" not in chosen
