"""A snapshot as the conversation text the extractors show the LLM."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from events.memories import ASSISTANT_SUBJECT, USER_SUBJECT
from events.snapshots import SnapshotPromoted
from handlers.attribution import Attribution
from handlers.extraction.dates import date_instruction
from handlers.messages import ChatMessage
from handlers.rendering import Language, conversation_language, render_conversation


@dataclass(frozen=True)
class Transcript:
    """The rendered conversation and who spoke in it."""

    text: str
    user_name: str | None
    speaker_names: frozenset[str]
    language: Language
    messages: tuple[ChatMessage, ...] = ()

    def evidence_for(self, subject: str, kind: str) -> list[str]:
        """The messages a fact about `subject` must rest on: the current user's own messages
        (and the AI's, which restate them); a speaker's own messages and any message naming
        them; the AI assistant's messages."""
        if kind == "current_user":
            return [m.content for m in self.messages if m.role == "user" or m.name is None]
        if kind == "assistant":
            return [m.content for m in self.messages if m.role == "assistant" and not m.name]
        named = subject.casefold()
        return [
            m.content
            for m in self.messages
            if (m.name or "").casefold() == named or named in m.content.casefold()
        ]

    def said_by(self, attribution: Attribution) -> list[str]:
        """What one participant said themselves: the current user's own messages (not the
        AI's restatements of them), a named speaker's own messages, or the AI assistant's."""
        if attribution.kind == "current_user":
            return [m.content for m in self.messages if m.role == "user"]
        if attribution.kind == "assistant":
            return [m.content for m in self.messages if m.role == "assistant" and not m.name]
        named = attribution.subject.casefold()
        return [m.content for m in self.messages if (m.name or "").casefold() == named]

    @property
    def names(self) -> list[str]:
        """Every person's name the conversation gives: the named speakers' and the current
        user's (when their messages carry one), sorted."""
        named = set(self.speaker_names) | ({self.user_name} if self.user_name else set())
        return sorted(named)

    @property
    def humans_said(self) -> list[str]:
        """Every message a person wrote: the current user's and the named speakers'."""
        return [m.content for m in self.messages if m.role == "user" or m.name]

    @property
    def speakers(self) -> list[str]:
        """Who spoke, as memories name them, in order of first appearance: "the user", each
        named speaker, "assistant" (system and tool messages are not participants)."""
        seen: list[str] = []
        for m in self.messages:
            if m.role == "user":
                who = USER_SUBJECT
            elif m.role == "assistant":
                who = m.name or ASSISTANT_SUBJECT
            else:
                continue
            if who not in seen:
                seen.append(who)
        return seen


def transcript_of(snapshot: SnapshotPromoted) -> Transcript:
    """Render a snapshot's turns with the multi-speaker labels of `handlers.rendering`."""
    messages = [
        ChatMessage(role=turn.role, name=turn.name, content=turn.content, tool_name=turn.tool_name)
        for turn in snapshot.turns
    ]
    user_names = [m.name for m in messages if m.role == "user" and m.name]
    speakers = frozenset(m.name for m in messages if m.role == "assistant" and m.name)
    return Transcript(
        text=render_conversation(messages),
        user_name=user_names[0] if user_names else None,
        speaker_names=speakers,
        language=conversation_language(messages),
        messages=tuple(messages),
    )


def conversation_prompt(
    system_prompt: str,
    language_instructions: Mapping[str, str],
    snapshot: SnapshotPromoted,
    *,
    dated: bool = False,
) -> list[dict[str, str]]:
    """The chat messages every extractor sends: its system prompt, then the snapshot's
    conversation with the instruction for the conversation's language — and, when `dated`,
    the date it took place and how to write times (`handlers.extraction.dates`)."""
    transcript = transcript_of(snapshot)
    instruction = language_instructions[transcript.language]
    if dated and snapshot.turns:
        instruction = f"{date_instruction(snapshot, transcript.language)} {instruction}"
    return [
        {"role": "system", "content": system_prompt},
        {
            "role": "user",
            "content": f"Conversation:\n{transcript.text}\n\n{instruction} Answer with the JSON.",
        },
    ]
