"""A snapshot as the conversation text the extractors show the LLM."""

from __future__ import annotations

from dataclasses import dataclass

from events.snapshots import SnapshotPromoted
from handlers.messages import ChatMessage
from handlers.rendering import Language, conversation_language, render_conversation


@dataclass(frozen=True)
class Transcript:
    """The rendered conversation and who spoke in it."""

    text: str
    user_name: str | None
    speaker_names: frozenset[str]
    language: Language


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
    )
