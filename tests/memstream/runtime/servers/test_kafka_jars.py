"""The Kafka jar lock and fetcher, against a local repository (files and a loopback HTTP server)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memstream.runtime.servers.kafka_jars import (
    KafkaJarsError,
    default_kafka_libs_dir,
    fetch_kafka_jars,
    missing_jars,
)
from memstream.runtime.servers.kafka_lock import KAFKA_JARS, KAFKA_VERSION, Jar


def jar_of(artifact: str, content: bytes) -> Jar:
    return Jar("org.example", artifact, "1.0", hashlib.sha256(content).hexdigest(), len(content))


CONTENTS = {"alpha": b"alpha jar bytes", "beta": b"beta jar bytes, a little longer"}
JARS = [jar_of(name, content) for name, content in CONTENTS.items()]


def repository(root: Path, contents: dict[str, bytes]) -> Path:
    """A Maven-layout folder holding `contents` for the JARS' coordinates."""
    for jar in JARS:
        path = root / jar.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(contents[jar.artifact])
    return root


class Served:
    """A loopback HTTP server over a repository folder that counts requests and can fail."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        self.fail_next: list[int] = []  # status codes to answer before serving the files
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests.append(self.path)
                if served.fail_next:
                    self.send_error(served.fail_next.pop(0))
                    return
                path = served.root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_error(404)
                    return
                body = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(repository(tmp_path / "repo", CONTENTS))
    yield server
    server.close()


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".partial-" in p.name]


def test_the_lock_pins_kafka_and_its_46_runtime_jars_by_sha256() -> None:
    assert len(KAFKA_JARS) == 46
    assert len({jar.filename for jar in KAFKA_JARS}) == 46
    assert any(jar.filename == f"kafka_2.13-{KAFKA_VERSION}.jar" for jar in KAFKA_JARS)
    assert all(len(jar.sha256) == 64 and int(jar.sha256, 16) >= 0 for jar in KAFKA_JARS)
    kafka = next(j for j in KAFKA_JARS if j.artifact == "kafka-clients")
    assert kafka.path == "org/apache/kafka/kafka-clients/4.1.1/kafka-clients-4.1.1.jar"


def test_a_fetch_from_a_file_repository_moves_every_checked_jar_into_a_new_folder(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path / "repo", CONTENTS)
    target = tmp_path / "cache" / "kafka"
    assert fetch_kafka_jars(target, repository=repo.as_uri(), jars=JARS) == target
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {
        "alpha-1.0.jar": CONTENTS["alpha"],
        "beta-1.0.jar": CONTENTS["beta"],
    }
    assert missing_jars(target, JARS) == []
    assert leftovers(target.parent) == []


def test_a_complete_cache_is_used_without_a_request(served: Served, tmp_path: Path) -> None:
    target = tmp_path / "cache"
    fetch_kafka_jars(target, repository=served.url, jars=JARS)
    assert len(served.requests) == 2
    fetch_kafka_jars(target, repository=served.url, jars=JARS)
    assert len(served.requests) == 2


def test_only_the_missing_or_truncated_jars_are_fetched(served: Served, tmp_path: Path) -> None:
    target = tmp_path / "cache"
    target.mkdir()
    (target / "alpha-1.0.jar").write_bytes(CONTENTS["alpha"])
    (target / "beta-1.0.jar").write_bytes(b"beta")  # cut short
    (target / "unrelated.txt").write_text("kept")
    fetch_kafka_jars(target, repository=served.url, jars=JARS)
    assert served.requests == [f"/{JARS[1].path}"]
    assert (target / "beta-1.0.jar").read_bytes() == CONTENTS["beta"]
    assert (target / "unrelated.txt").read_text() == "kept"


def test_a_checksum_mismatch_fails_clearly_and_writes_nothing(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo", {**CONTENTS, "beta": b"beta jar bytes, a little LONGER"})
    target = tmp_path / "cache" / "kafka"
    with pytest.raises(KafkaJarsError) as info:
        fetch_kafka_jars(target, repository=repo.as_uri(), jars=JARS)
    message = str(info.value)
    assert "beta-1.0.jar" in message and JARS[1].sha256 in message
    assert "nothing was written" in message
    assert not target.exists()  # not even the good first jar
    assert leftovers(target.parent) == []


def test_a_missing_file_fails_at_once_naming_the_url(served: Served, tmp_path: Path) -> None:
    (served.root / JARS[0].path).unlink()
    with pytest.raises(KafkaJarsError) as info:
        fetch_kafka_jars(tmp_path / "cache", repository=served.url, jars=JARS)
    assert "HTTP 404" in str(info.value) and JARS[0].path in str(info.value)
    assert "MEMSTREAM_MAVEN_REPOSITORY" in str(info.value)
    assert len(served.requests) == 1  # not retried
    assert not (tmp_path / "cache").exists()


def test_a_server_error_is_retried(served: Served, tmp_path: Path) -> None:
    served.fail_next = [503]
    fetch_kafka_jars(tmp_path / "cache", repository=served.url, jars=JARS)
    assert len(served.requests) == 3  # one 503, then both jars
    assert missing_jars(tmp_path / "cache", JARS) == []


def test_an_unreachable_repository_fails_after_the_attempts(tmp_path: Path) -> None:
    with pytest.raises(KafkaJarsError) as info:
        fetch_kafka_jars(tmp_path / "cache", repository="http://127.0.0.1:9", jars=JARS, attempts=2)
    assert "after 2 attempts" in str(info.value)


def test_the_jars_are_cached_per_user_unless_a_folder_is_named(tmp_path: Path) -> None:
    assert default_kafka_libs_dir({"MEMSTREAM_KAFKA_LIBS": str(tmp_path / "libs")}) == (
        tmp_path / "libs"
    )
    assert default_kafka_libs_dir({"XDG_CACHE_HOME": str(tmp_path)}) == (
        tmp_path / "memstream" / f"kafka-{KAFKA_VERSION}"
    )
    assert default_kafka_libs_dir({}) == (
        Path.home() / ".cache" / "memstream" / f"kafka-{KAFKA_VERSION}"
    )
