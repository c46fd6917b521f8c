"""The window stage: turns in, snapshots out (docs/architecture.md, "Stages").

The agent only wires. It takes the turns topic in batches (`streams.consuming.apply_batches`,
the partition guard admitting each record once and in order) and for each record reads it
(`handlers.inputs`; poison is dead-lettered) and decides (`handlers.window.decide`) against the
session's window — read from the table once per batch, then kept in the batch. When the batch
is decided it sends what was promoted and waits for every acknowledgement (one user's records in
order: `streams.sending.sent_in_key_order`), then writes each changed window to the table once
(a retired window is deleted), then the partitions' progress. A crash before the windows are
written re-promotes the same turns under the same snapshot ids, which downstream recognises.

The table holds only open work: sessions with pending turns, and quiet ones until their
`dedup_horizon` passes (`handlers.window`, "State is bounded by open work"). Its changelog is a
compacted topic whose deleted windows the broker removes (`streams.app.COMPACTED_CHANGELOG`), so
a worker that starts replays the open windows, not every session ever seen.

With the topic-shift trigger on, the batch's turns are embedded first, in one call (through
outages), and each turn's vector goes with it into the decision (`handlers.topic_shift`).

The idle timer runs on every worker over the windows of its own partitions. It uses the wall
clock only to notice a quiet session; what it decides goes through the turns topic as a
`SessionIdled` command stamped with that time, and the window judges the command by its time —
promoting a session with pending turns, retiring one with nothing pending.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import faust

from events.codec import encode
from events.forgetting import SessionsForgotten, UserForgotten
from events.snapshots import SnapshotPromoted
from events.turns import TurnRecorded
from handlers.dead_letters import applies_to
from handlers.idle_timer import IdleRequest, idle_command, should_request_idle
from handlers.inputs import InvalidRecord, TurnsTopicEvent, read_turns_record
from handlers.ports import Embedder
from handlers.sealing import KeyDestroyed
from handlers.session_window import SessionWindow
from handlers.topic_shift import TurnVector, turn_vector
from handlers.window import WindowInput, decide, forget_user_windows, forgotten_turns
from streams import metrics
from streams.app import faust_app, raw_table, raw_topic
from streams.consuming import apply_batches
from streams.dead_letters import dead_letter
from streams.progress import TableProgress, guard_partitions, highest_offsets
from streams.records import InputRecord
from streams.retrying import apply_or_dead_letter, through_outages
from streams.sealing import NO_KEYS, StageKeys, window_facts
from streams.sending import Outgoing, sent_in_key_order
from streams.settings import Clock, StreamSettings, utc_now
from streams.table_keys import is_progress_key, is_window_of, window_key
from streams.tables import delete_in_partition, set_in_partition

log = logging.getLogger(__name__)
STAGE = "window"
BATCH_RECORDS = 500
"""Records applied per batch at most: enough to amortise the table reads, the waits for the
broker's acknowledgements and the changelog writes over hundreds of turns."""
BATCH_SECONDS = 0.05
"""How long a batch waits for more records once one arrived: bounds the latency it adds."""


@dataclass
class _Batch:
    """The windows one batch changed (None: retired) and what it sends, in order."""

    windows: dict[bytes, tuple[int, SessionWindow | None]] = field(default_factory=dict)
    outgoing: list[Outgoing] = field(default_factory=list)
    vectors: dict[str, TurnVector] = field(default_factory=dict)
    """The embeddings of the batch's turns by turn id (topic shift on only)."""
    read: dict[tuple[int, int], TurnsTopicEvent] = field(default_factory=dict)
    """The records read (and opened) to embed their turns, by partition and offset, so
    deciding them does not read them again (topic shift on only)."""


class WindowStage:
    """The window's decisions wired to its table and topics."""

    def __init__(
        self,
        app: faust.App,
        settings: StreamSettings,
        clock: Clock,
        keys: StageKeys,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder if settings.window.topic_shift is not None else None
        self.clock = clock
        self.keys = keys
        self.turns = raw_topic(app, settings.topics.turns, settings)
        self.snapshots = raw_topic(app, settings.topics.snapshots, settings)
        self.dead_letters = raw_topic(app, settings.topics.dead_letters, settings)
        self.windows = raw_table(app, "session-windows", settings)
        self.progress = TableProgress(self.windows)
        self.guard = guard_partitions(
            app,
            self.progress,
            bootstrap_servers=settings.bootstrap_servers,
            security=settings.security,
            stage=STAGE,
            topics=[settings.topics.turns],
            group=settings.group(STAGE),
        )
        self.idle_requests: dict[bytes, IdleRequest] = {}
        self.opened: dict[bytes, tuple[bytes, SessionWindow]] = {}
        """The windows this worker stored, as it stored them (the table's bytes) and opened: a
        busy session's window is read back at every batch, and parsing it (its pending turns
        opened) cost as much as deciding the batch's turns. Cleared at every rebalance."""

    async def apply_batch(self, records: Sequence[InputRecord]) -> None:
        """Decide every record, send what it promoted, then store the windows and progress."""
        batch = _Batch()
        batch.vectors = await self.turn_vectors(records, batch.read)
        for record in records:
            applied = apply_or_dead_letter(
                partial(self.apply, batch=batch), self.dead_letters, stage=STAGE, clock=self.clock
            )
            await applied(record)
        await sent_in_key_order(batch.outgoing)
        for key, (partition, window) in batch.windows.items():
            if window is None:
                delete_in_partition(self.windows, partition, key)
                self.idle_requests.pop(key, None)
                self.opened.pop(key, None)
            else:
                stored = await self.keys.window_to_store(window)
                set_in_partition(self.windows, partition, key, stored)
                self.opened[key] = (stored, window)
        await self.progress.store(highest_offsets(records))

    async def turn_vectors(
        self,
        records: Sequence[InputRecord],
        read: dict[tuple[int, int], TurnsTopicEvent] | None = None,
    ) -> dict[str, TurnVector]:
        """The embeddings of the batch's turns, in one call, when the topic-shift trigger is on;
        each record read on the way is kept in `read`, by partition and offset.

        A record that cannot be read is left to `apply`, which says why. Outages of the key
        store and the embedder are waited out; a batch the embedder refuses (not an outage) is
        logged and decided without vectors, so no turn of it starts a new topic."""
        if self.embedder is None:
            return {}
        turns: list[TurnRecorded] = []
        for record in records:
            reading = partial(self.keys.read, read_turns_record, record.key, record.value)
            try:
                command = await through_outages(reading, f"reading {record.position}")
            except (KeyDestroyed, InvalidRecord):
                continue
            if read is not None:
                read[(record.partition, record.offset)] = command
            if isinstance(command, TurnRecorded):
                turns.append(command)
        if not turns:
            return {}
        embed = partial(asyncio.to_thread, self.embedder.embed, [t.content for t in turns])
        try:
            vectors = await through_outages(embed, f"embedding {len(turns)} turns")
        except Exception:
            log.exception("the embedder refused %d turns: decided without topic", len(turns))
            return {}
        model = self.embedder.model_name
        return {t.event_id: turn_vector(model, v) for t, v in zip(turns, vectors, strict=True)}

    async def apply(self, record: InputRecord, batch: _Batch) -> None:
        """Decide one record against the batch's windows; nothing is written until the batch
        is (a record retried through an outage decides again from the same state)."""
        if not applies_to(record.redrive, STAGE):  # a redrive addressed to another stage
            return
        command = batch.read.get((record.partition, record.offset))
        try:
            if command is None:
                command = await self.keys.read(read_turns_record, record.key, record.value)
        except KeyDestroyed:  # its session was forgotten: nothing of it is promoted
            log.info("skipped a forgotten record at %s", record.position)
            return
        except InvalidRecord as exc:
            await self._dead_letter(record, str(exc))
            return
        if isinstance(command, UserForgotten):
            await self.forget_user(command, record, batch)
            return
        await self._decide(command, record, batch)

    async def _decide(self, command: WindowInput, record: InputRecord, batch: _Batch) -> None:
        key = command.key.encode()
        decision = decide(
            await self.window_of(key, batch),
            command,
            offset=record.offset,
            policy=self.settings.window,
            partition=record.partition,
            vector=batch.vectors.get(command.event_id),
        )
        if decision.rejected:
            await self._dead_letter(record, decision.rejected)
            return
        if decision.ignored:
            log.info("ignored %s for %s: %s", command.event_type, command.key, decision.ignored)
            return
        for snapshot in decision.snapshots:
            await self._send(batch, snapshot, f"snapshot {snapshot.event_id}")
            metrics.promoted(snapshot.reason, snapshot.turns[-1].occurred_at, snapshot.occurred_at)
            log.info(
                "promoted snapshot %s seq=%s (%s, %d turns)",
                snapshot.event_id,
                snapshot.seq,
                snapshot.reason,
                len(snapshot.turns),
            )
        if decision.forgotten is not None:
            await self._send(batch, decision.forgotten, decision.forgotten.event_type)
            log.info("forgot the open turns of session %s", command.key)
        if decision.retired:
            log.info("retired the quiet window of session %s", command.key)
        batch.windows[key] = (record.partition, None if decision.retired else decision.window)

    async def window_of(self, key: bytes, batch: _Batch) -> SessionWindow | None:
        """The session's window as this batch has it so far, else as the table holds it."""
        if key in batch.windows:
            return batch.windows[key][1]
        stored = self.windows.get(key)
        if not stored:
            return None
        if (known := self.opened.get(key)) is not None and known[0] is stored:
            return known[1]
        try:
            return await self.keys.stored_window(stored)
        except KeyDestroyed:  # the session was forgotten before this stage read the request
            return forgotten_turns(window_facts(stored))

    async def forget_user(self, request: UserForgotten, record: InputRecord, batch: _Batch) -> None:
        """Drop the open turns of the user's sessions on this partition and say so on the
        snapshots topic (a redelivery repeats both, to the same effect)."""
        if request.turns_partition != record.partition:
            reason = (
                f"UserForgotten for partition {request.turns_partition} "
                f"was written to partition {record.partition}"
            )
            await self._dead_letter(record, reason)
            return
        held = {  # their open turns are dropped: nothing to open
            key: window_facts(stored)
            for key, stored in list(self.windows.items())
            if stored and is_window_of(key, request.user_id)
        }
        for key, (_, window) in batch.windows.items():
            if is_window_of(key, request.user_id):
                if window is None:
                    held.pop(key, None)
                else:
                    held[key] = window
        cleared, fact = forget_user_windows(held.values(), request, record.partition)
        await self._send(batch, fact, fact.event_type)
        for window in cleared:
            batch.windows[window_key(window)] = (record.partition, window)
        log.info("forgot the open turns of %d sessions of a user", len(cleared))

    async def _send(
        self, batch: _Batch, event: SnapshotPromoted | SessionsForgotten, what: str
    ) -> None:
        value = await self.keys.encode(event)
        batch.outgoing.append(Outgoing(self.snapshots, event.key.encode(), value, what))

    async def _dead_letter(self, record: InputRecord, reason: str) -> None:
        await dead_letter(self.dead_letters, record, stage=STAGE, reason=reason, clock=self.clock)

    async def request_idle_promotions(self, app: faust.App) -> None:
        """The idle timer: a `SessionIdled` command for every quiet window of this worker's
        partitions (pending turns to promote, or nothing pending past the dedup horizon)."""
        if app.rebalancing or app.tables.recovery.in_recovery:  # type: ignore[attr-defined]
            return
        try:
            await self.scan_for_idle_sessions()
        except Exception:  # the timer must survive whatever one scan ran into
            log.exception(
                "idle scan failed; the next one runs in %s", self.settings.idle_check_interval
            )

    async def scan_for_idle_sessions(self) -> None:
        now = self.clock()
        held: set[bytes] = set()
        for key, stored in list(self.windows.items()):
            if not stored or is_progress_key(key):
                continue
            held.add(key)
            window = window_facts(stored)  # times and numbering: no content needed
            requested = self.idle_requests.get(key)
            if not should_request_idle(window, now, self.settings.window, requested):
                continue
            self.idle_requests[key] = IdleRequest(window.seq, now)
            log.info("session %s quiet: requesting window %d's promotion", key, window.seq)
            await self.turns.send(key=key, value=encode(idle_command(window, now)), force=True)
        for gone in set(self.idle_requests) - held:  # retired, forgotten, or moved away
            del self.idle_requests[gone]


def create_window_app(
    settings: StreamSettings,
    clock: Clock = utc_now,
    keys: StageKeys = NO_KEYS,
    embedder: Embedder | None = None,
) -> faust.App:
    """The window stage; `embedder` embeds turns for the topic-shift trigger when it is on."""
    app = faust_app(STAGE, settings)
    stage = WindowStage(app, settings, clock, keys, embedder)

    @app.agent(stage.turns, concurrency=1)
    async def promote_sessions(stream: faust.StreamT[bytes]) -> None:
        await apply_batches(
            stream,
            stage.guard,
            stage.apply_batch,
            max_records=BATCH_RECORDS,
            within=BATCH_SECONDS,
        )

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_opened(sender: faust.App, revoked: object, **_: object) -> None:
        stage.opened.clear()

    @app.timer(settings.idle_check_interval.total_seconds())  # type: ignore[untyped-decorator]
    async def request_idle_promotions() -> None:
        await stage.request_idle_promotions(app)

    return app
