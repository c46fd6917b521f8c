"""Apache Kafka's jars, fetched once from Maven Central into a cache and checked by sha256.

No Maven: the jars of :data:`memstream.runtime.servers.kafka_lock.KAFKA_JARS` are plain files in any
Maven repository. :func:`fetch_kafka_jars` downloads the missing ones into a temporary folder
beside the target, checks each one's size and sha256 against the lock, and only then moves them
in (the whole folder with one rename when the target does not exist yet), so the target never
holds a partial or unchecked jar. Transient failures (connection errors, timeouts, HTTP 5xx) are
retried with tenacity; a missing file or a checksum mismatch fails at once with what was
expected where.

* the target: ``$MEMSTREAM_KAFKA_LIBS``, else ``$XDG_CACHE_HOME/memstream/kafka-4.1.1``
  (``~/.cache/memstream/kafka-4.1.1``);
* the repository: ``$MEMSTREAM_MAVEN_REPOSITORY`` (a mirror; ``file://`` works too), else
  https://repo1.maven.org/maven2.

``python -m memstream.runtime.servers.kafka_jars [--target DIR]`` fetches them
(``tools/kafka/fetch.sh``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from memstream.runtime.servers.kafka_lock import KAFKA_JARS, KAFKA_VERSION, Jar

__all__ = [
    "DEFAULT_REPOSITORY",
    "KafkaJarsError",
    "default_kafka_libs_dir",
    "fetch_kafka_jars",
    "kafka_jars_size",
    "missing_jars",
]

DEFAULT_REPOSITORY = "https://repo1.maven.org/maven2"
REPOSITORY_ENV = "MEMSTREAM_MAVEN_REPOSITORY"
LIBS_ENV = "MEMSTREAM_KAFKA_LIBS"
_CHUNK = 1 << 16

Progress = Callable[[Jar, int, int], None]
"""Called after each jar: the jar, how many are done, how many were missing."""


class KafkaJarsError(RuntimeError):
    """The Kafka jars could not be fetched or did not match the lock."""


class _Permanent(KafkaJarsError):
    """Not worth retrying: the file is not there, or it is not the file the lock names."""


def default_kafka_libs_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$MEMSTREAM_KAFKA_LIBS``, else the user's cache (``…/memstream/kafka-4.1.1``)."""
    environ = os.environ if environ is None else environ
    override = environ.get(LIBS_ENV)
    if override:
        return Path(override).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "memstream" / f"kafka-{KAFKA_VERSION}"


def kafka_jars_size(jars: Sequence[Jar] = KAFKA_JARS) -> int:
    """Bytes a fetch of every jar downloads."""
    return sum(jar.size for jar in jars)


def missing_jars(folder: Path, jars: Sequence[Jar] = KAFKA_JARS) -> list[Jar]:
    """The jars `folder` lacks (a file of the wrong size counts as missing).

    Only sizes are compared here: every jar was checked by sha256 before it was moved in.
    """
    missing = []
    for jar in jars:
        try:
            if (folder / jar.filename).stat().st_size == jar.size:
                continue
        except OSError:
            pass
        missing.append(jar)
    return missing


def fetch_kafka_jars(
    target: Path | None = None,
    *,
    repository: str | None = None,
    jars: Sequence[Jar] = KAFKA_JARS,
    attempts: int = 4,
    timeout: float = 60.0,
    progress: Progress | None = None,
) -> Path:
    """Make `target` (default :func:`default_kafka_libs_dir`) hold every jar; returns it.

    Does nothing when they are all there already (no request is made).
    """
    target = target if target is not None else default_kafka_libs_dir()
    missing = missing_jars(target, jars)
    if not missing:
        return target
    base = (repository or os.environ.get(REPOSITORY_ENV) or DEFAULT_REPOSITORY).rstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        for done, jar in enumerate(missing, start=1):
            _download(f"{base}/{jar.path}", jar, partial / jar.filename, attempts, timeout)
            if progress is not None:
                progress(jar, done, len(missing))
        if not target.exists():
            with contextlib.suppress(OSError):  # another process may have won the race
                partial.rename(target)
        if partial.exists():
            target.mkdir(parents=True, exist_ok=True)
            for path in partial.iterdir():
                os.replace(path, target / path.name)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    still = missing_jars(target, jars)
    if still:  # pragma: no cover - only if something else writes the folder meanwhile
        raise KafkaJarsError(f"{target} still lacks {', '.join(j.filename for j in still)}")
    return target


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, _Permanent):
        return False
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code in (408, 429)
    if isinstance(exc, urllib.error.URLError):
        return not isinstance(exc.reason, FileNotFoundError)
    return isinstance(exc, OSError | TimeoutError)


def _download(url: str, jar: Jar, destination: Path, attempts: int, timeout: float) -> None:
    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=0.5, max=8),
        retry=retry_if_exception(_transient),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                _download_once(url, jar, destination, timeout)
    except KafkaJarsError:
        raise
    except urllib.error.HTTPError as exc:
        raise KafkaJarsError(
            f"cannot fetch {jar.filename}: {url} answered HTTP {exc.code} {exc.reason} "
            f"(set {REPOSITORY_ENV} to a Maven mirror, or {LIBS_ENV} to a folder holding the jars)"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise KafkaJarsError(
            f"cannot fetch {jar.filename} from {url} after {attempts} attempts: {exc} "
            f"(offline? set {REPOSITORY_ENV} to a Maven mirror, or {LIBS_ENV} to a folder "
            "holding the jars)"
        ) from exc


def _download_once(url: str, jar: Jar, destination: Path, timeout: float) -> None:
    digest = hashlib.sha256()
    size = 0
    try:
        with (
            urllib.request.urlopen(url, timeout=timeout) as response,
            destination.open("wb") as output,
        ):
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                output.write(chunk)
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    if size != jar.size or digest.hexdigest() != jar.sha256:
        destination.unlink(missing_ok=True)
        raise _Permanent(
            f"{jar.filename} from {url} is not the pinned file: got {size} bytes with sha256 "
            f"{digest.hexdigest()}, expected {jar.size} bytes with sha256 {jar.sha256} "
            "(a mirror serving other bytes? nothing was written to the jar folder)"
        )


def _print_progress(started: float) -> Progress:
    def report(jar: Jar, done: int, total: int) -> None:
        print(
            f"  [{done}/{total}] {jar.filename} ({jar.size / 1e6:.1f} MB, "
            f"{time.monotonic() - started:.1f}s)",
            file=sys.stderr,
            flush=True,
        )

    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memstream.runtime.servers.kafka_jars",
        description=f"Fetch Apache Kafka {KAFKA_VERSION}'s jars (sha256-pinned) into a folder.",
    )
    parser.add_argument("--target", type=Path, default=None, help="default: the user's cache")
    args = parser.parse_args(argv)
    target = args.target if args.target is not None else default_kafka_libs_dir()
    missing = missing_jars(target)
    if not missing:
        print(f"kafka jars already present in {target}")
        return 0
    size = kafka_jars_size(missing)
    print(
        f"fetching {len(missing)} Apache Kafka {KAFKA_VERSION} jars ({size / 1e6:.0f} MB) into "
        f"{target} …",
        file=sys.stderr,
        flush=True,
    )
    started = time.monotonic()
    try:
        fetch_kafka_jars(target, progress=_print_progress(started))
    except KafkaJarsError as exc:
        print(f"kafka_jars: {exc}", file=sys.stderr)
        return 1
    print(f"kafka jars in {target} ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
