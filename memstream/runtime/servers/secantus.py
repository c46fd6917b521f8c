"""SecantusDB, the MongoDB-protocol server of ``secantusd-py``: the embedded database."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memstream.runtime.servers.loopback import LOOPBACK, LoopbackServer, port_open

log = logging.getLogger(__name__)


def secantus_command() -> list[str]:
    """SecantusDB's daemon in this interpreter, wrapped so that it does not outlive its parent
    (:mod:`memstream.runtime.servers.secantus_daemon`); else the ``secantusd-py`` launcher on
    PATH, as it is."""
    if importlib.util.find_spec("secantus") is not None:
        return [sys.executable, "-m", "memstream.runtime.servers.secantus_daemon"]
    local = Path(sys.executable).parent / "secantusd-py"
    if local.is_file():
        return [str(local)]
    found = shutil.which("secantusd-py")
    if found:
        return [found]
    raise RuntimeError(
        "the SecantusDB server (secantusd-py) is not installed: pip install 'memstream[embedded]'"
    )


class SecantusServer(LoopbackServer):
    """SecantusDB (MongoDB wire protocol) on 127.0.0.1.

    ``storage_path`` defaults to ``workdir/data``; pass ``":memory:"`` for no persistence.
    After SIGTERM the server needs a few seconds to exit: ``stop()`` waits for it, so the
    folder can be reused at once.
    """

    name = "secantus"
    startup_timeout_default = 30.0
    stop_timeout_default = 20.0

    def __init__(
        self,
        storage_path: str | os.PathLike[str] | None = None,
        *,
        workdir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float | None = None,
        stop_timeout: float | None = None,
    ) -> None:
        self.command_prefix = secantus_command()
        if workdir is None and storage_path is not None and str(storage_path) != ":memory:":
            # Keep the log next to the data rather than in a throwaway folder.
            workdir = Path(storage_path).parent / f"{Path(storage_path).name}.logs"
        super().__init__(
            workdir, port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout
        )
        self.storage_path: str = (
            str(storage_path) if storage_path is not None else str(self.workdir / "data")
        )
        self.extra_args = list(extra_args)

    @property
    def uri(self) -> str:
        return f"mongodb://{self.address}/"

    def _prepare(self) -> None:
        if self.storage_path != ":memory:":
            Path(self.storage_path).mkdir(parents=True, exist_ok=True)

    def _command(self) -> list[str]:
        return [
            *self.command_prefix,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--storage-path",
            self.storage_path,
            *self.extra_args,
        ]

    def _ping(self) -> bool:
        from pymongo import MongoClient

        client: MongoClient[dict[str, Any]] = MongoClient(
            self.uri, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000
        )
        try:
            client.admin.command("ping")
            return True
        except Exception as exc:
            log.debug("secantus ping failed: %r", exc)
            return False
        finally:
            client.close()

    def _is_ready(self) -> bool:
        if b"secantus listening" in self.output():
            return True
        return port_open(self.port) and self._ping()
