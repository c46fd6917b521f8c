"""Taxonomic extraction: the prompt, strict parsing, terms as subjects, people's vocabulary only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from events import MemoryContent, SnapshotPromoted
from handlers.extraction.base import InvalidExtraction, extract
from handlers.extraction.taxonomic import (
    SYSTEM_PROMPT,
    TaxonomicExtractor,
    canonical_term,
    names_a_term,
    render,
)
from handlers.extraction.transcript import transcript_of
from tests.factories import snapshot
from tests.handlers.extraction.test_extract import FakeChatModel

EXTRACTOR = TaxonomicExtractor()


def team() -> SnapshotPromoted:
    """Tim defines his team's jargon, John (another human) adds his, the AI explains a word."""
    return snapshot(
        turns=[
            {
                "name": "Tim",
                "content": 'On my team a "P0" is an outage that hits every customer; we also '
                "call it a sev-zero. Yesterday's login failure was a P0. "
                "What's an SLO, by the way?",
            },
            {
                "role": "assistant",
                "name": "John",
                "content": "In my group, the Friday deploy freeze is called the quiet window.",
            },
            {
                "role": "assistant",
                "content": "An SLO is a service level objective: a target for a service's "
                "reliability, such as 99.9% availability.",
            },
        ]
    )


def answer(*terms: dict[str, Any]) -> str:
    return json.dumps({"terms": list(terms)})


def term(name: str, definition: str | None, **fields: Any) -> dict[str, Any]:
    return {"term": name, "definition": definition, **fields}


P0 = term(
    "P0",
    "an outage that hits every customer",
    parent="incident",
    aliases=["sev-zero"],
    examples=["the login failure yesterday"],
)


def parse(text: str, snap: SnapshotPromoted | None = None) -> list[MemoryContent]:
    return EXTRACTOR.parse(text, snap or team())


# --- prompt ---------------------------------------------------------------------------------------


def test_prompt_is_the_system_prompt_and_the_rendered_conversation() -> None:
    system, user = EXTRACTOR.prompt(team())
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["content"].startswith("Conversation:\nThe user's name is Tim\n")
    assert "[John]: In my group" in user["content"]
    assert "in English" in user["content"]


def test_prompt_asks_for_one_object_and_shows_empty_answers() -> None:
    assert '{"terms": [ ... ]}' in SYSTEM_PROMPT
    assert SYSTEM_PROMPT.count('{"terms": []}') >= 3
    for field in ("term", "parent", "definition", "aliases", "examples"):
        assert f'"{field}"' in SYSTEM_PROMPT
    assert "Not general knowledge" in SYSTEM_PROMPT
    assert "[Person A]" in SYSTEM_PROMPT


def test_prompt_of_a_chinese_conversation_asks_for_chinese() -> None:
    snap = snapshot(turns=[{"content": "我们组把周五下午的复盘会叫“收官会”。"}])
    assert "in Chinese" in EXTRACTOR.prompt(snap)[1]["content"]


# --- which conversations are asked -----------------------------------------------------------


def said(*messages: str) -> SnapshotPromoted:
    return snapshot([{"role": "user", "content": text} for text in messages])


@pytest.mark.parametrize(
    "text",
    [
        'In our team a "spike" is a time-boxed research task.',
        "I sort my reading list into three shelves: 'fuel', 'candy' and 'vegetables'.",
        "DoD means our definition of done.",
        "At work we call a total outage a P0.",
        "Our on-call folks also say sev-zero for a P0.",
        "FC is short for fixed costs.",
        "Groceries and rent count as fixed costs for me.",
        "A flat white is a kind of coffee, for me the only kind.",
        "The new project is code-named Atlas.",
        "My running club\u2019s \u2018shakeout\u2019 is an easy run the day before a race.",
        "我们医院把夜班叫\u201c大夜\u201d。",
        "拉通是指跨部门对齐信息。",
        "「起飞单」就是上线前的检查清单。",
        "“内卷”这个词我们天天说。",
    ],
)
def test_a_conversation_that_defines_names_or_sorts_something_is_asked(text: str) -> None:
    assert names_a_term(transcript_of(said(text)))
    assert EXTRACTOR.worth_asking(said("hi!", text))


@pytest.mark.parametrize(
    "text",
    [
        "My beagle Pixel will beg for some anyway.",
        "At Spotify we have a standup every day at 9:30.",
        "I mean, it was fine, in terms of money at least.",
        "The kids' toys and the dogs' bowls are everywhere.",
        "我昨天去爬山了，天气很好。",
    ],
)
def test_a_conversation_that_defines_nothing_is_not_asked(text: str) -> None:
    assert not EXTRACTOR.worth_asking(said(text))


def test_a_term_only_the_assistant_defines_does_not_make_the_conversation_worth_asking() -> None:
    explained = snapshot(
        [
            {"role": "user", "content": "What is a Roth IRA?"},
            {"role": "assistant", "content": 'A "Roth IRA" means a retirement account.'},
        ]
    )
    assert not EXTRACTOR.worth_asking(explained)


def test_terms_answered_for_a_conversation_that_defines_nothing_are_dropped() -> None:
    plain = said("At Spotify we have a standup every day at 9:30.")
    assert parse(answer(term("standup", "the daily meeting at 9:30")), plain) == []


# --- parsing --------------------------------------------------------------------------------------


def test_a_good_term_is_parsed_with_the_term_as_subject() -> None:
    (memory,) = parse(answer(P0))
    assert memory == MemoryContent(
        subject="P0",
        owner="user",
        text="P0 is a kind of incident: an outage that hits every customer.",
        category="incident",
        attributes={
            "term": "P0",
            "parent": "incident",
            "definition": "an outage that hits every customer",
            "aliases": ["sev-zero"],
            "examples": ["the login failure yesterday"],
        },
    )


def test_another_humans_term_is_owned_by_the_user_never_the_agent() -> None:
    (memory,) = parse(
        answer(term("quiet window", "the Friday deploy freeze in John's group", parent=None))
    )
    assert (memory.subject, memory.owner, memory.category) == ("quiet window", "user", None)
    assert memory.text == "quiet window: the Friday deploy freeze in John's group."


@pytest.mark.parametrize(
    ("parent", "definition", "expected"),
    [
        (None, "a thing", "T: a thing."),
        ("tool", "a thing", "T is a kind of tool: a thing."),
        ("tool", None, "T is a kind of tool."),
        ("tool", "", "T is a kind of tool."),
    ],
)
def test_render(parent: str | None, definition: str | None, expected: str) -> None:
    assert render("T", parent, definition or "", "en") == expected


def test_render_chinese() -> None:
    assert (
        render("收官会", "会议", "周五下午的复盘会", "zh")
        == "收官会是一种会议\uff1a周五下午的复盘会。"
    )
    assert render("收官会", None, "周五下午的复盘会", "zh") == "收官会\uff1a周五下午的复盘会。"
    assert render("收官会", "会议", "", "zh") == "收官会是一种会议。"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('"P0"', "P0"),
        ("  quiet \n window. ", "quiet window"),
        ("\u201csev-zero\u201d", "sev-zero"),
        ("\u300c收官会\u300d", "收官会"),
        ("OKR", "OKR"),
    ],
)
def test_canonical_term(raw: str, expected: str) -> None:
    assert canonical_term(raw) == expected


@pytest.mark.parametrize("text", ["{}", '{"terms": null}', '{"terms": []}'])
def test_missing_null_or_empty_terms_mean_none(text: str) -> None:
    assert parse(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("P0: an outage", "not valid JSON"),
        ('{"terms": "P0"}', '"terms" must be a list, got str'),
        ('{"terms": [{"definition": "an outage"}]}', '"terms"[0].term: Field required'),
        (answer(term('""', "an outage")), '"terms"[0].term: must not be blank'),
        (
            answer(term("P0", None)),
            "\"terms\"[0].definition: give a definition or a parent category for 'P0'",
        ),
        (answer(term("P0", "  ", parent="null")), '"terms"[0].definition: give a definition'),
        (answer(term("P0", "an outage", aliases="sev-zero")), '"terms"[0].aliases'),
        (answer(term("P0", "an outage", examples=[1])), '"terms"[0].examples.0'),
        (answer(term("P0", "an outage", parent=["incident"])), '"terms"[0].parent'),
        (answer(term("x" * 101, "an outage")), '"terms"[0].term'),
    ],
)
def test_unusable_answers_raise_invalid_extraction(text: str, expected: str) -> None:
    with pytest.raises(InvalidExtraction) as info:
        parse(text)
    assert expected in str(info.value)


async def test_a_retry_is_told_what_was_wrong() -> None:
    llm = FakeChatModel(answer(term("P0", None)), answer(P0))
    outcome = await extract(EXTRACTOR, team(), llm)
    assert outcome.attempts == 2 and [m.subject for m in outcome.memories] == ["P0"]
    assert "give a definition or a parent category for 'P0'" in llm.calls[1][-1]["content"]


def test_a_definition_in_the_first_person_is_kept_as_written() -> None:
    """It describes the term, not a person; refusing it failed whole snapshots of the 1.5B."""
    (memory,) = parse(answer(term("P0", "our name for an outage that hits every customer")))
    assert memory.text == "P0: our name for an outage that hits every customer."


# --- grounding ------------------------------------------------------------------------------------


def test_general_knowledge_the_assistant_explained_is_not_a_term() -> None:
    slo = term("SLO", "a target for a service's reliability", parent="reliability metric")
    assert parse(answer(slo)) == []


@pytest.mark.parametrize(
    "item",
    [
        term("fixed costs", "costs counted as fixed in the budget"),  # the prompt's example
        term("Person A", "another person in the conversation"),
        term("the user", "the person asking", parent="person"),
        term("John", "a colleague of the user who talks about deploys"),
        term("assistant", "the AI that answers"),
    ],
    ids=["example", "placeholder", "the-user", "a-speaker", "assistant"],
)
def test_people_and_terms_absent_from_the_conversation_are_dropped(item: dict[str, Any]) -> None:
    assert parse(answer(item)) == []


def test_aliases_are_kept_only_as_they_appear_without_the_term_or_repeats() -> None:
    item = term(
        "P0",
        "an outage that hits every customer",
        aliases=["Sev-Zero", "sev-zero", "p0", "SEV1", ""],
    )
    (memory,) = parse(answer(item))
    assert memory.attributes["aliases"] == ["Sev-Zero"]


def test_examples_must_rest_on_the_conversation() -> None:
    item = term(
        "P0",
        "an outage that hits every customer",
        examples=[
            "the login failure yesterday",
            "the payroll bug in March",
            "the login failure yesterday",
        ],
    )
    (memory,) = parse(answer(item))
    assert memory.attributes["examples"] == ["the login failure yesterday"]


def test_one_memory_per_term_whatever_its_case() -> None:
    memories = parse(answer(P0, term("p0", "an outage hitting every customer")))
    assert [m.subject for m in memories] == ["P0"]


def test_different_terms_are_different_subjects() -> None:
    memories = parse(
        answer(P0, term("sev-zero", "an outage that hits every customer", parent="incident"))
    )
    assert [m.subject for m in memories] == ["P0", "sev-zero"]


# --- Chinese --------------------------------------------------------------------------------------


def test_a_chinese_term() -> None:
    snap = snapshot(
        turns=[
            {"name": "王芳", "content": "我们组把周五下午的复盘会叫“收官会”，比如上周的发布复盘。"},
            {"role": "assistant", "content": "好的，记住了。"},
        ]
    )
    (memory,) = parse(
        answer(
            {
                "term": "“收官会”",
                "parent": "会议",
                "definition": "组里周五下午的复盘会",
                "aliases": [],
                "examples": ["上周的发布复盘"],
            }
        ),
        snap,
    )
    assert (memory.subject, memory.owner, memory.category) == ("收官会", "user", "会议")
    assert memory.text == "收官会是一种会议\uff1a组里周五下午的复盘会。"
    assert memory.attributes["examples"] == ["上周的发布复盘"]


@pytest.mark.parametrize(
    ("parent", "definition", "expected"),
    [
        ("上线前的检查清单", "上线前的检查清单", "起飞单\uff1a上线前的检查清单。"),
        ("跨部门对齐", "跨部门对齐信息的会", "起飞单\uff1a跨部门对齐信息的会。"),
        ("清单", "上线前的检查清单", "起飞单是一种清单\uff1a上线前的检查清单。"),
    ],
)
def test_a_parent_copied_from_the_definition_is_no_parent(
    parent: str, definition: str, expected: str
) -> None:
    snap = snapshot(turns=[{"content": "我们组把上线前的检查清单叫“起飞单”，用来跨部门对齐信息。"}])
    (memory,) = parse(answer(term("起飞单", definition, parent=parent)), snap)
    assert memory.text == expected


def test_a_person_is_no_example() -> None:
    (memory,) = parse(answer(term("quiet window", "the Friday deploy freeze", examples=["John"])))
    assert memory.attributes["examples"] == []
