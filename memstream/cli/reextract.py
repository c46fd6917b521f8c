"""`memstream reextract --extractor NAME --into SHADOW`: the snapshots of the live log extracted
again by another named extractor, into a shadow read model (`memstream.runtime.shadow`).

Runs beside a live deployment (with `up`'s exports: its broker and database): starts the
shadow's extraction stages and projector as workers (and the local LLM, when the extractor names
no endpoint), shows how many of the snapshots in the log when it started have been extracted,
waits until the shadow's projector has read every result, stops the workers and prints what the
re-extraction did and cost. Stopped half-way (Ctrl-C, a crash), it goes on from where it was
when run again: the shadow's consumer groups keep their offsets, and a snapshot already
extracted into the shadow is not extracted again.

`--users` and `--since` select the snapshots (and saves) extracted; forgetting applies to every
user. The selection belongs to the shadow: a record it left out is not read again when the
command is run again with another selection (use another shadow name).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from memstream.cli.settings import live_and_shadow
from memstream.config import Settings

if TYPE_CHECKING:
    from streams.settings import StreamSettings

DEFAULT_TIMEOUT_SECONDS = 24 * 3600.0
POLL_SECONDS = 1.0


def register(commands: Any) -> None:
    """Add `reextract` to the `memstream` parser's subcommands."""
    reextract = commands.add_parser(
        "reextract", help="extract the log's snapshots again with another extractor, apart"
    )
    reextract.add_argument("--extractor", required=True, help="a name under `extractors:`")
    reextract.add_argument("--into", required=True, help="the shadow's name (its database)")
    reextract.add_argument(
        "--users",
        nargs="+",
        default=(),
        metavar="USER",
        help="only these users' snapshots (default: everyone's)",
    )
    reextract.add_argument(
        "--since", help="only snapshots that happened at or after this ISO time (with its zone)"
    )
    reextract.add_argument(
        "--follow",
        action="store_true",
        help="once caught up, go on extracting the live snapshots (and forgetting) until Ctrl-C",
    )
    reextract.add_argument("--json", action="store_true", help="print the result as JSON")
    reextract.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_SECONDS,
        help="give up after this many seconds (the shadow keeps what it did)",
    )
    reextract.set_defaults(run=_reextract)


def _reextract(args: argparse.Namespace) -> int:
    from memstream.runtime.llm_choice import local_llm
    from memstream.runtime.pipeline import Pipeline, configured, prepare_topics
    from memstream.runtime.shadow import (
        mark_shadow,
        shadow_stages,
    )
    from memstream.runtime.supervisor import ServerGaveUp, StageGaveUp, Supervisor
    from memstream.runtime.topics import topic_partitions
    from streams.settings import utc_now

    signal.signal(signal.SIGTERM, _interrupted_by_sigterm)
    live, environment = live_and_shadow(args.into, args.extractor)
    if args.users:
        environment["MEMSTREAM_EXTRACT_ONLY_USERS"] = ",".join(args.users)
    if args.since:
        environment["MEMSTREAM_EXTRACT_SINCE"] = args.since
    log_dir = live.data_dir / "shadows" / args.into
    shadow = configured(live, environment)
    _refuse_a_discarded_name(shadow)
    mark_shadow(live, args.into, args.extractor, utc_now())
    with local_llm(shadow, log_dir) as llm:
        environment.update(llm.environment)
        shadow = configured(live, environment)
        partitions = topic_partitions(shadow.kafka, prepare_topics(shadow))
        if partitions != shadow.kafka.partitions:
            environment["MEMSTREAM_PARTITIONS"] = str(partitions)
            shadow = configured(live, environment)
        stages = shadow_stages(shadow)
        started = time.monotonic()
        with Pipeline(stages, environment, log_dir) as pipeline:
            servers = {"local-llm": llm.server} if llm.server is not None else None
            supervisor = Supervisor(pipeline, servers=servers)
            try:
                finished = _follow(shadow, stages, started + args.timeout, supervisor.check)
                if finished and args.follow:
                    _follow_live(supervisor.check)
            except (StageGaveUp, ServerGaveUp) as exc:
                raise SystemExit(f"memstream: {exc} (run it again to go on)") from None
        seconds = time.monotonic() - started
    result = _result(shadow, args.extractor, finished, seconds)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for line in _summary(result):
            print(line)
    return 0 if finished else 1


def _refuse_a_discarded_name(shadow: Settings) -> None:
    """Exit when the shadow's database is gone but its projector's group has read the log: a
    discarded shadow, whose groups would resume where it stopped (`memstream discard`)."""
    from pymongo import MongoClient

    from memstream.runtime.shadow import has_progress
    from memstream.runtime.worker import stream_settings

    client: MongoClient[dict[str, Any]] = MongoClient(shadow.mongodb.uri, tz_aware=True)
    try:
        exists = shadow.mongodb.database in client.list_database_names()
    finally:
        client.close()
    group = stream_settings(shadow).group("projector")
    if not exists and asyncio.run(has_progress(shadow.kafka, group, shadow.kafka.topics.snapshots)):
        raise SystemExit(
            f"memstream: the shadow {shadow.mongodb.database!r} was discarded and its consumer "
            "groups have not expired yet (the broker's offsets.retention.minutes): choose "
            "another name"
        )


def _follow(
    shadow: Settings, stages: list[str], deadline: float, supervise: Callable[[], None]
) -> bool:
    """Show the extraction's progress until every stage has applied the snapshots that were in
    the log at the start and the projector every result they wrote, by the progress each keeps
    (never the groups' committed offsets, which Faust may move past records the stage never
    applied); False at the deadline. Between looks, `supervise()` restarts a crashed worker (it
    goes on from its own progress)."""
    from pymongo import MongoClient
    from rich.console import Console
    from rich.progress import Progress

    from memstream.runtime.shadow import applied, end_offsets, projected
    from memstream.runtime.worker import stream_settings

    kafka, groups = shadow.kafka, stream_settings(shadow)
    extractors = [stage for stage in stages if stage.startswith("extract:")]
    snapshots = asyncio.run(end_offsets(kafka, kafka.topics.snapshots))
    total = sum(snapshots.values()) * len(extractors)

    async def extracted() -> int:
        found = [
            applied(kafka, progress_changelog(groups, stage), kafka.topics.snapshots, snapshots)
            for stage in extractors
        ]
        return sum(await asyncio.gather(*found))

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("records of the snapshots topic read", total=total or 1)
        while (done := asyncio.run(extracted())) < total:
            bar.update(task, completed=done)
            if time.monotonic() > deadline:
                return False
            supervise()
            time.sleep(POLL_SECONDS)
        bar.update(task, completed=total or 1)
        results = asyncio.run(end_offsets(kafka, kafka.topics.memories))
        wanted = sum(results.values())
        client: MongoClient[dict[str, Any]] = MongoClient(shadow.mongodb.uri, tz_aware=True)
        try:
            db = client[shadow.mongodb.database]
            while projected(db, kafka.topics.memories, results) < wanted:
                if time.monotonic() > deadline:
                    return False
                supervise()
                time.sleep(POLL_SECONDS)
        finally:
            client.close()
    return True


def progress_changelog(groups: StreamSettings, stage: str) -> str:
    """The changelog topic of a stage's progress table (`streams.extraction`: Faust names it
    after the app, whose id is the stage's consumer group)."""
    return f"{groups.group(stage.replace(':', '-'))}-progress-changelog"


def _follow_live(supervise: Callable[[], None]) -> None:
    """Keep the shadow's workers on the live snapshots (new sessions are extracted both ways,
    forget requests erase both sides) until Ctrl-C or SIGTERM (`_interrupted_by_sigterm`)."""
    print("caught up; following the live snapshots (Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        while True:
            supervise()
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        return


def _interrupted_by_sigterm(*_: object) -> None:
    """SIGTERM stops the command as Ctrl-C does: the workers are stopped on the way out."""
    raise KeyboardInterrupt


def _result(shadow: Settings, extractor: str, finished: bool, seconds: float) -> dict[str, Any]:
    from pymongo import MongoClient

    from handlers.comparison import Cost
    from projections.comparison import extraction_costs

    client: MongoClient[dict[str, Any]] = MongoClient(shadow.mongodb.uri, tz_aware=True)
    try:
        db = client[shadow.mongodb.database]
        found = extraction_costs(db)
        memories = db["memories"].count_documents({"status": "current"})
    finally:
        client.close()
    costs = {kind: found.get(kind, Cost()) for kind in shadow.memory.extraction.enabled}
    return {
        "shadow": shadow.mongodb.database,
        "extractor": extractor,
        "finished": finished,
        "seconds": round(seconds, 1),
        "current_memories": memories,
        "types": [{"memory_type": kind, **asdict(cost)} for kind, cost in costs.items()],
    }


def _summary(result: dict[str, Any]) -> list[str]:
    state = "done" if result["finished"] else "stopped at the timeout (run it again to go on)"
    lines = [
        f"shadow {result['shadow']} (extractor {result['extractor']}): {state} in "
        f"{result['seconds']:.0f} s, {result['current_memories']} current memories"
    ]
    for cost in result["types"]:
        lines.append(
            f"{cost['memory_type']}: {cost['snapshots']} snapshots ({cost['failed']} failed), "
            f"{cost['calls']} LLM calls, {cost['prompt_tokens']} prompt + "
            f"{cost['completion_tokens']} completion tokens"
        )
    return lines
