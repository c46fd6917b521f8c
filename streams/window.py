"""The window stage: turns in, snapshots out (SPEC §2).

The agent only wires: decode the record, `handlers.window.decide`, send the snapshot (waiting for
the broker's ack), then store the window. A crash between the two re-promotes the same seq, which
has the same snapshot id, so downstream recognises the duplicate. A `PartitionGuard` hands it each
turns-topic record once and in order, reading records the consumer skipped back from the log.
The idle timer runs on every worker over the windows of its own partitions and routes its
decision through the turns topic.
"""

from __future__ import annotations

import logging
import time

import faust

from events.codec import EventDecodeError, decode, encode
from events.turns import SessionFlushRequested, SessionIdled, TurnRecorded
from handlers.window import SessionWindow, decide, idle_command, is_idle
from streams.app import faust_app, raw_table, raw_topic
from streams.dead_letters import dead_letter, or_dead_letter
from streams.progress import guard_partitions, is_progress_key
from streams.records import InputRecord
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
STAGE = "window"


def create_window_app(settings: StreamSettings, clock: Clock = utc_now) -> faust.App:
    app = faust_app(STAGE, settings)
    turns = raw_topic(app, settings.topics.turns, settings)
    snapshots = raw_topic(app, settings.topics.snapshots, settings)
    dead_letters = raw_topic(app, settings.topics.dead_letters, settings)
    windows = raw_table(app, "session-windows", settings)
    guard = guard_partitions(
        app,
        windows,
        bootstrap_servers=settings.bootstrap_servers,
        stage=STAGE,
        topics=[settings.topics.turns],
    )
    idle_requested: dict[bytes, tuple[int, float]] = {}

    async def apply(record: InputRecord) -> None:
        try:
            command = decode(record.value or b"")
            if not isinstance(command, TurnRecorded | SessionFlushRequested | SessionIdled):
                raise EventDecodeError(f"{command.event_type} does not belong on the turns topic")
            key = command.key.encode()
            if record.key != key:
                raise EventDecodeError(f"record key {record.key!r} is not {command.key!r}")
        except EventDecodeError as exc:
            await dead_letter(dead_letters, record, stage=STAGE, reason=str(exc), clock=clock)
            return
        stored = windows.get(key)
        window = SessionWindow.model_validate_json(stored) if stored else None
        decision = decide(
            window, command, offset=record.offset, now=clock(), policy=settings.window
        )
        if decision.ignored:
            log.info("ignored %s for %s: %s", command.event_type, command.key, decision.ignored)
            return
        if decision.snapshot is not None:
            snapshot = decision.snapshot
            sent = await snapshots.send(
                key=snapshot.key.encode(), value=encode(snapshot), force=True
            )
            await sent
            log.info(
                "promoted snapshot %s seq=%s (%s, %d turns)",
                snapshot.event_id,
                snapshot.seq,
                snapshot.reason,
                len(snapshot.turns),
            )
        windows[key] = decision.window.model_dump_json().encode()

    @app.agent(turns, concurrency=1)
    async def promote_sessions(stream: faust.StreamT[bytes]) -> None:
        apply_safely = or_dead_letter(apply, dead_letters, stage=STAGE, clock=clock)
        async for event in stream.events():
            await guard.apply_in_order(event, apply_safely)

    resend_after = max(settings.window.idle_timeout.total_seconds(), 1.0)

    @app.timer(settings.idle_check_interval.total_seconds())  # type: ignore[untyped-decorator]
    async def request_idle_promotions() -> None:
        if app.rebalancing or app.tables.recovery.in_recovery:  # type: ignore[attr-defined]
            return
        try:
            await scan_for_idle_sessions()
        except Exception:  # the timer must survive whatever one scan ran into
            log.exception("idle scan failed; the next one runs in %s", settings.idle_check_interval)

    async def scan_for_idle_sessions() -> None:
        now = clock()
        for key, stored in list(windows.items()):
            if not stored or is_progress_key(key):
                continue
            window = SessionWindow.model_validate_json(stored)
            if not is_idle(window, now, settings.window):
                continue
            last = idle_requested.get(key)
            if last and last[0] == window.seq and time.monotonic() - last[1] < resend_after:
                continue
            idle_requested[key] = (window.seq, time.monotonic())
            log.info("session %s idle: requesting promotion of window %d", key, window.seq)
            await turns.send(key=key, value=encode(idle_command(window, now)), force=True)

    return app
