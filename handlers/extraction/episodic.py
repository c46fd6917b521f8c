"""Episodic extraction: what happened in a conversation, as titled episode summaries.

One memory per episode (usually one per snapshot, none for small talk):

* ``text`` — the summary, one to three sentences in the third person ("The user planned …");
* ``subject`` — whose episode it is: "the user" (almost always: the conversation is theirs), or
  another named person for something that happened to that person alone ("John had a car
  accident"). The AI assistant has no episodes of its own: an episode the LLM gives to
  "assistant" ("The assistant helped the user …") is the user's. ``owner`` is always ``user``:
  an episode is never something the assistant provided;
* ``category`` — always ``event``;
* ``attributes`` — ``title``; ``participants`` (as memories name them: "the user", "John",
  "assistant"; only people who spoke in or are named in the conversation, the subject always
  among them; the conversation's speakers when the LLM lists nobody valid); ``started_at`` and
  ``ended_at``, the time span of the snapshot's turns (the earliest and the latest turn's
  ``occurred_at``, ISO 8601), never a time the LLM wrote: the model sees no clock, and a past
  event the user recounts ("last week I …") has no date we could trust, so the span says when
  the episode was told; ``happened`` (when the event itself took place, as the conversation
  says it — "7 May 2023", "the week before 9 June 2023" — or null): the extractor sees the
  conversation's date and the summary's relative times are made absolute against it
  (`handlers.extraction.dates`), so ``happened`` is the first date the grounded summary names;
  ``outcome`` (how it ended, or null while it is open).

The prompt follows the semantic one's lessons for small models: "the user" instead of named
few-shot speakers, a placeholder [Person A], explicit empty examples, one JSON object, the
conversation's language. What comes back is validated strictly (`InvalidExtraction` names the
field, so the retry can fix it) and re-attributed by `handlers.attribution`; after that:

* a summary in the first person copies a message and is dropped (whose "I" cannot be known);
  a retry asking for the third person did not make the 1.5B model rewrite it;
* a summary must rest on the conversation's words (an example copied from the prompt does not);
* the user's name is written "the user" throughout the title, summary and outcome;
* a conversation in which no person ever speaks of themselves has no episode (`has_a_story`).
"""

from __future__ import annotations

import re
from datetime import date

from pydantic import BaseModel, ConfigDict, Field

from events.memories import USER_SUBJECT, MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.attribution import (
    CURRENT_USER,
    Attribution,
    canonical_subject,
    rests_on,
    subject_in_statement,
    with_user_as_subject,
)
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.dates import dated_turns, dates_in, ground_relative_times, without_dates
from handlers.extraction.drafts import in_first_person, one_line, validated
from handlers.extraction.json_answer import items_under
from handlers.extraction.names import invented_names
from handlers.extraction.narration import only_narration
from handlers.extraction.pleasantries import only_pleasantries
from handlers.extraction.transcript import Transcript, conversation_prompt, transcript_of

CATEGORY = "event"
_KEY = "episodes"

SYSTEM_PROMPT = """\
You write the episodes of a conversation for a long-term memory: what happened, told so that \
it can be recalled later.

Speakers: [user] is the current user. [assistant] is the AI assistant. Any other label, such as \
[Person A], is another real person taking part in the conversation.

Return one JSON object: {"episodes": [ ... ]}. Each episode is an object with:
- "subject": whose episode it is: "the user" (almost always), or the name of another person \
when it is something that happened to that person alone.
- "title": a short title of a few words.
- "summary": one to three sentences in the third person and in your own words, starting with \
the subject: what happened or what was done, and when, as a date, if the conversation says it. \
Never write "I", "my" or "me".
- "participants": who took part: "the user", "assistant", and the names of other people.
- "outcome": how it ended (what was decided, chosen, booked, fixed or learned), or null if it \
is still open.

Rules:
- An episode is an event worth remembering later: something that happened in a person's life \
(a trip, an interview, a move, an illness), or a task the people and the assistant worked \
through together (planning, choosing, fixing, deciding).
- Usually one episode per conversation; more only for unrelated events.
- Greetings, small talk, and a single general question with its answer are not episodes.
- Never invent details, dates or names that are not in the conversation.
- If nothing happened that is worth remembering, return {"episodes": []}.

Example conversation:
[user]: Person A, shall we go hiking on Saturday?
[Person A]: Yes! Let's do the lake trail, I'll drive.
[user]: Great. Assistant, what will the weather be like?
[assistant]: Saturday looks sunny, around 20°C.
Example answer:
{"episodes": [{"subject": "the user", "title": "Planning a Saturday hike", "summary": \
"The user and Person A planned a hike on the lake trail on Saturday. Person A will drive, and \
the assistant said the weather will be sunny.", "participants": ["the user", "Person A", \
"assistant"], "outcome": "They will hike the lake trail on Saturday."}]}

Example conversation:
[user]: hi, how are you?
[assistant]: Fine, thanks! How can I help?
Example answer:
{"episodes": []}

Example conversation:
[user]: How do I reverse a list in Python?
[assistant]: Use reversed(items) or items[::-1].
Example answer:
{"episodes": []}
"""

LANGUAGE_INSTRUCTIONS = {
    "en": "Write the title, summary and outcome in English.",
    "zh": "The conversation is in Chinese: write the title, summary and outcome in Chinese, "
    "starting the summary with 用户 for the current user.",
}


class EpisodeDraft(BaseModel):
    """One episode as the LLM wrote it (before attribution and times are enforced)."""

    model_config = ConfigDict(extra="ignore")

    subject: str = Field(default="", max_length=200)
    title: str = Field(min_length=1, max_length=200)
    summary: str = Field(min_length=1, max_length=2_000)
    participants: list[str] = Field(default_factory=list, max_length=30)
    outcome: str | None = Field(default=None, max_length=1_000)


class EpisodicExtractor:
    """Extracts episodes (title, summary, participants, time span, outcome) from a snapshot."""

    memory_type: MemoryType = "episodic"
    prompt_version = "episodic-2"

    def worth_asking(self, snapshot: SnapshotPromoted) -> bool:
        """Only a conversation in which someone speaks of themselves (`has_a_story`) and says
        more than pleasantries (`only_pleasantries`)."""
        transcript = transcript_of(snapshot)
        return has_a_story(transcript) and not only_pleasantries(transcript)

    def prompt(self, snapshot: SnapshotPromoted) -> list[dict[str, str]]:
        return conversation_prompt(SYSTEM_PROMPT, LANGUAGE_INSTRUCTIONS, snapshot, dated=True)

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        transcript = transcript_of(snapshot)
        drafts = [
            validated(EpisodeDraft, item, _KEY, index)
            for index, item in enumerate(items_under(answer, _KEY))
        ]
        if not has_a_story(transcript):
            return []
        started = min(turn.occurred_at for turn in snapshot.turns).isoformat()
        ended = max(turn.occurred_at for turn in snapshot.turns).isoformat()
        memories: dict[tuple[str, str], MemoryContent] = {}
        turns = dated_turns(snapshot)
        for index, draft in enumerate(drafts):
            memory = _memory_from(
                draft, transcript, index, turns, started_at=started, ended_at=ended
            )
            if memory is not None:
                title = str(memory.attributes["title"]).casefold()
                memories.setdefault((memory.subject.casefold(), title), memory)
        return list(memories.values())


def _memory_from(
    draft: EpisodeDraft,
    transcript: Transcript,
    index: int,
    turns: list[tuple[date, str]],
    *,
    started_at: str,
    ended_at: str,
) -> MemoryContent | None:
    title = _required(draft.title, index, "title")
    summary = _required(draft.summary, index, "summary")
    if in_first_person(summary):
        return None  # a copied message: whose "I" it is cannot be known for sure
    if only_narration(summary, transcript.names):
        return None  # "John congratulated the user. He asked how …": what was said, not done
    attribution = _attribution(draft.subject, summary, transcript, index)
    if attribution is None:
        return None  # a person who is not in the conversation (an example's placeholder)
    summary = ground_relative_times(summary, turns).text
    messages = [m.content for m in transcript.messages]
    if not rests_on(without_dates(summary), messages, names=transcript.names):
        return None  # not about this conversation: an invented or copied example episode
    if invented_names(without_dates(summary), messages, names=transcript.names):
        return None  # a place or a person no one in the conversation named
    summary = _the_user_for_their_name(summary, transcript)
    outcome = ground_relative_times(one_line(draft.outcome or ""), turns).text
    outcome = _the_user_for_their_name(outcome, transcript)
    named = dates_in(summary)
    return MemoryContent(
        subject=attribution.subject,
        owner="user",
        text=summary,
        category=CATEGORY,
        attributes={
            "title": _the_user_for_their_name(title, transcript),
            "participants": _participants(draft.participants, attribution, transcript),
            "started_at": started_at,
            "ended_at": ended_at,
            "happened": named[0] if named else None,
            "outcome": outcome if outcome.casefold() not in _NO_OUTCOME else None,
        },
    )


_NO_OUTCOME = frozenset({"", "null", "none", "n/a", "unknown", "无", "暂无", "未知"})


def _the_user_for_their_name(text: str, transcript: Transcript) -> str:
    """The current user's name written as "the user" ("用户" in Chinese) throughout, as every
    memory names them: "Ana and John planned …" → "The user and John planned …"."""
    name = transcript.user_name
    if not name or not text:
        return text
    text = with_user_as_subject(text, name)
    if transcript.language == "zh":
        return text.replace(name, "用户")
    return re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", "the user", text)


_SELF_REFERENCE = re.compile(
    r"(?<![\w'-])(I|I'm|I've|I'd|I'll|us)(?![\w'-])"
    r"|(?i:\b(me|my|mine|myself|we|we're|we've|we'll|our|ours|ourselves)\b)|我"
)


def has_a_story(transcript: Transcript) -> bool:
    """Whether anything in the conversation happened to the people in it: a person (the user
    or another named human) speaks of themselves at least once ("I", "my", "we", "我" …).

    Greetings ("hey, how's it going?") and a single general question with its answer ("What's
    the capital of Australia?") have no such message, and small models still write an episode
    for them ("The user greeted the assistant."); a trip, an interview, a move, a task the user
    works through with the assistant always has one ("I'm planning …", "my flat", "我上周…").
    """
    return any(
        _SELF_REFERENCE.search(text.replace("\u2019", "'")) for text in transcript.humans_said
    )


def _required(value: str, index: int, field: str) -> str:
    text = one_line(value)
    if not text:
        raise InvalidExtraction(f'"{_KEY}"[{index}].{field}: must not be blank')
    return text


def _attribution(
    subject: str, summary: str, transcript: Transcript, index: int
) -> Attribution | None:
    """Whose episode it is: the participant the summary opens with, else the LLM's subject,
    else the user; the assistant's episodes are the user's; a person absent from the
    conversation makes the episode ungrounded (None)."""
    user_name, speakers = transcript.user_name, transcript.speaker_names
    opening = subject_in_statement(summary, user_name=user_name, speaker_names=speakers)
    raw = opening or subject.strip() or USER_SUBJECT
    try:
        attribution = canonical_subject(raw, user_name=user_name, speaker_names=speakers)
    except ValueError as exc:
        raise InvalidExtraction(f'"{_KEY}"[{index}].subject: {exc}') from exc
    if attribution.kind == "assistant":
        return CURRENT_USER
    if attribution.kind == "third_party" and not _in_conversation(attribution.subject, transcript):
        return None
    return attribution


def _in_conversation(name: str, transcript: Transcript) -> bool:
    return name.casefold() in transcript.text.casefold()


def _participants(raw: list[str], subject: Attribution, transcript: Transcript) -> list[str]:
    """The LLM's participants as memories name them, kept only when they spoke in or are named
    in the conversation; the subject always included; the speakers when none is left."""
    spoke = transcript.speakers
    found: list[str] = []
    for name in raw:
        if not name.strip():
            continue
        try:
            who = canonical_subject(
                name, user_name=transcript.user_name, speaker_names=transcript.speaker_names
            )
        except ValueError:
            continue
        grounded = (
            who.subject in spoke
            if who.kind != "third_party"
            else _in_conversation(who.subject, transcript)
        )
        if grounded and who.subject not in found:
            found.append(who.subject)
    if not found:
        found = list(spoke)
    if subject.subject not in found:
        found.insert(0, subject.subject)
    return found
