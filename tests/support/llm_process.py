"""A stand-in for the local LLM server: the scripted LLM in a process of its own, to be killed.

    python -m tests.support.llm_process --port PORT [--answer JSON] [--latency S]

Serves `tests.support.scripted_llm.ScriptedLLM` on 127.0.0.1:PORT (``/v1/chat/completions``,
``/v1/embeddings``, ``/v1/models``, and ``/health``), answering every chat request with
`--answer` `--latency` seconds after it printed ``chat request received`` to stderr (its log),
so a test can kill it in the middle of one. `StandInLLM` runs it as a
:class:`~memstream.runtime.servers.LoopbackServer`, the way `memstream up` runs the real one.

Why a stand-in: the packaged model answers a request in 3-10 s on an idle machine and in
minutes on a loaded one, so a test that kills it mid-request and waits for the restart and
the extraction would take minutes; this one restarts in a fraction of a second and answers
what the test scripted. The real model under `memstream up` is killed by bench/soak.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memstream.runtime.servers import LoopbackServer

ROOT = Path(__file__).resolve().parents[2]
RECEIVED = "chat request received"


def main(argv: list[str] | None = None) -> None:
    from tests.support import scripted_llm

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--answer", default='{"facts": []}')
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args(argv)
    answer = json.loads(args.answer)
    seen = [0]

    class Noisy(scripted_llm.ScriptedLLM):
        def chat_completion(self, body: Any) -> tuple[int, Any]:
            seen[0] += 1
            print(RECEIVED, seen[0], file=sys.stderr, flush=True)
            time.sleep(args.latency)  # after the line above: a test can kill it mid-request
            return super().chat_completion(body)

    original = scripted_llm._Handler.do_GET

    def do_get(handler: Any) -> None:
        if handler.path == "/health":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()
            handler.wfile.write(b'{"status": "ok"}')
            return
        original(handler)

    scripted_llm._Handler.do_GET = do_get  # type: ignore[method-assign]
    llm = Noisy(default=answer, port=args.port).start()
    print(f"stand-in LLM listening on {llm.base_url}", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)


class StandInLLM(LoopbackServer):
    """`main` as a child process on a fixed port, restartable like the local LLM server."""

    name = "local-llm"
    startup_timeout_default = 30.0

    def __init__(
        self,
        workdir: Path,
        *,
        answer: Mapping[str, Any] | None = None,
        latency: float = 0.0,
    ) -> None:
        super().__init__(workdir)
        self.answer = dict(answer or {"facts": []})
        self.latency = latency

    @property
    def base_url(self) -> str:
        return f"http://{self.address}/v1"

    @property
    def health_url(self) -> str:
        return f"http://{self.address}/health"

    def chat_requests_received(self) -> int:
        """Chat requests the current run received so far."""
        return self.output().decode(errors="replace").count(RECEIVED)

    def _command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "tests.support.llm_process",
            "--port",
            str(self.port),
            "--answer",
            json.dumps(self.answer),
            "--latency",
            str(self.latency),
        ]

    def _env(self) -> Mapping[str, str]:
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        return {**os.environ, "PYTHONPATH": path}

    def _is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.health_url, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False


if __name__ == "__main__":
    main()
