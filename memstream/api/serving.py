"""Running the API under uvicorn: in the foreground (`memstream serve`) or in a thread of the
process that runs the pipeline (`memstream up` with `http.port`, tests, the benchmark)."""

from __future__ import annotations

import threading
import time
from types import TracebackType

import uvicorn

from memstream.api.app import create_app
from memstream.config import Settings


def serve(settings: Settings, host: str, port: int) -> None:
    """Serve the API until interrupted."""
    uvicorn.run(create_app(settings), host=host, port=port, log_level="warning")


class ApiServer:
    """The API served by uvicorn in a background thread (`port=0`: a free port)."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1", port: int = 0) -> None:
        config = uvicorn.Config(
            create_app(settings), host=host, port=port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="memstream-api", daemon=True)
        self.host = host

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout: float = 30.0) -> ApiServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP API did not start")
            time.sleep(0.05)
        return self

    @property
    def port(self) -> int:
        socket = self._server.servers[0].sockets[0]
        return int(socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(15)
