"""Custom memory types: the declaration checked strictly, the prompt built from it, the answer
validated against its fields, and the built-in checks (whom, resting on what was said)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from handlers.extraction.base import InvalidExtraction, extract
from handlers.extraction.custom import (
    CustomExtractor,
    CustomTypeDeclaration,
    custom_prompt_version,
    heading_of,
)
from handlers.extraction.registry import extractor_for
from tests.factories import snapshot
from tests.handlers.extraction.test_extract import FakeChatModel


def misconception(**overrides: Any) -> CustomTypeDeclaration:
    """A tutoring app's type: what a student has got wrong."""
    fields: dict[str, Any] = {
        "description": "A misunderstanding the student has shown about a topic.",
        "instructions": "Record each misconception the student shows, with its topic.",
        "fields": {
            "topic": {"type": "string", "required": True, "description": "the topic"},
            "severity": {"type": "string", "choices": ["minor", "major"]},
            "correction": {"type": "string"},
        },
        "examples": [
            {
                "conversation": "[user]: So heavier things fall faster, right?",
                "memories": [
                    {"text": "The user believes heavier objects fall faster.", "topic": "gravity"}
                ],
            }
        ],
    }
    fields.update(overrides)
    return CustomTypeDeclaration.model_validate(fields)


def lesson() -> Any:
    return snapshot(
        turns=[
            {"content": "I think plants get their food from the soil through their roots."},
            {"role": "assistant", "content": "Actually, plants make their food by photosynthesis."},
        ]
    )


EXTRACTOR = CustomExtractor("misconception", misconception())


def answer(*memories: dict[str, Any]) -> str:
    return json.dumps({"memories": list(memories)})


def test_the_prompt_carries_the_description_instructions_fields_and_examples() -> None:
    system = EXTRACTOR.prompt(lesson())[0]["content"]
    assert system.startswith('You extract "misconception" memories')
    assert "A misunderstanding the student has shown" in system
    assert "Record each misconception" in system
    assert '- "topic": the topic; a string; required.' in system
    assert '- "severity": one of "minor", "major"; null when' in system
    assert "heavier things fall faster" in system
    assert '{"memories": []}' in system


def test_a_memory_keeps_its_declared_fields_as_attributes() -> None:
    found = EXTRACTOR.parse(
        answer(
            {
                "text": "The user believes plants get their food from the soil.",
                "topic": "photosynthesis",
                "severity": "major",
                "unknown": "dropped",
            }
        ),
        lesson(),
    )
    assert [m.text for m in found] == ["The user believes plants get their food from the soil."]
    assert found[0].subject == "the user"
    assert found[0].owner == "user"
    assert found[0].attributes == {"topic": "photosynthesis", "severity": "major"}


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"text": "The user believes plants eat soil."}, '"memories"[0].topic: Field required'),
        (
            {"text": "The user believes plants eat soil.", "topic": "x", "severity": "huge"},
            '"memories"[0].severity: Input should be',
        ),
        ({"topic": "plants"}, '"memories"[0].text: Field required'),
    ],
)
def test_an_item_that_breaks_the_declared_fields_is_invalid_naming_the_field(
    item: dict[str, Any], reason: str
) -> None:
    with pytest.raises(InvalidExtraction, match=reason.replace("[", r"\[").replace("]", r"\]")):
        EXTRACTOR.parse(answer(item), lesson())


def test_a_copied_example_and_a_first_person_copy_are_dropped() -> None:
    found = EXTRACTOR.parse(
        answer(
            {"text": "The user believes heavier objects fall faster.", "topic": "gravity"},
            {"text": "I think plants get food from the soil.", "topic": "plants"},
        ),
        lesson(),
    )
    assert found == []


def test_a_memory_about_another_speaker_is_theirs() -> None:
    talk = snapshot(
        turns=[
            {"content": "My classmate thinks the sun goes around the earth."},
            {"role": "assistant", "name": "Maya", "content": "I do think the sun circles us!"},
        ]
    )
    found = EXTRACTOR.parse(
        answer(
            {
                "subject": "Maya",
                "text": "Maya believes the sun circles the earth.",
                "topic": "astronomy",
            }
        ),
        talk,
    )
    assert [(m.subject, m.owner) for m in found] == [("Maya", "user")]


async def test_pleasantries_cost_no_call() -> None:
    llm = FakeChatModel()
    hello = snapshot(
        turns=[{"content": "hi, how are you?"}, {"role": "assistant", "content": "Fine!"}]
    )
    outcome = await extract(EXTRACTOR, hello, llm)
    assert (outcome.memories, outcome.attempts, llm.calls) == ((), 0, [])


async def test_an_invalid_answer_is_retried_with_the_reason() -> None:
    good = answer({"text": "The user believes plants eat soil.", "topic": "plants"})
    llm = FakeChatModel(answer({"text": "The user believes plants eat soil."}), good)
    outcome = await extract(EXTRACTOR, lesson(), llm)
    assert outcome.attempts == 2
    assert "topic: Field required" in llm.calls[1][-1]["content"]


def test_the_prompt_version_names_the_declaration() -> None:
    version = custom_prompt_version("misconception", misconception())
    assert version.startswith("custom-1/misconception/")
    assert version == EXTRACTOR.prompt_version
    changed = custom_prompt_version("misconception", misconception(instructions="Other words."))
    assert changed != version


def test_the_registry_gives_the_declared_types_extractor() -> None:
    extractor = extractor_for("misconception", {"misconception": misconception()})
    assert isinstance(extractor, CustomExtractor)
    assert extractor.memory_type == "misconception"


def test_the_heading_is_declared_or_from_the_name() -> None:
    assert heading_of("open_ticket", misconception()) == "Open ticket"
    assert heading_of("open_ticket", misconception(heading="Open tickets")) == "Open tickets"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"fields": {"text": {"type": "string"}}}, "'text' is every custom memory's own field"),
        ({"fields": {"Topic": {}}}, "field name 'Topic'"),
        ({"fields": {"n": {"type": "integer", "choices": ["1"]}}}, "choices are only allowed"),
        ({"fields": {"n": {"type": "date"}}}, "fields.n.type"),
        ({"examples": [{"conversation": "[user]: x", "memories": [{"text": "t"}]}]}, "topic"),
        ({"reconciles": True}, "reconciles"),
        ({"description": ""}, "description"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_field(
    overrides: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValidationError) as info:
        misconception(**overrides)
    assert named in str(info.value)


def test_a_text_turning_to_the_first_person_keeps_what_it_said_before() -> None:
    router = snapshot(
        turns=[{"content": "My router drops the wifi every evening and I have to restart it."}]
    )
    tickets = CustomExtractor("misconception", misconception())
    (found,) = tickets.parse(
        answer(
            {
                "text": "The user's router drops the wifi every evening and I have to restart it.",
                "topic": "router",
            }
        ),
        router,
    )
    assert found.text == "The user's router drops the wifi every evening."


def test_a_text_opening_with_a_speaker_is_theirs_whatever_the_subject_field_says() -> None:
    talk = snapshot(
        turns=[
            {"content": "I'm only here with my colleague."},
            {"role": "assistant", "name": "Priya", "content": "My badge scanner stopped working."},
        ]
    )
    (found,) = EXTRACTOR.parse(
        answer({"text": "Priya's badge scanner stopped working.", "topic": "scanner"}), talk
    )
    assert (found.subject, found.owner) == ("Priya", "user")
