"""A prompt-ready block of what an agent should know for its next answer, within a size limit.

Pure (docs/architecture.md, "Search"). `context_block` lays out, in this order and under fixed
labels in the conversation's language (English or Chinese):

1. the L0 profile of the current user;
2. the most relevant memories of each memory type, taken in turns across the types (the best of
   each type first), so one type cannot crowd out the others — the built-in types, then each
   custom type under its declared heading; each opens with the date it was
   said in brackets (``[8 May 2023]``), so an answer can place its relative times and tell an
   old fact from a new one;
3. the user's past messages that match the query best (`handlers.recall`), dated the same way,
   taken in the same turns as a further section — what extraction left out is still there to
   read, verbatim;
4. the session so far (short-term memory), its most recent messages last — when it does not fit,
   its oldest lines are left out and a marker line says so.

Nothing is ever cut in the middle of a memory; a section that cannot fit a single line is left
out whole. The result never exceeds `max_chars`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

from events.memories import MEMORY_TYPES, MemoryType
from handlers.extraction.dates import chinese_day, english_day
from handlers.recall import PastMessage, shown_text
from handlers.rendering import Language

LABELS: dict[Language, dict[str, str]] = {
    "en": {
        "profile": "## About the user",
        "semantic": "## Facts",
        "episodic": "## Past events",
        "procedural": "## How to work with the user",
        "taxonomic": "## Terms",
        "past": "## From earlier conversations",
        "history": "## This conversation so far",
        "omitted": "(earlier messages left out)",
    },
    "zh": {
        "profile": "## 关于用户",
        "semantic": "## 事实",
        "episodic": "## 过往经历",
        "procedural": "## 与用户合作的方式",
        "taxonomic": "## 术语",
        "past": "## 以往对话摘录",
        "history": "## 本次对话",
        "omitted": "（更早的消息已省略）",  # noqa: RUF001 (Chinese punctuation)
    },
}
PROFILE_ORDER = ("name", "location", "occupation", "employer", "age", "gender", "language")


@dataclass(frozen=True)
class ContextMemory:
    """One memory offered for the context, in its type's relevance order."""

    memory_type: MemoryType
    text: str
    said_on: date | None = None
    """The day the memory's current version was learned (its event time), shown before it."""


def dated_line(memory: ContextMemory, language: Language) -> str:
    """``- [8 May 2023] text`` (``- [2023年5月8日] text`` in Chinese); undated: ``- text``."""
    return _dated(memory.text, memory.said_on, language)


def past_message_line(message: PastMessage, language: Language) -> str:
    """``- [8 May 2023] Caroline: text``, the text on one line and cut to
    `handlers.recall.MESSAGE_CHARS`."""
    return _dated(f"{message.speaker}: {shown_text(message.text)}", message.said_on, language)


def _dated(text: str, day: date | None, language: Language) -> str:
    if day is None:
        return f"- {text}"
    shown = chinese_day(day) if language == "zh" else english_day(day)
    return f"- [{shown}] {text}"


def profile_lines(fields: Mapping[str, str], language: Language) -> list[str]:
    """The profile as lines, in a fixed order; the name field is phrased as a sentence."""
    ordered = sorted(
        fields.items(),
        key=lambda item: (
            PROFILE_ORDER.index(item[0]) if item[0] in PROFILE_ORDER else 99,
            item[0],
        ),
    )
    lines = []
    for field, value in ordered:
        if field == "name":
            value = f"用户名叫{value}" if language == "zh" else f"The user's name is {value}."
        lines.append(f"- {value}")
    return lines


def context_block(
    *,
    profile: Mapping[str, str],
    memories: Sequence[ContextMemory],
    history: str,
    language: Language,
    max_chars: int,
    custom_headings: Mapping[MemoryType, str] | None = None,
    past_messages: Sequence[PastMessage] = (),
) -> str:
    """The context block (see the module doc), at most `max_chars` characters. A custom type's
    memories go under `custom_headings[type]` (default: the type's name); `past_messages` are
    given best first."""
    headings = dict(custom_headings or {})
    for memory in memories:
        if memory.memory_type not in MEMORY_TYPES:
            headings.setdefault(memory.memory_type, memory.memory_type)
    labels = {**LABELS[language], **{t: f"## {heading}" for t, heading in headings.items()}}
    types = [*MEMORY_TYPES, *(t for t in headings if t not in MEMORY_TYPES)]
    sections_in_turns = [*types, "past"]
    sections: list[list[str]] = []
    budget = max_chars

    def add(label: str, lines: list[str]) -> None:
        nonlocal budget
        kept: list[str] = []
        cost = len(label) + (2 if sections else 0)  # the label line, and a blank line before it
        for line in lines:
            if cost + 1 + len(line) > budget:
                break
            kept.append(line)
            cost += 1 + len(line)
        if kept:
            sections.append([label, *kept])
            budget -= cost

    add(labels["profile"], profile_lines(profile, language))
    seen = {line[2:] for section in sections for line in section[1:]}
    queues = {
        t: [dated_line(m, language) for m in memories if m.memory_type == t and m.text not in seen]
        for t in types
    }
    queues["past"] = [past_message_line(message, language) for message in past_messages]
    chosen: dict[str, list[str]] = {section: [] for section in sections_in_turns}
    while any(queues.values()):
        for section in sections_in_turns:  # one line of each section per round
            if not queues[section]:
                continue
            line = queues[section].pop(0)
            opening = 0 if chosen[section] else len(labels[section]) + 2
            if opening + len(line) + 1 > budget:
                queues[section].clear()  # the next ones of this section are no shorter in rank
                continue
            chosen[section].append(line)
            budget -= opening + len(line) + 1
    for section in sections_in_turns:
        if chosen[section]:
            sections.append([labels[section], *chosen[section]])
    if history.strip():
        lines = history.strip().splitlines()
        kept = _latest_fitting(lines, budget - len(labels["history"]) - 3, labels["omitted"])
        if kept:
            add(labels["history"], kept)
    return "\n\n".join("\n".join(section) for section in sections)


def _latest_fitting(lines: list[str], budget: int, marker: str) -> list[str]:
    """The last lines that fit `budget` (newline-joined), with `marker` first if any were left
    out."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    kept.reverse()
    if len(kept) < len(lines):
        while kept and used + len(marker) + 1 > budget:
            used -= len(kept.pop(0)) + 1
        return [marker, *kept] if kept else []
    return kept
