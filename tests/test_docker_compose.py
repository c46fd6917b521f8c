"""`docker-compose.kafka.yml`: one service per stage, each scalable, all wired to the same
Kafka and MongoDB. Docker does not run on the machines this suite runs on, so the file is
checked for what the stages need, not started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from memstream.config import load_settings
from memstream.runtime.pipeline import pipeline_stages

COMPOSE = Path(__file__).parent.parent / "docker-compose.kafka.yml"


def services() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def test_every_stage_has_a_service_of_its_own_with_replicas() -> None:
    stages = pipeline_stages(load_settings(environ={"MEMSTREAM_CONFIG": "/dev/null"}))
    by_stage = {
        service["command"][-1]: name
        for name, service in services().items()
        if service.get("command", [])[:3] == ["memstream", "worker", "--stage"]
    }
    assert sorted(by_stage) == sorted(stages)
    for name in by_stage.values():
        assert services()[name]["deploy"]["replicas"] >= 1


def test_every_memstream_service_reaches_the_same_kafka_and_mongodb() -> None:
    for name, service in services().items():
        if name in ("kafka", "mongodb"):
            continue
        environment = service["environment"]
        assert environment["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092", name
        assert environment["MONGODB_URI"] == "mongodb://mongodb:27017", name
        assert set(service["depends_on"]) == {"kafka", "mongodb"}, name
