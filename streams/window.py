"""The window stage: turns in, snapshots out (docs/architecture.md, "Stages").

The agent only wires: read the record (`handlers.inputs`; poison is dead-lettered), decide
(`handlers.window.decide`), send the snapshots it promoted (waiting for the broker's ack, through
outages), then store the window. A crash between the two re-promotes the same turns under the
same snapshot id, which downstream recognises. A `PartitionGuard` hands the agent each
turns-topic record once and in order.

The idle timer runs on every worker over the windows of its own partitions. It uses the wall
clock only to notice a quiet session; what it decides goes through the turns topic as a
`SessionIdled` command stamped with that time, and the window judges the command by its time.
"""

from __future__ import annotations

import logging
from functools import partial

import faust

from events.codec import encode
from events.forgetting import SessionsForgotten, UserForgotten
from events.snapshots import SnapshotPromoted
from events.turns import session_key
from handlers.dead_letters import applies_to
from handlers.inputs import InvalidRecord, read_turns_record
from handlers.sealing import KeyDestroyed
from handlers.window import (
    IdleRequest,
    SessionWindow,
    decide,
    forget_user_windows,
    forgotten_turns,
    idle_command,
    should_request_idle,
)
from streams.app import faust_app, raw_table, raw_topic
from streams.dead_letters import dead_letter
from streams.progress import guard_partitions, is_progress_key
from streams.records import InputRecord
from streams.retrying import apply_or_dead_letter, through_outages
from streams.sealing import NO_KEYS, StageKeys, window_facts
from streams.sending import sent_by_key
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
STAGE = "window"


def create_window_app(
    settings: StreamSettings, clock: Clock = utc_now, keys: StageKeys = NO_KEYS
) -> faust.App:
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
        group=settings.group(STAGE),
    )
    idle_requests: dict[bytes, IdleRequest] = {}

    async def apply(record: InputRecord) -> None:
        if not applies_to(record.redrive, STAGE):  # a redrive addressed to another stage
            return
        try:
            command = await keys.read(read_turns_record, record.key, record.value)
        except KeyDestroyed:  # its session was forgotten: nothing of it is promoted
            log.info("skipped a forgotten record at %s", record.position)
            return
        except InvalidRecord as exc:
            await dead_letter(dead_letters, record, stage=STAGE, reason=str(exc), clock=clock)
            return
        if isinstance(command, UserForgotten):
            if command.turns_partition != record.partition:
                reason = (
                    f"UserForgotten for partition {command.turns_partition} "
                    f"was written to partition {record.partition}"
                )
                await dead_letter(dead_letters, record, stage=STAGE, reason=reason, clock=clock)
                return
            await forget_user(command, record.partition)
            return
        key = command.key.encode()
        window = await stored_window(key)
        decision = decide(
            window,
            command,
            offset=record.offset,
            policy=settings.window,
            partition=record.partition,
        )
        if decision.rejected:
            await dead_letter(
                dead_letters, record, stage=STAGE, reason=decision.rejected, clock=clock
            )
            return
        if decision.ignored:
            log.info("ignored %s for %s: %s", command.event_type, command.key, decision.ignored)
            return
        for snapshot in decision.snapshots:
            await send_snapshots_record(snapshot)
            log.info(
                "promoted snapshot %s seq=%s (%s, %d turns)",
                snapshot.event_id,
                snapshot.seq,
                snapshot.reason,
                len(snapshot.turns),
            )
        if decision.forgotten is not None:
            await send_snapshots_record(decision.forgotten)
            log.info("forgot the open turns of session %s", command.key)
        windows[key] = await keys.window_to_store(decision.window)

    async def stored_window(key: bytes) -> SessionWindow | None:
        stored = windows.get(key)
        if not stored:
            return None
        try:
            return await keys.stored_window(stored)
        except KeyDestroyed:  # the session was forgotten before this stage read the request
            return forgotten_turns(window_facts(stored))

    async def forget_user(request: UserForgotten, partition: int) -> None:
        """Drop the open turns of the user's sessions on this partition, say so on the
        snapshots topic, then store the windows (a redelivery repeats both, to the same effect)."""
        prefix = f"{request.user_id}|".encode()
        held = {  # their open turns are dropped: nothing to open
            key: window_facts(stored)
            for key, stored in list(windows.items())
            if stored and key.startswith(prefix) and not is_progress_key(key)
        }
        cleared, fact = forget_user_windows(held.values(), request, partition)
        await send_snapshots_record(fact)
        for window in cleared:
            windows[session_key_bytes(window)] = await keys.window_to_store(window)
        log.info("forgot the open turns of %d sessions of a user", len(cleared))

    async def send_snapshots_record(event: SnapshotPromoted | SessionsForgotten) -> None:
        what = "snapshot" if isinstance(event, SnapshotPromoted) else event.event_type
        send = partial(sent_by_key, snapshots, event.key.encode(), await keys.encode(event))
        await through_outages(send, f"sending {what} {event.event_id}")

    @app.agent(turns, concurrency=1)
    async def promote_sessions(stream: faust.StreamT[bytes]) -> None:
        applied = apply_or_dead_letter(apply, dead_letters, stage=STAGE, clock=clock)
        async for event in stream.events():
            await guard.apply_in_order(event, applied)

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
            window = window_facts(stored)  # times and numbering: no content needed
            if not should_request_idle(window, now, settings.window, idle_requests.get(key)):
                continue
            idle_requests[key] = IdleRequest(window.seq, now)
            log.info("session %s idle: requesting promotion of window %d", key, window.seq)
            await turns.send(key=key, value=encode(idle_command(window, now)), force=True)

    return app


def session_key_bytes(window: SessionWindow) -> bytes:
    return session_key(window.user_id, window.session_id).encode()
