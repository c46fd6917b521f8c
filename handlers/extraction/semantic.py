"""Semantic extraction: facts about the people in a conversation (and what the AI provided).

The prompt speaks of "the user" (named few-shot examples leak their names into small models'
output), shows an explicit empty result, and asks for one JSON object. What comes back is
validated, filtered and re-attributed by `handlers.attribution`, never trusted as is.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from events.memories import USER_SUBJECT, MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.attribution import (
    Attribution,
    canonical_subject,
    rests_on,
    subject_in_statement,
    with_user_as_subject,
)
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.json_answer import items_under
from handlers.extraction.transcript import Transcript, transcript_of

ProfileField = Literal["name", "age", "gender", "location", "occupation", "employer", "language"]
PROFILE_FIELDS: tuple[str, ...] = get_args(ProfileField)
CATEGORIES = ("basic_info", "preference", "relationship", "work", "health", "plan", "other")

SYSTEM_PROMPT = """\
You extract facts for a long-term memory from a conversation.

Speakers: [user] is the current user. [assistant] is the AI assistant. Any other label, such as \
[Person A], is another real person taking part in the conversation.

Return one JSON object: {"facts": [ ... ]}. Each fact is an object with:
- "subject": who the fact is about: "the user" for the current user; the person's name for \
another named person; "assistant" only for a concrete recommendation or plan the AI assistant \
gave that the user may refer to later.
- "statement": one short sentence in the third person that starts with the subject, in your \
own words, e.g. "The user works at a bank." Never copy a message. Never write "I", "my" or "me".
- "owner": "agent" only when the subject is the assistant, otherwise "user".
- "category": one of basic_info, preference, relationship, work, health, plan, other.
- "profile_field": only for the current user's basic information, one of name, age, gender, \
location, occupation, employer, language; otherwise null.

Rules:
- Only lasting facts about the people that are worth remembering later: who they are, what they \
do, like, own, plan or need.
- Do not describe the conversation (who asked, greeted, thanked or answered what). No greetings, \
no small talk, no questions, no guesses, no general knowledge from the assistant's answers.
- A fact another person says about themselves is about that person, never about the user.
- If there is nothing worth remembering, return {"facts": []}.

Example conversation:
[user]: I moved to Lisbon last year and I teach maths.
[Person A]: I'm a nurse, I work nights.
[assistant]: Nice to meet you both! For Lisbon I recommend the 28 tram.
Example answer:
{"facts": [{"subject": "the user", "statement": "The user lives in Lisbon.", "owner": "user", \
"category": "basic_info", "profile_field": "location"}, {"subject": "the user", "statement": \
"The user is a maths teacher.", "owner": "user", "category": "basic_info", "profile_field": \
"occupation"}, {"subject": "Person A", "statement": "Person A is a nurse who works nights.", \
"owner": "user", "category": "work", "profile_field": null}, {"subject": "assistant", \
"statement": "The assistant recommended the 28 tram in Lisbon.", "owner": "agent", "category": \
"other", "profile_field": null}]}

Example conversation:
[user]: hi, how are you?
[assistant]: Fine, thanks! How can I help?
Example answer:
{"facts": []}

Example conversation:
[user]: How do I reverse a list in Python?
[assistant]: Use reversed(items) or items[::-1].
Example answer:
{"facts": []}
"""

LANGUAGE_INSTRUCTIONS = {
    "en": "Write the statements in English.",
    "zh": "The conversation is in Chinese: write the statements in Chinese, starting with 用户 "
    "for the current user.",
}


class FactDraft(BaseModel):
    """One fact as the LLM wrote it (before attribution is enforced)."""

    model_config = ConfigDict(extra="ignore")

    subject: str = Field(default="", max_length=200)
    statement: str = Field(min_length=1, max_length=1_000)
    owner: str | None = None
    category: str | None = None
    profile_field: str | None = None


class SemanticExtractor:
    """Extracts semantic facts (subject, statement, owner, category) from a snapshot."""

    memory_type: MemoryType = "semantic"
    prompt_version = "semantic-3"

    def prompt(self, snapshot: SnapshotPromoted) -> list[dict[str, str]]:
        transcript = transcript_of(snapshot)
        instruction = LANGUAGE_INSTRUCTIONS[transcript.language]
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {
                "role": "user",
                "content": f"Conversation:\n{transcript.text}\n\n{instruction} "
                "Answer with the JSON.",
            },
        ]

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        transcript = transcript_of(snapshot)
        memories: dict[tuple[str, str], MemoryContent] = {}
        for index, item in enumerate(items_under(answer, "facts")):
            draft = _draft(item, index)
            memory = _memory_from(draft, transcript, index)
            if memory is not None:
                memories.setdefault((memory.subject.casefold(), memory.text.casefold()), memory)
        return list(memories.values())


def _draft(item: dict[str, Any], index: int) -> FactDraft:
    try:
        return FactDraft.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidExtraction(f'"facts"[{index}].{where}: {first["msg"]}') from exc


def _memory_from(draft: FactDraft, transcript: Transcript, index: int) -> MemoryContent | None:
    statement = " ".join(draft.statement.split())
    if not statement or _in_first_person(statement):
        return None  # a quoted message, not a fact: whose "I" it is cannot be known for sure
    if _narrates_the_conversation(statement):
        return None  # "The user asked about …", "…?": what was said, not what is true
    attribution = _attribution(draft.subject, statement, transcript, index)
    if not _grounded(attribution, statement, transcript):
        return None
    if attribution.kind == "current_user":
        statement = with_user_as_subject(statement, transcript.user_name)
    category = draft.category if draft.category in CATEGORIES else "other"
    profile_field = draft.profile_field if attribution.subject == USER_SUBJECT else None
    attributes = {"profile_field": profile_field} if profile_field in PROFILE_FIELDS else {}
    return MemoryContent(
        subject=attribution.subject,
        owner=attribution.owner,
        text=statement,
        category=category,
        attributes=attributes,
    )


def _attribution(subject: str, statement: str, transcript: Transcript, index: int) -> Attribution:
    """Whose fact this is: the participant the statement opens with wins over the LLM's field."""
    user_name, speakers = transcript.user_name, transcript.speaker_names
    raw = subject_in_statement(statement, user_name=user_name, speaker_names=speakers) or subject
    try:
        return canonical_subject(raw, user_name=user_name, speaker_names=speakers)
    except ValueError as exc:
        raise InvalidExtraction(f'"facts"[{index}].subject: {exc}') from exc


_FIRST_PERSON = re.compile(
    r"(?<![\w'-])(I|I'm|I've|I'd|I'll)(?![\w'-])"
    r"|(?i:^(we|our)\b|\b(my|me|mine|myself)\b)|我"
)


def _in_first_person(statement: str) -> bool:
    """A statement in the first person copies a message instead of stating a fact."""
    return _FIRST_PERSON.search(statement.replace("\u2019", "'")) is not None


_NARRATION = re.compile(
    r"^(the user|user|the assistant|assistant)\s+(is\s+|was\s+)?"
    r"(asks?|asked|asking|greets?|greeted|greeting|says?|said|saying|thanks?|thanked|thanking|"
    r"answers?|answered|answering|repl(y|ies|ied)|replying|respond(s|ed)?|responding|"
    r"wants to know|wanted to know|provides tips|understands)\b"
    r"|^(用户|助手)(询问|问了|问|打招呼|感谢|回答)",
    re.IGNORECASE,
)


def _narrates_the_conversation(statement: str) -> bool:
    """A question, or a sentence about the conversation itself rather than about a person."""
    return statement.endswith(("?", "\uff1f")) or _NARRATION.match(statement) is not None


def _grounded(attribution: Attribution, statement: str, transcript: Transcript) -> bool:
    """Whether the fact can stand: a person it names takes part in or is named in the
    conversation (an example's placeholder or an invented name does not), what it says rests on
    that person's own messages (the user's allergy is not John's because it came right after
    John spoke), and an assistant fact says what the assistant did ("The assistant recommended
    …") instead of copying its reply."""
    if attribution.kind == "third_party" and (
        attribution.subject.casefold() not in transcript.text.casefold()
    ):
        return False
    names = [attribution.subject, *transcript.speaker_names]
    if transcript.user_name:
        names.append(transcript.user_name)
    evidence = transcript.evidence_for(attribution.subject, attribution.kind)
    if not rests_on(statement, evidence, names=names):
        return False
    if attribution.kind == "assistant":
        opening = subject_in_statement(
            statement, user_name=transcript.user_name, speaker_names=transcript.speaker_names
        )
        return opening == "assistant"
    return True
