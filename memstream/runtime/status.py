"""`memstream status`: is the pipeline healthy, and how far behind is it?

Reports which log is in use (the durable embedded Kafka and its folder, the ephemeral Tansu, or a
broker of your own), the broker and the database (reachable or not), the enabled memory types,
each stage's consumer lag (end offsets minus the group's committed offsets, per input topic),
sessions with turns not promoted yet, snapshots waiting for each enabled type, dead letters by
stage and reason, and whether the LLM and the embedder are ready. The LLM endpoint is asked
whether it answers: a configured one at ``GET {base_url}/models`` (with its API key), the local
server `memstream up` started at its ``/health`` (`memstream.runtime.local.llama_server`; its
``/v1/models`` waits behind a running completion), with how many times `up` restarted it and
how it last exited, as `up` records them in ``data_dir/up.json``. While a shadow is served
(`memstream promote`) the read model, the extractor, the LLM and every stage's groups but the
window's are the served lineage's. The verdict (`health`):

* `healthy` (exit 0): everything reachable and ready;
* `degraded` (exit 1): reachable, but an LLM or embedder is missing, the LLM endpoint does not
  answer (the local server died and is being restarted, say), or dead letters exist;
* `unreachable` (exit 2): the broker or the database cannot be reached.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from events.topics import Topics
from handlers.serving import LIVE, Served
from memstream.config import Settings
from memstream.promotion.lineage import ShadowRefused, served_environment
from memstream.promotion.pointer import look_up_served
from memstream.runtime.llm_choice import wants_local_llm
from memstream.runtime.pipeline import configured, pipeline_stages
from memstream.runtime.preflight import problems
from memstream.runtime.worker import stream_settings
from projections.llm_budget import LlmBudgetStore
from projections.store import DEAD_LETTERS, SNAPSHOTS, TURNS
from streams.settings import utc_now

EXIT_CODES = {"healthy": 0, "degraded": 1, "unreachable": 2}


def status(settings: Settings, *, timeout: float = 5.0) -> dict[str, Any]:
    """The pipeline's status as a JSON-able document (see the module doc)."""
    from memstream.runtime.servers.leftovers import read_run_record

    record = read_run_record(settings.data_dir)
    served, lineage = _served_lineage(settings, timeout)
    report: dict[str, Any] = {
        "enabled_types": list(lineage.memory.extraction.enabled),
        "log": _log_in_use(settings, record),
        "broker": {"reachable": False},
        "database": {"reachable": False},
    }
    try:
        lags = _lags(settings, lineage)
        report["consumer_lag"] = asyncio.run(asyncio.wait_for(lags, timeout * 4))
        report["broker"] = {
            "reachable": True,
            "bootstrap_servers": settings.kafka.bootstrap_servers,
        }
    except Exception as exc:  # any failure to talk to the broker is its unreachability here
        report["broker"]["error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        report.update(_read_model(lineage, served, timeout))
        report["database"] = {"reachable": True, "database": lineage.mongodb.database}
    except (PyMongoError, ValueError) as exc:
        report["database"]["error"] = f"{type(exc).__name__}: {exc}"[:300]
    report["models"] = _models(lineage, timeout, record)
    report["metrics"] = dict((record or {}).get("metrics") or {})
    report["health"] = _health(report)
    return report


def _served_lineage(settings: Settings, timeout: float) -> tuple[Served, Settings]:
    """The lineage served, as the deployment's database holds it (docs/architecture.md,
    "Promotion"), and its settings: the stages other than the window, the read model and the
    LLM are reported as the served lineage runs them. A database that cannot be read leaves
    the configured settings (`_read_model` then says why)."""
    if not settings.mongodb.uri:
        return LIVE, settings
    try:
        served = look_up_served(settings, timeout=timeout)
    except PyMongoError:
        return LIVE, settings
    try:
        return served, configured(settings, served_environment(settings, served))
    except ShadowRefused:  # its extractor is no longer declared: the workers refuse it too
        return served, settings


def _log_in_use(settings: Settings, record: Mapping[str, Any] | None) -> str:
    """Which log the pipeline writes to, as `memstream up` on this data directory recorded it."""
    bootstrap = settings.kafka.bootstrap_servers
    if record is not None and bootstrap in (None, record.get("bootstrap_servers")):
        return str(record.get("log_description", record.get("log")))
    if bootstrap:
        return f"broker at {bootstrap}"
    return f"none (no memstream up running on {settings.data_dir})"


async def _lags(settings: Settings, lineage: Settings) -> dict[str, dict[str, int | None]]:
    """Each stage's lag: the window's groups as configured, the others the served lineage's."""
    lags: dict[str, dict[str, int | None]] = {}
    options = settings.kafka.client_options()
    reader = AIOKafkaConsumer(**options, enable_auto_commit=False)
    await reader.start()
    try:
        for stage in pipeline_stages(lineage):
            runs = settings if stage == "window" else lineage
            group = stream_settings(runs).group(stage.replace(":", "-"))
            committed = AIOKafkaConsumer(
                **options,
                group_id=group,
                enable_auto_commit=False,
            )
            await committed.start()
            try:
                lags[stage] = {}
                for topic in _inputs(runs.kafka.topics, stage):
                    tps = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
                    ends = await reader.end_offsets(tps)
                    total = 0
                    for tp in tps:
                        done = await committed.committed(tp)
                        total += ends[tp] - (done or 0)
                    lags[stage][topic] = total
            finally:
                await committed.stop()
    finally:
        await reader.stop()
    return lags


def _inputs(topics: Topics, stage: str) -> list[str]:
    """The topics a stage reads."""
    if stage == "window":
        return [topics.turns]
    if stage == "projector":
        return [topics.turns, topics.snapshots, topics.memories, topics.dead_letters]
    return [topics.snapshots]


def _read_model(settings: Settings, served: Served, timeout: float) -> dict[str, Any]:
    if not settings.mongodb.uri:
        raise ValueError("MONGODB_URI is not set")
    client: MongoClient[dict[str, Any]] = MongoClient(
        settings.mongodb.uri, serverSelectionTimeoutMS=int(timeout * 1000), tz_aware=True
    )
    try:
        db = client[settings.mongodb.database]
        db.command("ping")
        open_sessions = db[TURNS].distinct("session_id", {"snapshot_id": None})
        waiting = {
            t: db[SNAPSHOTS].count_documents(
                {"turn_ids": {"$exists": True}, f"extractions.{t}": {"$exists": False}}
            )
            for t in settings.memory.extraction.enabled
        }
        letters: dict[str, int] = {}
        # (a letter's redrive may be projected before the letter itself: no stage yet)
        for letter in db[DEAD_LETTERS].find(
            {"stage": {"$exists": True}}, {"stage": 1, "reason": 1}
        ):
            reason = f"{letter['stage']}: {str(letter['reason']).split(':')[0][:80]}"
            letters[reason] = letters.get(reason, 0) + 1
        found: dict[str, Any] = {
            "served": {
                "read_model": settings.mongodb.database,
                "extractor": settings.extractor,
                "version": served.version,
            },
            "sessions_with_open_windows": len(open_sessions),
            "snapshots_waiting": waiting,
            "dead_letters": letters,
        }
        if (budget := settings.llm.daily_token_budget) is not None:
            over = LlmBudgetStore(db).over_budget(budget, utc_now())
            found["over_llm_budget_today"] = over
        return found
    finally:
        client.close()


def _models(settings: Settings, timeout: float, record: Mapping[str, Any] | None) -> dict[str, Any]:
    missing = problems(settings)
    models: dict[str, Any] = {
        "problems": missing,
        "llm": _llm_named(settings),
        "embedder": _embedder_named(settings),
    }
    if settings.llm.base_url:
        url = settings.llm.base_url.rstrip("/") + "/models"
        key = settings.llm.api_key
        models.update(_probe(url, timeout, {"Authorization": f"Bearer {key}"} if key else {}))
    elif wants_local_llm(settings) and record is not None and record.get("llm_local"):
        models["local_llm"] = _local_llm(record)
        models.update(_probe(str(record.get("llm_health_url")), timeout, {}))
    return models


def _probe(url: str, timeout: float, headers: Mapping[str, str]) -> dict[str, Any]:
    """Whether ``GET url`` answers 200: ``llm_reachable``, and ``llm_error`` when it does not."""
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.status == 200:
                return {"llm_reachable": True}
            return {"llm_reachable": False, "llm_error": f"HTTP {response.status} from {url}"}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"llm_reachable": False, "llm_error": f"{url}: {exc}"[:200]}


def _local_llm(record: Mapping[str, Any]) -> dict[str, Any]:
    """The local LLM server as the running `up` recorded it: its URL, restarts, last exit."""
    supervised = dict(record.get("supervision") or {}).get("local-llm") or {}
    return {
        "base_url": record.get("llm_base_url"),
        "restarts": int(supervised.get("restarts", 0)),
        "up": bool(supervised.get("up", True)),
        "last_exit": supervised.get("last_exit"),
    }


def _llm_named(settings: Settings) -> str:
    if settings.llm.configured:
        return f"{settings.llm.model} at {settings.llm.base_url or 'api.openai.com'}"
    if wants_local_llm(settings):
        return "the packaged local model (started by `memstream up` / `memstream demo`)"
    return "none"


def _embedder_named(settings: Settings) -> str:
    embedding = settings.embedding
    if embedding.provider == "local":
        return "the local model (multilingual-e5-small)"
    return f"{embedding.model} at {embedding.base_url or settings.llm.base_url or 'OpenAI'}"


def _health(report: dict[str, Any]) -> str:
    if not report["broker"]["reachable"] or not report["database"]["reachable"]:
        return "unreachable"
    models = report["models"]
    if models["problems"] or models.get("llm_reachable") is False or report.get("dead_letters"):
        return "degraded"
    return "healthy"


def format_status(report: dict[str, Any]) -> str:
    """The report for a terminal."""
    lines = [f"health: {report['health']}", f"log: {report['log']}"]
    for part in ("broker", "database"):
        state = (
            "reachable"
            if report[part]["reachable"]
            else f"UNREACHABLE ({report[part].get('error')})"
        )
        lines.append(f"{part}: {state}")
    lines.append(f"enabled types: {', '.join(report['enabled_types'])}")
    for stage, topics in (report.get("consumer_lag") or {}).items():
        lag = ", ".join(f"{topic} {count}" for topic, count in topics.items())
        lines.append(f"lag {stage}: {lag}")
    if "served" in report:
        served = report["served"]
        lines.append(
            f"served: {served['read_model']} (extractor {served['extractor']}, "
            f"version {served['version']})"
        )
    if "sessions_with_open_windows" in report:
        lines.append(f"sessions with open windows: {report['sessions_with_open_windows']}")
        waiting = ", ".join(f"{t} {n}" for t, n in report["snapshots_waiting"].items())
        lines.append(f"snapshots waiting: {waiting or 'none'}")
        for reason, count in sorted(report["dead_letters"].items()):
            lines.append(f"dead letters: {count} x {reason}")
        if not report["dead_letters"]:
            lines.append("dead letters: none")
    if "over_llm_budget_today" in report:
        over = report["over_llm_budget_today"]
        lines.append(
            f"over the daily LLM budget (their snapshots wait): {', '.join(over) or 'nobody'}"
        )
    for stage, address in sorted(report.get("metrics", {}).items()):
        lines.append(f"metrics {stage}: {address}/metrics (probes: /healthz, /readyz)")
    models = report["models"]
    for problem in models["problems"]:
        lines.append(f"problem: {problem}")
    reachable = {True: ", reachable", False: ", UNREACHABLE", None: ""}
    llm = f"llm: {models['llm']}{reachable[models.get('llm_reachable')]}"
    if models.get("llm_reachable") is False and models.get("llm_error"):
        llm += f" ({models['llm_error']})"
    lines.append(llm)
    local = models.get("local_llm")
    if local is not None:
        restarts = local["restarts"]
        state = "running" if local["up"] else "restarting"
        detail = f"; it last {local['last_exit']}" if local["last_exit"] else ""
        lines.append(
            f"local LLM server: {state} at {local['base_url']}, restarted {restarts} "
            f"time{'' if restarts == 1 else 's'} by memstream up{detail}"
        )
    lines.append(f"embedder: {models['embedder']}")
    return "\n".join(lines)
