"""A stage worker imports only what its stage needs (docs/architecture.md, "Operations")."""

from __future__ import annotations

import subprocess
import sys

import memstream


def imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    shown = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return set(shown.stdout.split())


def test_window_and_projector_workers_do_not_import_the_llm_client_or_the_sdk() -> None:
    modules = imported_after(
        "import os\n"
        "os.environ['KAFKA_BOOTSTRAP_SERVERS'] = '127.0.0.1:9'\n"
        "os.environ['MONGODB_URI'] = 'mongodb://127.0.0.1:9'\n"
        "from memstream.config import load_settings\n"
        "from memstream.runtime.worker import build_stage\n"
        "settings = load_settings(environ=dict(os.environ))\n"
        "build_stage(settings, 'window'); build_stage(settings, 'projector')"
    )
    assert "streams.window" in modules and "streams.projector" in modules
    assert (
        not {"openai", "memstream.providers.clients", "memstream.sdk.client", "streams.extraction"}
        & modules
    )


def test_the_window_worker_does_not_import_the_read_model() -> None:
    modules = imported_after(
        "import os\n"
        "os.environ['KAFKA_BOOTSTRAP_SERVERS'] = '127.0.0.1:9'\n"
        "os.environ['MONGODB_URI'] = 'mongodb://127.0.0.1:9'\n"
        "from memstream.config import load_settings\n"
        "from memstream.runtime.worker import build_stage\n"
        "build_stage(load_settings(environ=dict(os.environ)), 'window')"
    )
    assert "streams.window" in modules
    assert not {name for name in modules if name.split(".")[0] == "projections"}
    assert not {"numpy", "streams.budget", "handlers.extraction.registry"} & modules


def test_the_cli_parser_every_worker_builds_loads_no_web_framework_database_or_llm_client() -> None:
    modules = imported_after("from memstream.cli.main import _parser\n_parser()")
    roots = {name.split(".")[0] for name in modules}
    assert not {"fastapi", "mcp", "starlette", "uvicorn", "openai", "pymongo", "rich"} & roots
    assert "memstream.api.app" not in modules


def test_the_package_still_exports_the_clients() -> None:
    from memstream import MemoryClient, SyncMemoryClient
    from memstream.sdk.client import MemoryClient as Direct

    assert MemoryClient is Direct
    assert SyncMemoryClient.__name__ == "SyncMemoryClient"
    assert set(memstream.__all__) >= {"MemoryClient", "SyncMemoryClient", "load_settings"}
