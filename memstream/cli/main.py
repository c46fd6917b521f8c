"""The `memstream` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from memstream.config import ConfigError, Settings, load_settings
from memstream.sdk.memory_types import UnknownMemoryType

if TYPE_CHECKING:
    from memstream.api.serving import ApiServer
    from memstream.runtime.servers import LoopbackServer
    from memstream.runtime.servers.leftovers import RunRecord
    from memstream.runtime.supervisor import Supervisor

log = logging.getLogger("memstream")

SECRETS = (
    ("llm", "api_key"),
    ("kafka", "sasl_password"),
    ("kafka", "ssl_key_password"),
)
"""Settings `memstream config` shows as *** (section, key)."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.run(args)
        return code
    except ConfigError as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 2
    except UnknownMemoryType as exc:  # a --type the configuration does not declare
        print(f"memstream: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memstream: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstream", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    commands = parser.add_subparsers(required=True, metavar="command")

    up = commands.add_parser("up", help="run the whole pipeline until Ctrl-C")
    up.add_argument(
        "--ephemeral",
        action="store_true",
        help="keep the log in memory (Tansu) and the database in a throwaway folder: "
        "everything is gone when up stops (tests, demos)",
    )
    up.add_argument(
        "--http-port",
        type=int,
        help="also serve the HTTP API and MCP server on this port (0: a free one; "
        "default: http.port / MEMSTREAM_HTTP_PORT, unset: no API)",
    )
    up.set_defaults(run=_up)

    serve = commands.add_parser("serve", help="serve the HTTP API and MCP server")
    serve.add_argument("--host", help="default: http.host (127.0.0.1)")
    serve.add_argument("--port", type=int, help="default: http.port, else 8080")
    serve.set_defaults(run=_serve)

    mcp = commands.add_parser("mcp", help="the MCP server over stdio, acting with an API key")
    mcp.add_argument(
        "--key-env", default="MEMSTREAM_API_KEY", help="the variable holding the API key"
    )
    mcp.set_defaults(run=_mcp)

    demo = commands.add_parser("demo", help="feed a sample conversation and print its memories")
    demo.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for memories")
    demo.set_defaults(run=_demo)

    worker = commands.add_parser("worker", help="run one pipeline stage (used by `up`)")
    worker.add_argument("--stage", required=True, help="window, projector or extract:<type>")
    worker.add_argument("--loglevel", default=os.environ.get("MEMSTREAM_LOG_LEVEL", "info"))
    worker.add_argument(
        "--shadow",
        metavar="NAME",
        help="run the stage for the shadow NAME (with --extractor): its own groups, results "
        "topics and database, beside the live deployment (docs/operations.md)",
    )
    worker.add_argument("--extractor", help="with --shadow: the shadow's named extractor")
    worker.set_defaults(run=_worker)

    schema = commands.add_parser("schema", help="event JSON Schemas")
    schema_commands = schema.add_subparsers(required=True, metavar="action")
    export = schema_commands.add_parser("export", help="write one JSON Schema file per event")
    export.add_argument("directory", type=Path)
    export.set_defaults(run=_schema_export)

    config = commands.add_parser("config", help="configuration")
    config_commands = config.add_subparsers(required=True, metavar="action")
    validate = config_commands.add_parser("validate", help="check the configuration")
    validate.set_defaults(run=_config_validate)

    from memstream.cli.api_keys import register as register_keys
    from memstream.cli.compare import register as register_compare
    from memstream.cli.consolidate import register as register_consolidate
    from memstream.cli.discard import register as register_discard
    from memstream.cli.dlq import register as register_dlq
    from memstream.cli.events_and_status import register
    from memstream.cli.forgetting import register as register_forget
    from memstream.cli.master_keys import register as register_master_key
    from memstream.cli.memories import register as register_memory_commands
    from memstream.cli.promote import register as register_promote
    from memstream.cli.reextract import register as register_reextract
    from memstream.cli.rollback import register as register_rollback

    register(commands)
    register_dlq(commands)
    register_keys(commands)
    register_forget(commands)
    register_master_key(commands)
    register_memory_commands(commands)
    register_rollback(commands)
    register_consolidate(commands)
    register_reextract(commands)
    register_compare(commands)
    register_discard(commands)
    register_promote(commands)
    return parser


def _settings() -> Settings:
    return load_settings()


def _refuse_if_unready(settings: Settings) -> int | None:
    from memstream.runtime.preflight import problems

    found = problems(settings)
    if found:
        print("memstream cannot start:\n" + "\n".join(f"  - {p}" for p in found), file=sys.stderr)
        return 2
    return None


def _stop_on_signals() -> None:
    """SIGINT (Ctrl-C) and SIGTERM stop `up`/`demo` cleanly: child servers and workers too.

    SIGINT is set explicitly, as servers do: a shell without job control starts background
    commands with SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so
    `memstream up &` in a script (or under `nohup`) ignored `kill -INT` for good."""

    def interrupt(signum: int, frame: object) -> None:
        # Once: a second SIGTERM must not cut the shutdown short (SIGKILL still does).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)


def _up(args: argparse.Namespace) -> int:
    from memstream.runtime.pipeline import StageFailed, configured, running_pipeline
    from memstream.runtime.served import LocalModelFollower
    from memstream.runtime.servers import JavaNotFound, KafkaJarsError
    from memstream.runtime.servers.leftovers import AlreadyRunning, RunRecord
    from memstream.runtime.servers.process import observe_children
    from memstream.runtime.supervisor import Supervisor

    _stop_on_signals()
    settings = _settings()
    if (refused := _refuse_if_unready(settings)) is not None:
        return refused
    record = RunRecord(settings.data_dir)
    try:
        record.claim()  # stops what a killed `up` on this data directory left behind
    except AlreadyRunning as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 1
    try:
        with (
            observe_children(record),
            running_pipeline(
                settings, log_dir=settings.data_dir / "logs", ephemeral=args.ephemeral
            ) as (running, infra, pipeline),
        ):
            record.describe(
                log=infra.log,
                log_path=None if infra.log_path is None else str(infra.log_path),
                log_description=infra.describe_log(),
                startup_seconds={server.name: server.startup_seconds for server in infra.servers},
                bootstrap_servers=infra.bootstrap_servers,
                mongodb_uri=infra.mongodb_uri,
                llm_base_url=running.llm.base_url,
                llm_local=infra.llm_server is not None,
                llm_health_url=_health_url(infra.llm_server),
                metrics=pipeline.metrics_addresses(),
            )
            print(f"log: {infra.describe_log()}")
            print("memstream is running. Point the SDK at it with:")
            print(f"  export KAFKA_BOOTSTRAP_SERVERS={infra.bootstrap_servers}")
            print(f"  export MONGODB_URI={infra.mongodb_uri}")
            api = _api_server(running, args.http_port)
            if api is not None:
                print(
                    f"HTTP API: {api.url}/v1 (OpenAPI: {api.url}/openapi.json, MCP: {api.url}/mcp/)"
                )
            print("Press Ctrl-C to stop.", flush=True)
            # restarts crashed stages and the local LLM; raises when one keeps failing
            supervisor = Supervisor(pipeline, servers=infra.supervised_servers())
            follower = LocalModelFollower(
                configured(settings, infra.environment),  # as configured: no local LLM's address
                pipeline,
                infra.llm_server,
                settings.data_dir / "logs",
                partial(swap_local_llm, supervisor, record),
            )
            supervisor.on_switch = follower
            try:
                supervisor.run(
                    report=lambda state: record.describe(
                        supervision=state, metrics=pipeline.metrics_addresses()
                    )
                )
            except KeyboardInterrupt:
                print("\nstopping …", file=sys.stderr)
            finally:
                follower.stop_own()
                if api is not None:
                    api.stop()
    except (StageFailed, JavaNotFound, KafkaJarsError) as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 1
    finally:
        record.release()
    return 0


def swap_local_llm(
    supervisor: Supervisor, record: RunRecord, name: str, server: LoopbackServer
) -> None:
    """`up`'s local LLM replaced by the served extractor's model (`LocalModelFollower`): the
    supervisor watches the new server, and the run record says where `memstream status` finds
    it."""
    supervisor.replace_server(name, server)
    record.describe(
        llm_base_url=getattr(server, "base_url", None), llm_health_url=_health_url(server)
    )


def _health_url(server: object) -> str | None:
    """Where `memstream status` asks the local LLM server whether it lives."""
    from memstream.runtime.local.llm import LocalLLMServer

    return server.health_url if isinstance(server, LocalLLMServer) else None


def _api_server(settings: Settings, port: int | None) -> ApiServer | None:
    """The HTTP API in a thread of `up`, when a port is asked for."""
    port = settings.http.port if port is None else port
    if port is None:
        return None
    from memstream.api.serving import ApiServer

    return ApiServer(settings, settings.http.host, port).start()


def _serve(args: argparse.Namespace) -> int:
    from memstream.api.serving import serve

    settings = _settings()
    port = args.port if args.port is not None else (settings.http.port or 8080)
    serve(settings, args.host or settings.http.host, port)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from memstream.api.mcp_server import run_stdio

    key = os.environ.get(args.key_env)
    if not key:
        print(f"memstream: {args.key_env} is not set (an API key)", file=sys.stderr)
        return 2
    asyncio.run(run_stdio(_settings(), key))
    return 0


def _demo(args: argparse.Namespace) -> int:
    import tempfile

    from memstream.cli.demo import (
        DEMO_SESSIONS,
        format_memories,
        learned,
        record_session,
        wait_for_extraction,
    )
    from memstream.runtime.pipeline import StageFailed, running_pipeline
    from memstream.runtime.supervisor import FAIL_FAST, Supervisor

    _stop_on_signals()
    settings = _settings()
    if (refused := _refuse_if_unready(settings)) is not None:
        return refused
    started = time.monotonic()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="memstream-demo-") as scratch,
            running_pipeline(
                settings,
                log_dir=Path(scratch) / "logs",
                ephemeral=True,  # a throwaway run: Tansu in memory, the database in `scratch`
                mongo_path=Path(scratch) / "mongo",
            ) as (settings, infra, pipeline),
        ):
            print(
                f"pipeline ready after {time.monotonic() - started:.1f}s",
                file=sys.stderr,
                flush=True,
            )
            # A short scripted run: a stage (or the local LLM) that dies is a bug to show at once,
            # not to restart.
            supervisor = Supervisor(pipeline, FAIL_FAST, servers=infra.supervised_servers())
            for session_id, messages in DEMO_SESSIONS:
                print(f"recording {session_id} …", file=sys.stderr, flush=True)
                asyncio.run(record_session(settings, session_id, messages))
                wait_for_extraction(settings, session_id, args.timeout, check=supervisor.check)
            print(format_memories(learned(settings)), flush=True)
    except StageFailed as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 1
    print(f"demo finished in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


def _worker(args: argparse.Namespace) -> int:
    from memstream.runtime.served import follows_the_served
    from memstream.runtime.worker import run_stage
    from streams.kafka_security import KafkaAccessError

    settings = _settings()
    if args.shadow or args.extractor:
        from memstream.promotion.lineage import ShadowRefused, shadow_environment
        from memstream.runtime.pipeline import configured
        from memstream.runtime.shadow import mark_shadow
        from streams.settings import utc_now

        if not (args.shadow and args.extractor):
            raise SystemExit("memstream: --shadow and --extractor go together")
        try:
            environment = shadow_environment(settings, args.shadow, args.extractor)
        except ShadowRefused as exc:
            raise SystemExit(f"memstream: {exc}") from None
        os.environ.update(environment)  # what the stage's own processes read
        mark_shadow(settings, args.shadow, args.extractor, utc_now())
        settings = configured(settings, environment)
    elif (
        follows_the_served(args.stage) and settings.mongodb.uri and settings.kafka.bootstrap_servers
    ):
        settings = _into_the_served_lineage(settings, args.stage)
    if args.stage.startswith("extract:") and (refused := _refuse_if_unready(settings)) is not None:
        return refused
    try:
        run_stage(settings, args.stage, args.loglevel)
    except KafkaAccessError as exc:
        print(f"memstream worker {args.stage}: Kafka refused it: {exc}", file=sys.stderr)
        return 2
    return 0


def _into_the_served_lineage(settings: Settings, stage: str) -> Settings:
    """The settings of the lineage the deployment serves, with a watch that ends this worker
    when another is served (`memstream.runtime.served`)."""
    from memstream.promotion.lineage import ShadowRefused
    from memstream.runtime.pipeline import configured
    from memstream.runtime.served import exit_when_switched, lineage_of_the_served

    try:
        served, environment = lineage_of_the_served(settings)
    except ShadowRefused as exc:
        raise SystemExit(f"memstream worker {stage}: the served shadow: {exc}") from None
    if environment:
        os.environ.update(environment)  # what the stage's own processes read
        print(
            f"memstream worker {stage}: serving the shadow {served.shadow} "
            f"(extractor {served.extractor}, version {served.version})",
            file=sys.stderr,
            flush=True,
        )
    exit_when_switched(settings, served, stage)
    return configured(settings, environment)


def _schema_export(args: argparse.Namespace) -> int:
    from events.schema import export_schemas

    for path in export_schemas(args.directory):
        print(path)
    return 0


def _config_validate(args: argparse.Namespace) -> int:
    from memstream.config import extractor_identity
    from memstream.runtime.preflight import problems

    settings = _settings()
    shown = settings.model_dump(mode="json")
    for section, secret in SECRETS:
        if shown[section].get(secret):
            shown[section][secret] = "***"
    import yaml

    print(yaml.safe_dump(shown, sort_keys=False).rstrip())
    identity = extractor_identity(settings)
    print(f"# extractor: {identity.name}, digest {identity.digest} (as memories record it)")
    found = problems(settings)
    for problem in found:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if found else 0
