"""What the scale benchmarks send: short sessions through the SDK, and histories built straight
into the topics with the real event models and codec.

* **Live sessions** (`conversation`): four turns that every memory type finds worth asking
  about (the user speaks of themselves: episodic; gives a standing instruction: procedural), the
  first carrying the session's token (`bench.timed_llm.TOKEN`) that the stub LLM's semantic
  facts are about (`bench.timed_llm.fact_statement`).
* **Closed sessions** (`closed_session`): one turn recorded `HISTORY_AGE` ago and its flush, as
  a session an application ended long ago leaves them in the turns topic; the window promotes
  it and (today) keeps its entry for ever.
* **History snapshots** (`history_snapshot`): two turns and the snapshot the window would have
  promoted from them (same ids: `events.snapshots.snapshot_id`), written to the turns and
  snapshots topics directly, so an extraction stage has its backlog without the window's time.

Everything is deterministic: ids and tokens derive from a run's salt and the indexes.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka import AIOKafkaProducer

from events.codec import encode
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from events.turns import SessionFlushRequested, TurnRecorded

HISTORY_AGE = timedelta(days=30)
"""How long ago a closed session of the history was recorded (far beyond any idle timeout or
dedup horizon the window may keep)."""


def token_for(salt: str, *parts: object) -> str:
    """A session marker matching `bench.timed_llm.TOKEN`: ``zq`` and 8 hex digits."""
    text = "|".join([salt, *map(str, parts)])
    return "zq" + hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def user_id(salt: str, index: int) -> str:
    return f"u-{salt}-{index:06d}"


def conversation(token: str) -> list[dict[str, str]]:
    """A short session every memory type asks the LLM about."""
    return [
        {"role": "user", "content": f"Hi! My locker code is {token}, I moved to Lisbon in May."},
        {"role": "assistant", "content": "Noted, I will remember your locker code."},
        {
            "role": "user",
            "content": 'From now on, always answer me in short bullet points; I call them "dots".',
        },
        {"role": "assistant", "content": "Understood: short bullet points from now on."},
    ]


def closed_session(
    user: str, session: str, now: datetime
) -> list[TurnRecorded | SessionFlushRequested]:
    """One turn recorded `HISTORY_AGE` before `now`, and the flush that closed its session."""
    at = now - HISTORY_AGE
    turn = TurnRecorded(
        event_id=f"{user}-{session}-t0",
        occurred_at=at,
        recorded_at=at,
        user_id=user,
        session_id=session,
        role="user",
        content=f"An old conversation, session {session}.",
    )
    flush = SessionFlushRequested(
        event_id=f"{user}-{session}-flush",
        occurred_at=at + timedelta(seconds=1),
        user_id=user,
        session_id=session,
    )
    return [turn, flush]


@dataclass(frozen=True)
class HistorySnapshot:
    turns: tuple[TurnRecorded, ...]
    snapshot: SnapshotPromoted


def history_snapshot(user: str, session: str, token: str, at: datetime) -> HistorySnapshot:
    """Two turns (the first with `token`) and the snapshot promoting them."""
    said = (
        ("user", f"My locker code is {token}, and I keep my locker numbers in my notes."),
        ("assistant", "Noted."),
    )
    turns = tuple(
        TurnRecorded(
            event_id=f"{user}-{session}-t{index}",
            occurred_at=at + timedelta(seconds=index),
            recorded_at=at + timedelta(seconds=index),
            user_id=user,
            session_id=session,
            role=role,  # type: ignore[arg-type]
            content=content,
        )
        for index, (role, content) in enumerate(said)
    )
    snapshot = SnapshotPromoted(
        event_id=snapshot_id(user, session, [t.event_id for t in turns]),
        occurred_at=turns[-1].recorded_at,
        user_id=user,
        session_id=session,
        seq=0,
        reason="flush",
        turns=tuple(
            SnapshotTurn(
                turn_id=t.event_id, role=t.role, content=t.content, occurred_at=t.occurred_at
            )
            for t in turns
        ),
    )
    return HistorySnapshot(turns, snapshot)


def history_snapshots(
    salt: str, users: range, sessions_per_user: int, now: datetime
) -> list[HistorySnapshot]:
    """`sessions_per_user` history snapshots for each user index in `users`, users interleaved
    (as many users' sessions arrive at once)."""
    start = now - HISTORY_AGE
    made = []
    for session in range(sessions_per_user):
        for index in users:
            user = user_id(salt, index)
            at = start + timedelta(minutes=session)
            made.append(history_snapshot(user, f"h{session}", token_for(salt, index, session), at))
    return made


Keyed = TurnRecorded | SessionFlushRequested | SnapshotPromoted


def keyed(events: Sequence[Keyed]) -> list[tuple[bytes, bytes]]:
    """(key, value) records as the SDK and the stages write them (unsealed: the stages read
    plaintext records as they read sealed ones)."""
    return [(event.key.encode(), encode(event)) for event in events]


async def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes, bytes]],
    *,
    max_batch_size: int | None = None,
) -> None:
    """Every record to `topic`, all in flight at once, and wait for the acks (`max_batch_size=1`
    on Tansu: its end offsets are exact only then, which table recovery and lag probes need)."""
    options: dict[str, Any] = {"max_batch_size": max_batch_size} if max_batch_size else {}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **options)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def utc_now() -> datetime:
    return datetime.now(UTC)
