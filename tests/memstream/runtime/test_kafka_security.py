"""memstream on a secured Kafka: Apache Kafka 4.1.1 with a SASL_SSL listener (SCRAM users made at
format time, certificates made by the test) and an SSL listener that requires a client
certificate. Every client memstream makes connects through the same settings; a wrong password,
an untrusted certificate or a wrong host name ends the process with a sentence naming the
setting, never a silent hang.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memstream.cli.replay import kafka_events
from memstream.config import load_settings
from memstream.runtime.topics import ensure_topics
from memstream.sdk.client import MemoryClient
from streams.kafka_security import KafkaAccessError, KafkaSecurity, check_broker
from tests.factories import STRIPE_FACTS
from tests.support.documentation import documented_example
from tests.support.pipeline import PipelineHarness, eventually
from tests.support.scripted_llm import ScriptedLLM
from tests.support.secured_kafka import PLAIN_USERS, SecuredKafka, secured_kafka, unsecured_token

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredKafka]:
    if "apache" not in request.config.getoption("--brokers"):
        pytest.skip("the secured listeners are Apache Kafka's (run with --brokers ...,apache)")
    with secured_kafka(tmp_path_factory.mktemp("secured-kafka")) as kafka:
        yield kafka


def settings_for(environment: dict[str, str]) -> Any:
    run = uuid.uuid4().hex[:8]
    return load_settings(
        Path(os.devnull),
        {
            "MEMSTREAM_SEAL_CONTENT": "false",  # no database here for the data keys
            **environment,
            "MEMSTREAM_TOPIC_PREFIX": f"sec{run}.",
            "MEMSTREAM_PARTITIONS": "2",
        },
    )


def test_the_whole_pipeline_runs_over_sasl_ssl_with_scram(
    secured: SecuredKafka, mongo: Any, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    """The stages (Faust), the SDK producer, the admin client and replay all log in."""
    scripted_llm.on("Stripe", STRIPE_FACTS, scope="last_user")
    broker = SimpleNamespace(flavour="apache", bootstrap_servers=secured.sasl_ssl)
    run = uuid.uuid4().hex[:10]
    environment = secured.environment()
    environment.pop("KAFKA_BOOTSTRAP_SERVERS")
    pipeline = PipelineHarness(
        broker=broker,
        mongo_uri=mongo.uri,
        llm=scripted_llm,
        run_id=run,
        log_dir=tmp_path / f"logs-{run}",
        environment=environment,
    ).start()
    try:
        pipeline.record("gus", "s1", [{"role": "user", "content": "I work at Stripe."}])
        pipeline.flush("gus", "s1")
        (memory,) = eventually(
            lambda: pipeline.memories(user_id="gus"),
            lambda found: len(found) == 1,
            timeout=120,
            what="the memory learned over SASL_SSL",
        )
        assert memory["text"] == "The user works at Stripe."
        logged = list(kafka_events(pipeline.settings.kafka, keys=pipeline.key_ring()))
        read = {type(entry.event).__name__ for entry in logged}
        assert {"TurnRecorded", "SnapshotPromoted", "SnapshotExtracted"} <= read
    finally:
        pipeline.stop()


@pytest.mark.parametrize(
    "mechanism, user, password",
    [
        ("SCRAM-SHA-256", "alice", "alice-secret"),
        ("SCRAM-SHA-512", "alice", "alice-secret"),
        ("PLAIN", "plainuser", PLAIN_USERS["plainuser"]),
    ],
)
def test_each_sasl_mechanism_logs_in(
    secured: SecuredKafka, mechanism: str, user: str, password: str
) -> None:
    settings = settings_for(
        secured.environment(
            KAFKA_SASL_MECHANISM=mechanism, KAFKA_SASL_USERNAME=user, KAFKA_SASL_PASSWORD=password
        )
    )
    partitions = asyncio.run(ensure_topics(settings.kafka))
    assert set(partitions) == set(settings.kafka.topics.all())


def test_a_client_certificate_opens_a_listener_that_requires_one(secured: SecuredKafka) -> None:
    certificates = secured.certificates
    settings = settings_for(
        {
            "KAFKA_BOOTSTRAP_SERVERS": secured.mutual_tls,
            "KAFKA_SECURITY_PROTOCOL": "SSL",
            "KAFKA_SSL_CAFILE": str(certificates.ca),
            "KAFKA_SSL_CERTFILE": str(certificates.client_cert),
            "KAFKA_SSL_KEYFILE": str(certificates.client_key),
        }
    )

    async def record() -> int:
        async with MemoryClient(settings) as client:
            turns = await client.record("ann", "s", [{"role": "user", "content": "hello"}])
            return len(turns)

    assert asyncio.run(record()) == 1


def test_the_sdk_names_the_password_setting_when_the_login_is_refused(
    secured: SecuredKafka,
) -> None:
    settings = settings_for(secured.environment(KAFKA_SASL_PASSWORD="wrong"))

    async def record() -> None:
        async with MemoryClient(settings) as client:
            await client.record("ann", "s", [{"role": "user", "content": "hello"}])

    started = time.monotonic()
    with pytest.raises(KafkaAccessError, match="KAFKA_SASL_PASSWORD") as refused:
        asyncio.run(record())
    assert refused.value.refused and "invalid credentials" in str(refused.value)
    assert time.monotonic() - started < 60


def test_an_untrusted_certificate_names_the_ca_setting(secured: SecuredKafka) -> None:
    security = KafkaSecurity(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password="alice-secret",
        ssl_cafile=str(secured.certificates.stranger_ca),
    )
    with pytest.raises(KafkaAccessError, match=r"not trusted.*KAFKA_SSL_CAFILE"):
        asyncio.run(check_broker(secured.sasl_ssl, security, timeout=10))


def test_a_certificate_for_another_host_names_the_hostname_setting(
    secured: SecuredKafka,
) -> None:
    security = KafkaSecurity(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="alice",
        sasl_password="alice-secret",
        ssl_cafile=str(secured.certificates.ca),
    )
    port = secured.sasl_ssl.rsplit(":", 1)[1]
    with pytest.raises(KafkaAccessError, match=r"not name this host.*KAFKA_SSL_CHECK_HOSTNAME"):
        asyncio.run(check_broker(f"localhost:{port}", security, timeout=10))
    unchecked = dataclasses.replace(security, ssl_check_hostname=False)
    asyncio.run(check_broker(f"localhost:{port}", unchecked, timeout=10))


def test_a_worker_refused_by_the_broker_exits_with_the_setting_named(
    secured: SecuredKafka, tmp_path: Path
) -> None:
    config = tmp_path / "empty.yaml"
    config.write_text("# settings come from the environment\n")
    environment = {
        **secured.environment(KAFKA_SASL_PASSWORD="wrong"),
        "MEMSTREAM_CONFIG": str(config),
        "MONGODB_URI": "mongodb://127.0.0.1:1",
        "MEMSTREAM_TOPIC_PREFIX": f"sec{uuid.uuid4().hex[:8]}.",
        "PATH": "/usr/bin:/bin",
    }
    worker = subprocess.run(
        [sys.executable, "-m", "memstream", "worker", "--stage", "window"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 2, worker.stderr[-2_000:]
    assert "Kafka refused it" in worker.stderr and "KAFKA_SASL_PASSWORD" in worker.stderr


def test_the_documented_librdkafka_producer_logs_in_with_the_same_settings(
    secured: SecuredKafka,
) -> None:
    """docs/producers.md's confluent-kafka block, given the workers' environment, writes turns over
    SASL_SSL that memstream's own (aiokafka) consumer reads back."""
    settings = settings_for(secured.environment())
    asyncio.run(ensure_topics(settings.kafka))
    environment = {
        **os.environ,
        **secured.environment(),
        "MEMSTREAM_TOPIC_PREFIX": settings.kafka.topic_prefix,
    }
    produced = subprocess.run(
        [sys.executable, "-c", documented_example("librdkafka-producer")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert produced.returncode == 0, produced.stderr
    logged = kafka_events(settings.kafka)
    kinds = [type(entry.event).__name__ for entry in logged]
    assert kinds.count("TurnRecorded") == 2 and kinds.count("SessionFlushRequested") == 1


def test_oauthbearer_sends_the_token_of_its_file_and_a_stale_one_is_refused(
    secured: SecuredKafka, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(unsecured_token("memstream") + "\n")
    settings = settings_for(
        secured.environment(
            KAFKA_SASL_MECHANISM="OAUTHBEARER", KAFKA_SASL_OAUTH_TOKEN_FILE=str(token)
        )
    )
    asyncio.run(check_broker(secured.sasl_ssl, settings.kafka.security, timeout=10))
    assert set(asyncio.run(ensure_topics(settings.kafka))) == set(settings.kafka.topics.all())
    token.write_text(unsecured_token("memstream", lifetime=-60))
    with pytest.raises(KafkaAccessError, match="KAFKA_SASL_OAUTH_TOKEN_FILE"):
        asyncio.run(check_broker(secured.sasl_ssl, settings.kafka.security, timeout=10))
