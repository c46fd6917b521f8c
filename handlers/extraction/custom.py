"""Custom memory types: a project's own kind of memory, declared in its configuration.

A team declares a type under `memory.custom_types` (docs/architecture.md, "Custom memory
types"): what it is (`description`), how to find it (`instructions`), the JSON fields of one
memory, a few examples, and whether it reconciles like the built-in types or only adds::

    misconception:
      description: A misunderstanding the student has shown about a topic.
      instructions: Record each misconception the student shows, with the topic ...
      fields:
        topic: {type: string, required: true, description: the topic, in a few words}
        correction: {type: string, description: what is actually true}
      examples:
        - conversation: "[user]: So heavier things fall faster, right?"
          memories:
            - {text: The user believes heavier objects fall faster., topic: gravity}

`CustomTypeDeclaration` is that declaration, checked strictly (a bad one is refused at start,
naming the field); `CustomExtractor` runs it like a built-in extractor: one prompt built from the
declaration, one draft schema built from its fields (every answer validated, retried with the
reason, then dead-lettered), and the built-in types' checks after parsing — whom a memory is
about (`handlers.attribution`), that it rests on what was said (a copied example does not), no
call for a conversation of pleasantries. Its prompt version names the declaration's digest, so a
memory's provenance says which declaration produced it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from events.memories import MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.attribution import canonical_subject, rests_on, subject_in_statement
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.drafts import one_line, third_person_part, validated
from handlers.extraction.json_answer import items_under
from handlers.extraction.pleasantries import only_pleasantries
from handlers.extraction.transcript import Transcript, conversation_prompt, transcript_of

MAX_CUSTOM_TYPES = 5
"""Custom types one project may declare (each is a stage, a consumer group and an LLM call per
snapshot)."""
PROMPT_TEMPLATE_VERSION = "custom-1"
"""The version of the prompt and parsing rules built around every declaration."""
FIELD_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
RESERVED_FIELDS = frozenset({"subject", "text"})
"""Every custom memory has these two: whom it is about and the memory in one sentence."""
_KEY = "memories"

FieldKind = Literal["string", "integer", "number", "boolean", "strings"]
_PYTHON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "strings": list[str],
}


class CustomField(BaseModel):
    """One JSON field of a custom memory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: FieldKind = "string"
    """string, integer, number, boolean, or strings (a list of strings)."""
    description: str = Field(default="", max_length=300)
    required: bool = False
    choices: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=30)
    """For a string: the only values it may take."""

    @model_validator(mode="after")
    def _choices_of_a_string(self) -> CustomField:
        if self.choices is not None and self.type != "string":
            raise ValueError("choices are only allowed for a field of type string")
        return self


class CustomExample(BaseModel):
    """A few-shot example: a conversation (one `[speaker]: message` per line) and the memories
    it holds (each checked against the type's fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conversation: str = Field(min_length=1, max_length=4_000)
    memories: tuple[dict[str, Any], ...] = Field(default=(), max_length=10)


class CustomTypeDeclaration(BaseModel):
    """A custom memory type as a project declares it (module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = Field(min_length=1, max_length=500)
    instructions: str = Field(min_length=1, max_length=4_000)
    fields: dict[str, CustomField] = Field(default_factory=dict, max_length=20)
    examples: tuple[CustomExample, ...] = Field(default=(), max_length=5)
    reconcile: bool = True
    """True: a new memory is reconciled with the user's memories of the type (ADD, UPDATE or
    REINFORCE, as the built-in types are); False: every memory found is added."""
    heading: str | None = Field(default=None, min_length=1, max_length=60)
    """The label of the type's section in `build_context` (default: from the type's name)."""

    @field_validator("fields")
    @classmethod
    def _field_names(cls, fields: dict[str, CustomField]) -> dict[str, CustomField]:
        for name in fields:
            if name in RESERVED_FIELDS:
                raise ValueError(
                    f"{name!r} is every custom memory's own field: choose another name"
                )
            if not re.match(FIELD_NAME_PATTERN, name):
                raise ValueError(
                    f"field name {name!r} must be lower-case letters, digits and underscores, "
                    "starting with a letter (at most 40)"
                )
        return fields

    @model_validator(mode="after")
    def _examples_fit_the_fields(self) -> CustomTypeDeclaration:
        schema = draft_schema(self)
        for example_index, example in enumerate(self.examples):
            for index, memory in enumerate(example.memories):
                try:
                    validated(schema, memory, _KEY, index)
                except InvalidExtraction as exc:
                    raise ValueError(f"examples[{example_index}]: {exc}") from None
        return self


def draft_schema(declaration: CustomTypeDeclaration) -> type[BaseModel]:
    """The pydantic model one memory of the LLM's answer must fit: `subject` (optional: the
    current user), `text` and the declared fields, with their types, choices and whether they
    are required. Fields the declaration does not name are ignored, as the built-in drafts do."""
    model: type[BaseModel] = create_model(
        "CustomMemoryDraft",
        __config__=ConfigDict(extra="ignore"),
        **_field_definitions(declaration),
    )
    return model


def _field_definitions(declaration: CustomTypeDeclaration) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "subject": (str | None, Field(default=None, max_length=200)),
        "text": (str, Field(min_length=1, max_length=2_000)),
    }
    for name, field in declaration.fields.items():
        kind: Any = _PYTHON_TYPES[field.type]
        if field.choices is not None:
            kind = Literal[field.choices]
        limits: dict[str, Any] = {}
        if field.type == "string":
            limits["max_length"] = 1_000
        elif field.type == "strings":
            limits["max_length"] = 30
        if field.required:
            fields[name] = (kind, Field(**limits))
        else:
            fields[name] = (kind | None, Field(default=None, **limits))
    return fields


def saved_attributes(
    declaration: CustomTypeDeclaration, attributes: Mapping[str, Any]
) -> dict[str, Any]:
    """The attributes of a memory of the type saved directly, checked against its declared
    fields: the required ones present, each of its type, no other field (the application's
    code, unlike an LLM, can be held to the declaration). Raises `pydantic.ValidationError`
    naming the field; fields left out or None are not stored."""
    fields: dict[str, Any] = {
        name: definition
        for name, definition in _field_definitions(declaration).items()
        if name not in RESERVED_FIELDS
    }
    model: type[BaseModel] = create_model(
        "CustomMemoryAttributes", __config__=ConfigDict(extra="forbid"), **fields
    )
    checked = model.model_validate(dict(attributes)).model_dump()
    return {name: value for name, value in checked.items() if value is not None}


def declaration_digest(declaration: CustomTypeDeclaration) -> str:
    """Eight hex digits naming the declaration (everything in it, in a canonical form)."""
    canonical = json.dumps(declaration.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def custom_prompt_version(name: str, declaration: CustomTypeDeclaration) -> str:
    """`custom-1/<type>/<digest>`: the prompt template and the declaration it was built from."""
    return f"{PROMPT_TEMPLATE_VERSION}/{name}/{declaration_digest(declaration)}"


def heading_of(name: str, declaration: CustomTypeDeclaration) -> str:
    """The type's section label in `build_context`: the declared heading, or its name."""
    return declaration.heading or name.replace("_", " ").capitalize()


class CustomExtractor:
    """Extracts one declared custom memory type from a snapshot (module doc)."""

    def __init__(self, name: MemoryType, declaration: CustomTypeDeclaration) -> None:
        self.memory_type: MemoryType = name
        self.declaration = declaration
        self.prompt_version = custom_prompt_version(name, declaration)
        self._schema = draft_schema(declaration)
        self._system_prompt = system_prompt(name, declaration)

    def worth_asking(self, snapshot: SnapshotPromoted) -> bool:
        """Not for a conversation with nothing but pleasantries, or with no person's message."""
        transcript = transcript_of(snapshot)
        return bool(transcript.humans_said) and not only_pleasantries(transcript)

    def prompt(self, snapshot: SnapshotPromoted) -> list[dict[str, str]]:
        return conversation_prompt(self._system_prompt, LANGUAGE_INSTRUCTIONS, snapshot, dated=True)

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        transcript = transcript_of(snapshot)
        drafts = [
            validated(self._schema, item, _KEY, index)
            for index, item in enumerate(items_under(answer, _KEY))
        ]
        memories: dict[tuple[str, str], MemoryContent] = {}
        for draft in drafts:
            memory = self._memory_from(draft, transcript)
            if memory is not None:
                memories.setdefault((memory.subject.casefold(), memory.text.casefold()), memory)
        return list(memories.values())

    def _memory_from(self, draft: BaseModel, transcript: Transcript) -> MemoryContent | None:
        """One memory, or None when it is a copied message, rests on nothing said about its
        subject (an invented memory, or an example copied), or is about no one.

        A text that turns to the first person part-way keeps what it said before
        (`third_person_part`); one that opens with a participant is about them, whatever the
        LLM's `subject` says (`subject_in_statement`), as a built-in fact's is."""
        values = draft.model_dump()
        text = third_person_part(one_line(values.pop("text")))
        if not text:
            return None  # a quoted message: whose "I" it is cannot be known for sure
        user, speakers = transcript.user_name, transcript.speaker_names
        written = values.pop("subject")
        opening = subject_in_statement(text, user_name=user, speaker_names=speakers)
        try:
            attribution = canonical_subject(
                opening or written or "the user", user_name=user, speaker_names=speakers
            )
        except ValueError:
            return None
        said = " ".join([text, *(_words(value) for value in values.values())])
        evidence = transcript.evidence_for(attribution.subject, attribution.kind)
        if not rests_on(said, evidence, names=[*speakers, *([user] if user else [])]):
            return None
        attributes = {key: value for key, value in values.items() if value is not None}
        return MemoryContent(
            subject=attribution.subject,
            owner=attribution.owner,
            text=text,
            attributes=attributes,
        )


def _words(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(item) for item in value)
    return "" if value is None or isinstance(value, bool) else str(value)


LANGUAGE_INSTRUCTIONS = {
    "en": "Write the text and the fields in English.",
    "zh": "The conversation is in Chinese: write the text and the fields in Chinese.",
}

_EMPTY_EXAMPLE = """\
Example conversation:
[user]: hi, how are you?
[assistant]: Fine, thanks! How can I help?
Example answer:
{"memories": []}"""


def system_prompt(name: str, declaration: CustomTypeDeclaration) -> str:
    """The system prompt of a custom type: what it is, the declared instructions, the JSON of
    one memory field by field, the declared examples and an explicit empty one."""
    lines = [
        f'You extract "{name}" memories for a long-term memory from a conversation.',
        f'A "{name}" memory is: {one_line(declaration.description)}',
        "",
        "Speakers: [user] is the current user. [assistant] is the AI assistant. Any other "
        "label, such as [Person A], is another real person taking part in the conversation.",
        "",
        f"Instructions: {declaration.instructions.strip()}",
        "",
        'Return one JSON object: {"memories": [ ... ]}. Each memory is an object with:',
        '- "subject": whom it is about: "the user" for the current user, or the name of '
        "another person.",
        '- "text": the memory in one short sentence in the third person, in your own words, '
        'naming the person, e.g. "The user ...". Never copy a message; never write "I" or "my".',
    ]
    for field_name, field in declaration.fields.items():
        lines.append(f'- "{field_name}": {_field_line(field)}')
    lines += [
        "",
        "Rules:",
        "- Only what the conversation says; never copy the examples.",
        '- If the conversation holds none, return {"memories": []}.',
    ]
    for example in declaration.examples:
        answer = json.dumps({"memories": list(example.memories)}, ensure_ascii=False)
        lines += ["", "Example conversation:", example.conversation.strip(), "Example answer:"]
        lines.append(answer)
    lines += ["", _EMPTY_EXAMPLE]
    return "\n".join(lines) + "\n"


def _field_line(field: CustomField) -> str:
    kind = {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "strings": "a list of strings",
    }[field.type]
    parts = [one_line(field.description)] if field.description else []
    if field.choices is not None:
        kind = "one of " + ", ".join(
            json.dumps(choice, ensure_ascii=False) for choice in field.choices
        )
    parts.append(kind)
    parts.append("required" if field.required else "null when the conversation does not say")
    return "; ".join(parts) + "."
