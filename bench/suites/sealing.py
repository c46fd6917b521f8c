"""Sealing: what encrypting a turn's content costs next to encoding the turn, in CPU and bytes.

    python -m bench sealing [--quick]

Crypto-shredding (docs/forgetting-encryption.md) seals every turn's content with its session's
key when it is recorded and opens it wherever it is read (extraction, projector, replay, event
feed). This suite prices that against what every turn already costs: encoding the event with
the codec (`events.codec.encode`: pydantic's dump, then orjson). CPU only, in this process; no
broker, no database (key lookups are cached, see `memstream.keystore.mongo`).

For three turn sizes (a short reply, a typical chat message, a long paste), alternating which
side runs first from round to round:

- memstream: what sealing adds to one write and one read of the turn: `seal_text` of the content
  (fresh `os.urandom` nonce, associated data bound to the turn id and field) and the envelope's
  dump, as the writer does; then the envelope validated from that dump (base64 checked and
  decoded) and `open_text`, as a reader does;
- baseline: `encode` of the same `TurnRecorded`, unsealed.

Figures: microseconds per turn (median of the rounds; ratio ours/baseline), and the record's
bytes with its content sealed against unsealed (the size the broker, the record limit and the
window's snapshot budget see). No aim: the codec's encode is pydantic-core and orjson in Rust,
a few µs, so the ratio is large by construction; what matters is the absolute cost next to a
turn's whole path (the SDK records ~1,100 turns/s, ~0.9 ms a turn: BENCHMARKS.md, "ingest").
Where the time goes: AES-GCM itself is 1-3 µs (AES-NI); base64 both ways and the envelope's
validation (its base64 pattern, checked by pydantic-core) grow with the size and dominate a
long turn.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from bench.core import BenchContext, Figure, SuiteResult, alternate, median
from events.codec import encode
from events.sealed import Sealed
from events.turns import TurnRecorded
from handlers.sealing import (
    DataKey,
    associated_data,
    data_key_id,
    open_text,
    seal_text,
)

SENTENCE = "I would like to book a table for two at seven tonight, by the window if possible. "
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@dataclass(frozen=True)
class TurnSize:
    label: str
    content_bytes: int


TURN_SIZES: tuple[TurnSize, ...] = (
    TurnSize("short reply", 60),
    TurnSize("typical message", 300),
    TurnSize("long paste", 4_000),
)


def turn_of(size: TurnSize) -> TurnRecorded:
    """A turn whose content is `size.content_bytes` bytes of plain English."""
    content = (SENTENCE * (size.content_bytes // len(SENTENCE) + 1))[: size.content_bytes]
    return TurnRecorded(
        event_id="bench-turn-1",
        occurred_at=NOW,
        recorded_at=NOW,
        user_id="u1",
        session_id="s1",
        role="user",
        content=content,
    )


def bench_key() -> DataKey:
    return DataKey(data_key_id("session", "u1", "s1", 1), os.urandom(32))


def sealed_record(turn: TurnRecorded, key: DataKey) -> bytes:
    """The turn as it would travel with its content sealed (the field holds the envelope)."""
    associated = associated_data(turn.event_id, "content")
    sealed = seal_text(turn.content, key, associated=associated, nonce=os.urandom(12))
    payload = turn.model_dump(mode="json")
    payload["content"] = sealed.model_dump(mode="json")
    return orjson.dumps(payload)


def seal_and_open(turn: TurnRecorded, key: DataKey) -> Callable[[], object]:
    associated = associated_data(turn.event_id, "content")

    def once() -> object:
        sealed = seal_text(turn.content, key, associated=associated, nonce=os.urandom(12))
        wire = sealed.model_dump()  # what the writer puts in the event's JSON …
        return open_text(Sealed.model_validate(wire), key, associated=associated)  # … the reader

    return once


def encode_only(turn: TurnRecorded) -> Callable[[], object]:
    return lambda: encode(turn)


def micros_per_call(call: Callable[[], object], iterations: int) -> float:
    started = time.perf_counter()
    for _ in range(iterations):
        call()
    return (time.perf_counter() - started) / iterations * 1e6


def measure(size: TurnSize, iterations: int, rounds: int) -> dict[str, Any]:
    """Both sides for one turn size: µs per turn in every round, and the record sizes."""
    turn = turn_of(size)
    key = bench_key()
    sides = {"memstream": seal_and_open(turn, key), "baseline": encode_only(turn)}
    for call in sides.values():  # warm up: the key's AES context, pydantic's serializers
        micros_per_call(call, min(iterations, 200))
    rounds_of: dict[str, list[float]] = {"memstream": [], "baseline": []}
    for _, baseline_first in alternate(rounds):
        for side in ("baseline", "memstream") if baseline_first else ("memstream", "baseline"):
            rounds_of[side].append(micros_per_call(sides[side], iterations))
    return {
        "content_bytes": size.content_bytes,
        "micros": rounds_of,
        "record_bytes": {"memstream": len(sealed_record(turn, key)), "baseline": len(encode(turn))},
    }


def figures_of(size: TurnSize, measured: dict[str, Any]) -> list[Figure]:
    setting = f"{size.label}, {size.content_bytes:,} B"
    micros, record = measured["micros"], measured["record_bytes"]
    return [
        Figure(
            "sealing a turn",
            setting,
            "µs per turn",
            median(micros["memstream"]),
            median(micros["baseline"]),
            "codec encode of the same TurnRecorded",
            note="seal, dump, validate and open the content (AES-256-GCM, fresh nonce)",
        ),
        Figure(
            "sealed turn record",
            setting,
            "bytes",
            float(record["memstream"]),
            float(record["baseline"]),
            "the same record unsealed",
            note="content as a Sealed envelope (base64, key id, nonce, tag)",
        ),
    ]


def run(context: BenchContext) -> SuiteResult:
    iterations, rounds = (2_000, 2) if context.quick else (20_000, 5)
    figures: list[Figure] = []
    raw: dict[str, Any] = {"iterations": iterations, "rounds": rounds, "sizes": {}}
    for size in TURN_SIZES:
        measured = measure(size, iterations, rounds)
        raw["sizes"][size.label] = measured
        figures.extend(figures_of(size, measured))
        shown = {side: round(median(values), 2) for side, values in measured["micros"].items()}
        print(f"   sealing {size.label}: µs per turn {shown}", file=sys.stderr, flush=True)
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["sealing", *sys.argv[1:]]))
