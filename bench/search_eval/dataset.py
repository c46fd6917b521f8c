"""The labelled search set (``data.json`` beside this module), read and checked.

The file holds several users' *current* memories and queries, each query labelled with the ids of
the memories that answer it. A memory's owner follows docs/architecture.md, "Speakers": `agent`
for the subject "assistant", `user` otherwise; a taxonomic memory's subject is its term.
Languages are not labelled but detected with the product's own rule
(`handlers.rendering.detect_language`); a query is *cross-lingual* when none of its answers is
in the query's language.

`documents` turns a user's memories and their vectors into the documents the read model holds
(the fields of `memstream.sdk.search_index.INDEXED_FIELDS`), which is what `UserIndex.built` gets
from MongoDB.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from events.memories import MEMORY_TYPES, MemoryType
from handlers.rendering import Language, detect_language
from projections.vectors import pack_vector

DEFAULT_DATA = Path(__file__).with_name("data.json")
ASSISTANT = "assistant"
CREATED = datetime(2026, 4, 30, 12, 0, tzinfo=UTC)


class DataFormatError(ValueError):
    """The labelled set is malformed; the message names the offending entry."""


@dataclass(frozen=True)
class Memory:
    id: str
    memory_type: MemoryType
    subject: str
    text: str

    @property
    def owner(self) -> str:
        return "agent" if self.subject.casefold() == ASSISTANT else "user"

    @property
    def language(self) -> Language:
        return detect_language([self.text])


@dataclass(frozen=True)
class User:
    user_id: str
    memories: tuple[Memory, ...]


@dataclass(frozen=True)
class Query:
    id: str
    user_id: str
    text: str
    answers: tuple[str, ...]

    @property
    def language(self) -> Language:
        return detect_language([self.text])


@dataclass(frozen=True)
class LabelledSet:
    users: tuple[User, ...]
    queries: tuple[Query, ...]

    def memory(self, memory_id: str) -> Memory:
        for user in self.users:
            for memory in user.memories:
                if memory.id == memory_id:
                    return memory
        raise KeyError(memory_id)

    def is_cross_lingual(self, query: Query) -> bool:
        """No answer is written in the query's language."""
        return all(self.memory(a).language != query.language for a in query.answers)

    def answer_types(self, query: Query) -> tuple[str, ...]:
        """The memory types of the query's answers, each once, in `MEMORY_TYPES` order."""
        found = {self.memory(a).memory_type for a in query.answers}
        return tuple(t for t in MEMORY_TYPES if t in found)


def load(path: Path = DEFAULT_DATA) -> LabelledSet:
    return parse(json.loads(path.read_text(encoding="utf-8")))


def parse(raw: Mapping[str, Any]) -> LabelledSet:
    """The labelled set, or `DataFormatError`: ids unique, every answer one of the query's
    user's memories, memory types known."""
    users: list[User] = []
    owner_of: dict[str, str] = {}
    for entry in raw.get("users", []):
        user_id = str(entry["user_id"])
        memories = []
        for item in entry["memories"]:
            if item["type"] not in MEMORY_TYPES:
                raise DataFormatError(f"{item['id']}: unknown memory type {item['type']!r}")
            if item["id"] in owner_of:
                raise DataFormatError(f"{item['id']}: duplicate memory id")
            owner_of[item["id"]] = user_id
            memories.append(Memory(item["id"], item["type"], item["subject"], item["text"]))
        users.append(User(user_id, tuple(memories)))
    queries: list[Query] = []
    seen: set[str] = set()
    for item in raw.get("queries", []):
        query = Query(item["id"], item["user_id"], item["text"], tuple(item["answers"]))
        if query.id in seen:
            raise DataFormatError(f"{query.id}: duplicate query id")
        seen.add(query.id)
        if not query.answers:
            raise DataFormatError(f"{query.id}: no answers")
        for answer in query.answers:
            if owner_of.get(answer) != query.user_id:
                raise DataFormatError(f"{query.id}: {answer} is not a memory of {query.user_id}")
        queries.append(query)
    return LabelledSet(tuple(users), tuple(queries))


def documents(user: User, vectors: Sequence[Sequence[float]], model: str) -> list[dict[str, Any]]:
    """The user's memories as the read model stores current memories (one vector each)."""
    return [
        {
            "memory_id": memory.id,
            "version": 1,
            "status": "current",
            "memory_type": memory.memory_type,
            "user_id": user.user_id,
            "agent_id": None,
            "subject": memory.subject,
            "owner": memory.owner,
            "text": memory.text,
            "category": None,
            "attributes": {},
            "reinforcement_count": 0,
            "created_at": CREATED - timedelta(minutes=position),
            "updated_at": CREATED - timedelta(minutes=position),
            "embedding": pack_vector(vector),
            "embedding_model": model,
        }
        for position, (memory, vector) in enumerate(zip(user.memories, vectors, strict=True))
    ]
