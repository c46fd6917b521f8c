"""Procedural extraction: how things are to be done — standing rules, workflows, instructions.

One memory per procedure:

* ``attributes`` — ``kind`` (``rule``: how the assistant must always or never act;
  ``workflow``: ordered steps to get something done; ``instruction``: one thing to do in a given
  situation), ``trigger`` (when it applies; ``always`` for a rule that always holds), ``steps``
  (short imperatives), ``applies_to`` (whom it is for: "the user", or another named person such
  as "John") and ``given_by`` (who asked for it or provided it: "the user", "John",
  "assistant");
* ``subject`` — ``applies_to``: the person the procedure is for, so the user's rules and John's
  never reconcile with each other. A rule the assistant follows is *for* someone: "applies to
  the assistant" becomes the person who gave it (or the user);
* ``owner`` — ``user`` when a person asked for it or stated it (the current user or another
  named human: never ``agent``), ``agent`` when it is a workflow the AI assistant provided. So
  an assistant-provided workflow for the user has subject "the user" and owner ``agent``;
* ``text`` — a readable one-line rendering: "When <trigger>: <step 1>; <step 2>." ("Always: …"
  for rules that always hold; the same with full-width punctuation, "当<trigger>时" and "始终"
  for Chinese conversations);
* ``category`` — the kind.

A conversation in which no person gives or asks for a way of doing things has no procedure
(`asks_for_a_procedure`). Who gave a procedure is checked against the words, not taken from the
LLM alone, and a step copied from a person's message goes to that person, rewritten about them
("for me" → "for John"): `handlers.extraction.procedure_givers`. Dropped after parsing: a rule
in the assistant's own words, a first-person step that rests on no single person's message or
cannot be rewritten safely, a question ("When what is the weather?"), steps resting on nothing
said in the conversation (an invented procedure, or the prompt's example copied), and a
procedure for a person absent from it (the prompt example's placeholder). A trigger that
restates the rule becomes "always" (`_trigger`).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from events.memories import USER_SUBJECT, MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.attribution import (
    CURRENT_USER,
    Attribution,
    canonical_subject,
    rests_on,
)
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.drafts import one_line, support, validated
from handlers.extraction.json_answer import items_under
from handlers.extraction.procedure_givers import OWN_SHARE, copied_messages, trigger_of, who_gave
from handlers.extraction.transcript import Transcript, conversation_prompt, transcript_of
from handlers.rendering import Language

ProcedureKind = Literal["rule", "workflow", "instruction"]
KINDS: tuple[str, ...] = get_args(ProcedureKind)
_KEY = "procedures"

SYSTEM_PROMPT = """\
You extract procedures for a long-term memory from a conversation: how things are to be done \
from now on.

Speakers: [user] is the current user. [assistant] is the AI assistant. Any other label, such as \
[Person A], is another real person taking part in the conversation.

Return one JSON object: {"procedures": [ ... ]}. Each procedure is an object with:
- "kind": "rule" for how the assistant must always (or never) act; "workflow" for several \
steps to get something done, in order; "instruction" for one thing to do in a given situation.
- "trigger": the situation in which it applies, in a few words, e.g. "booking flights"; \
"always" if it always applies. Never repeat the steps in the trigger.
- "steps": a list of short instructions in the imperative and in your own words, naming the \
person when it matters, e.g. ["Never book John's meetings before 10am"]. Never copy a \
message; never write "I", "my", "me" or "you".
- "applies_to": whom it is for: "the user", or the name of another person.
- "given_by": who asked for it or gave it: "the user", another person's name, or "assistant" \
when the AI assistant provided the steps.

Rules:
- Only procedures meant to be followed again: standing rules for the assistant ("from now on", \
"always", "never", "every time"), a person's own routines, and step-by-step workflows for a task \
that will come back.
- Facts about people (job, home, likes), greetings, small talk, questions and one-off answers \
are not procedures.
- If there is none, return {"procedures": []}.

Example conversation:
[user]: From now on, answer me in short bullet points. How do I back up my laptop? I do it \
every Friday.
[Person A]: And when you plan my trips, always book an aisle seat.
[assistant]: Got it! To back up: plug in the external disk, open Time Machine, click \
"Back Up Now".
Example answer:
{"procedures": [{"kind": "rule", "trigger": "always", "steps": ["Answer in short bullet \
points"], "applies_to": "the user", "given_by": "the user"}, {"kind": "workflow", "trigger": \
"backing up the laptop every Friday", "steps": ["Plug in the external disk", "Open Time \
Machine", "Click Back Up Now"], "applies_to": "the user", "given_by": "assistant"}, {"kind": \
"rule", "trigger": "planning trips for Person A", "steps": ["Book an aisle seat"], \
"applies_to": "Person A", "given_by": "Person A"}]}

Example conversation:
[user]: hi, how are you?
[assistant]: Fine, thanks! How can I help?
Example answer:
{"procedures": []}

Example conversation:
[user]: I live in Dublin and I work at a bank.
[assistant]: Nice! How can I help you today?
Example answer:
{"procedures": []}
"""

LANGUAGE_INSTRUCTIONS = {
    "en": "Write the trigger and the steps in English.",
    "zh": "The conversation is in Chinese: write the trigger and the steps in Chinese.",
}


class ProcedureDraft(BaseModel):
    """One procedure as the LLM wrote it (before attribution and rendering)."""

    model_config = ConfigDict(extra="ignore")

    kind: str | None = Field(default=None, max_length=50)
    trigger: str | None = Field(default=None, max_length=300)
    steps: list[str] = Field(max_length=20)
    applies_to: str | None = Field(default=None, max_length=200)
    given_by: str | None = Field(default=None, max_length=200)


class ProceduralExtractor:
    """Extracts procedures (kind, trigger, steps, whom they are for) from a snapshot."""

    memory_type: MemoryType = "procedural"
    prompt_version = "procedural-1"

    def worth_asking(self, snapshot: SnapshotPromoted) -> bool:
        """Only a conversation with a directive or how-to (`asks_for_a_procedure`)."""
        return asks_for_a_procedure(transcript_of(snapshot))

    def prompt(self, snapshot: SnapshotPromoted) -> list[dict[str, str]]:
        return conversation_prompt(SYSTEM_PROMPT, LANGUAGE_INSTRUCTIONS, snapshot)

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        transcript = transcript_of(snapshot)
        drafts = [
            validated(ProcedureDraft, item, _KEY, index)
            for index, item in enumerate(items_under(answer, _KEY))
        ]
        if not asks_for_a_procedure(transcript):
            return []
        memories: dict[tuple[str, str], MemoryContent] = {}
        for index, draft in enumerate(drafts):
            for memory in _memories_from(draft, transcript, index):
                memories.setdefault((memory.subject.casefold(), memory.text.casefold()), memory)
        return list(memories.values())


_DIRECTIVE = re.compile(
    r"\b(always|never|from now on|every|each time|whenever|routine|remember|make sure|"
    r"don't|do not|please|when you|if you|how do i|how do we|how to|how can i|how should i|"
    r"steps?|procedure|process|workflow)\b"
    r"|以后|今后|总是|始终|每次|每当|记得|记住|不要|别再|一定要|务必|请|怎么做|怎么办|如何|步骤|流程",
    re.IGNORECASE,
)


def asks_for_a_procedure(transcript: Transcript) -> bool:
    """Whether a person in the conversation gives or asks for a way of doing things: a
    directive or how-to word in one of their messages ("from now on", "always", "never",
    "every", "how do I", "以后", "每次", "怎么做" …).

    Without one, small models still turn small talk into rules ("Always: Say hello to the
    user.") and facts into procedures ("When nursing in Leeds: Home-grown tomatoes are the
    best."); a question mark alone is no such word ("How's it going?", "明天天气怎么样").
    """
    return any(_DIRECTIVE.search(text) for text in transcript.humans_said)


def _memories_from(
    draft: ProcedureDraft, transcript: Transcript, index: int
) -> list[MemoryContent]:
    steps = _steps(draft.steps, index)
    kind = _kind(draft.kind, steps, index)
    raw_trigger = one_line(draft.trigger or "")
    if any(text.endswith(("?", "\uff1f")) for text in (raw_trigger, *steps)):
        return []  # a question is not a procedure ("When what is the weather?: ask …")
    own, copied = copied_messages(steps, transcript)
    found = []
    if own:
        found.append(_procedure(draft, own, kind, raw_trigger, transcript, index, speaker=None))
    for speaker, their_steps in copied:
        found.append(
            _procedure(draft, their_steps, kind, raw_trigger, transcript, index, speaker=speaker)
        )
    return [memory for memory in found if memory is not None]


def _procedure(
    draft: ProcedureDraft,
    steps: list[str],
    kind: str,
    raw_trigger: str,
    transcript: Transcript,
    index: int,
    *,
    speaker: Attribution | None,
) -> MemoryContent | None:
    """One procedure of `steps`: whom it is for and who gave it from the LLM's fields checked
    against the words (`handlers.extraction.procedure_givers.who_gave`), or, for messages copied
    from a `speaker`, that speaker."""
    names = transcript.names
    said = " ".join(steps)
    if not rests_on(said, [m.content for m in transcript.messages], names=names):
        return None  # not from this conversation: an invented or copied example
    if speaker is not None:
        applies: Attribution | None = speaker
        source: Attribution | None = speaker
    else:
        applies = _who(draft.applies_to or USER_SUBJECT, transcript, index, "applies_to")
        giver = draft.given_by or draft.applies_to or USER_SUBJECT
        given_by = _who(giver, transcript, index, "given_by")
        if given_by is None or applies is None:
            return None  # a person who is not in the conversation (an example's placeholder)
        source = who_gave(given_by, kind, said, transcript)
    if source is None or applies is None:
        return None  # a "rule" in the assistant's own words: an acknowledgement, not a rule
    trigger = _trigger(trigger_of(raw_trigger, source, transcript), said, names)
    if source.kind == "assistant" and kind == "rule":  # the assistant sets no rules: it tells how
        kind = "workflow" if len(steps) > 1 else "instruction"
    if applies.kind == "assistant":  # the assistant follows it *for* someone
        applies = source if source.kind != "assistant" else CURRENT_USER
    return MemoryContent(
        subject=applies.subject,
        owner="agent" if source.kind == "assistant" else "user",
        text=render(trigger, steps, transcript.language),
        category=kind,
        attributes={
            "kind": kind,
            "trigger": trigger,
            "steps": steps,
            "applies_to": applies.subject,
            "given_by": source.subject,
        },
    )


def _steps(raw: list[str], index: int) -> list[str]:
    steps: list[str] = []
    for step in raw:
        text = one_line(step).rstrip(_END_PUNCTUATION)
        if not text:
            continue
        if text not in steps:
            steps.append(text)
    if not steps:
        raise InvalidExtraction(f'"{_KEY}"[{index}].steps: at least one non-blank step is needed')
    return steps


def _kind(raw: str | None, steps: list[str], index: int) -> str:
    """The LLM's kind; when it gave none, a workflow for several steps, else a rule."""
    kind = (raw or "").strip().casefold()
    if not kind:
        return "workflow" if len(steps) > 1 else "rule"
    if kind not in KINDS:
        raise InvalidExtraction(
            f'"{_KEY}"[{index}].kind: must be one of {", ".join(KINDS)}, got {raw!r}'
        )
    return kind


_STANDING = re.compile(
    r"^(always|never|from now on|in general|every answer|all answers|any answer)\b"
    r"|^(以后|今后|从现在起|从现在开始|始终|总是|永远|每次回答|所有回答)",
    re.IGNORECASE,
)


def _trigger(raw: str, steps: str, names: list[str]) -> str:
    """When the procedure applies; "always" for a standing rule.

    Small models often put the rule itself in the trigger ("always write in British English" →
    "Write in British English"; "回答都用中文并且先给结论" → "先给结论"), which would
    render as "When always write in British English: …". A trigger that opens like a standing
    rule ("always", "never", "from now on", "以后" …) or holds at least half of the steps' own
    terms restates the rule, and the procedure always applies.
    """
    trigger = raw.rstrip(_END_PUNCTUATION + ":" + _ZH_COLON)
    if not trigger or _STANDING.match(trigger):
        return "always"
    share = support(steps, [trigger], names=names)
    if share is not None and share >= OWN_SHARE:
        return "always"
    return trigger


def _who(raw: str, transcript: Transcript, index: int, field: str) -> Attribution | None:
    """A participant as memories name them; None for a person absent from the conversation."""
    try:
        who = canonical_subject(
            raw, user_name=transcript.user_name, speaker_names=transcript.speaker_names
        )
    except ValueError as exc:
        raise InvalidExtraction(f'"{_KEY}"[{index}].{field}: {exc}') from exc
    if who.kind == "third_party" and who.subject.casefold() not in transcript.text.casefold():
        return None
    return who


_ALWAYS = frozenset(
    {"always", "any time", "anytime", "every time", "all the time", "at all times", "in general"}
    | {"总是", "始终", "一直", "任何时候", "所有时候", "随时"}
)
_ZH_COLON = "\uff1a"
_ZH_SEMICOLON = "\uff1b"
_END_PUNCTUATION = ".;\u3002" + _ZH_SEMICOLON
_OPENINGS = ("when ", "whenever ", "if ", "before ", "after ", "every ", "each ", "while ")


def render(trigger: str, steps: list[str], language: Language) -> str:
    """One readable line: "When <trigger>: <step 1>; <step 2>." (Chinese: "当<trigger>时", a
    full-width colon, the steps joined by full-width semicolons, and "。").

    The steps stay as the LLM capitalised them: lower-casing "Answer in French" would also
    lower-case "Python first"."""
    if language == "zh":
        body = _ZH_SEMICOLON.join(steps)
        if trigger.casefold() in _ALWAYS:
            return f"始终{_ZH_COLON}{body}。"
        if trigger.startswith(("当", "每", "如果", "在")):
            return f"{trigger}{_ZH_COLON}{body}。"
        return f"当{trigger}{'' if trigger.endswith('时') else '时'}{_ZH_COLON}{body}。"
    body = "; ".join(steps)
    if trigger.casefold() in _ALWAYS:
        return f"Always: {body}."
    if trigger.casefold().startswith(_OPENINGS):
        return f"{trigger[0].upper()}{trigger[1:]}: {body}."
    return f"When {trigger}: {body}."
