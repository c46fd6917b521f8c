"""Procedural extraction: the prompt, strict parsing, who a procedure is for and who gave it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from events import MemoryContent, SnapshotPromoted
from handlers.extraction.base import InvalidExtraction, extract
from handlers.extraction.procedural import (
    SYSTEM_PROMPT,
    ProceduralExtractor,
    asks_for_a_procedure,
    render,
)
from handlers.extraction.transcript import transcript_of
from tests.factories import snapshot
from tests.handlers.extraction.test_extract import FakeChatModel

EXTRACTOR = ProceduralExtractor()


def office() -> SnapshotPromoted:
    """Tim sets a rule, John (another human) sets his own, the AI gives a workflow."""
    return snapshot(
        turns=[
            {
                "name": "Tim",
                "content": "From now on, keep your answers short and always reply in English. "
                "Also, how do I export the monthly sales report? I do it every month.",
            },
            {
                "role": "assistant",
                "name": "John",
                "content": "And when you book my flights, always pick an aisle seat.",
            },
            {
                "role": "assistant",
                "content": "Noted: short answers, in English. To export the sales report: open "
                "the dashboard, choose Reports, select Monthly Sales, then click Export CSV.",
            },
        ]
    )


def answer(*procedures: dict[str, Any]) -> str:
    return json.dumps({"procedures": list(procedures)})


def procedure(*steps: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "rule", "trigger": "always", "steps": list(steps), **fields}


EXPORT = ["Open the dashboard", "Choose Reports", "Select Monthly Sales", "Click Export CSV"]


def parse(text: str, snap: SnapshotPromoted | None = None) -> list[MemoryContent]:
    return EXTRACTOR.parse(text, snap or office())


# --- prompt ---------------------------------------------------------------------------------------


def test_prompt_is_the_system_prompt_and_the_rendered_conversation() -> None:
    system, user = EXTRACTOR.prompt(office())
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["content"].startswith("Conversation:\nThe user's name is Tim\n")
    assert "[John]: And when you book my flights" in user["content"]
    assert "[assistant]: Noted: short answers" in user["content"]
    assert "in English" in user["content"]


def test_prompt_asks_for_one_object_and_shows_empty_answers() -> None:
    assert '{"procedures": [ ... ]}' in SYSTEM_PROMPT
    assert SYSTEM_PROMPT.count('{"procedures": []}') >= 3
    for field in ("kind", "trigger", "steps", "applies_to", "given_by"):
        assert f'"{field}"' in SYSTEM_PROMPT
    assert '"rule"' in SYSTEM_PROMPT and '"workflow"' in SYSTEM_PROMPT
    assert '"instruction"' in SYSTEM_PROMPT
    assert "[Person A]" in SYSTEM_PROMPT


def test_prompt_of_a_chinese_conversation_asks_for_chinese() -> None:
    snap = snapshot(turns=[{"content": "以后回答我的时候请用中文，而且要简短。"}])
    assert "in Chinese" in EXTRACTOR.prompt(snap)[1]["content"]


# --- parsing --------------------------------------------------------------------------------------


def test_the_users_rule() -> None:
    (memory,) = parse(
        answer(
            procedure(
                "Keep answers short",
                "Reply in English",
                applies_to="the user",
                given_by="the user",
            )
        )
    )
    assert memory == MemoryContent(
        subject="the user",
        owner="user",
        text="Always: Keep answers short; Reply in English.",
        category="rule",
        attributes={
            "kind": "rule",
            "trigger": "always",
            "steps": ["Keep answers short", "Reply in English"],
            "applies_to": "the user",
            "given_by": "the user",
        },
    )


def test_the_assistants_workflow_for_the_user() -> None:
    (memory,) = parse(
        answer(
            {
                "kind": "workflow",
                "trigger": "exporting the monthly sales report",
                "steps": EXPORT,
                "applies_to": "the user",
                "given_by": "assistant",
            }
        )
    )
    assert (memory.subject, memory.owner, memory.category) == ("the user", "agent", "workflow")
    assert memory.text == (
        "When exporting the monthly sales report: Open the dashboard; Choose Reports; "
        "Select Monthly Sales; Click Export CSV."
    )
    assert memory.attributes["given_by"] == "assistant"


def test_another_humans_rule_is_theirs_and_never_the_agents() -> None:
    (memory,) = parse(
        answer(
            procedure(
                "Pick an aisle seat",
                trigger="booking John's flights",
                applies_to="John",
                given_by="assistant",
            )
        )
    )
    assert (memory.subject, memory.owner) == ("John", "user")
    assert memory.attributes["given_by"] == "John"  # the steps rest on John's own words


@pytest.mark.parametrize("text", ["{}", '{"procedures": null}', '{"procedures": []}'])
def test_missing_null_or_empty_procedures_mean_none(text: str) -> None:
    assert parse(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Always answer briefly.", "not valid JSON"),
        ('{"procedures": {"steps": []}}', '"procedures" must be a list, got dict'),
        ('{"procedures": [{"kind": "rule"}]}', '"procedures"[0].steps: Field required'),
        (answer(procedure()), '"procedures"[0].steps: at least one non-blank step'),
        (answer(procedure(" ", "")), '"procedures"[0].steps: at least one non-blank step'),
        (
            answer({"kind": "rule", "steps": "Keep answers short"}),
            '"procedures"[0].steps: Input should be a valid list',
        ),
        (answer({"steps": ["Keep answers short", 3]}), '"procedures"[0].steps.1'),
        (
            answer(procedure("Keep answers short", kind="habit")),
            "\"procedures\"[0].kind: must be one of rule, workflow, instruction, got 'habit'",
        ),
        (answer(procedure("Keep answers short", trigger=["a"])), '"procedures"[0].trigger'),
        (answer(procedure(*["Step"] * 21)), '"procedures"[0].steps'),
        (answer(procedure("Keep answers short", applies_to="?!")), '"procedures"[0].applies_to'),
    ],
)
def test_unusable_answers_raise_invalid_extraction(text: str, expected: str) -> None:
    with pytest.raises(InvalidExtraction) as info:
        parse(text)
    assert expected in str(info.value)


@pytest.mark.parametrize("step", ["I will keep answers short", "我会简短回答"])
def test_a_copied_step_that_cannot_be_rewritten_is_dropped(step: str) -> None:
    """ "I" needs verb agreement; the Chinese copy rests on nobody's (English) messages."""
    memories = parse(answer(procedure("Reply in English", step)))
    assert [m.text for m in memories] == ["Always: Reply in English."]


def test_copied_messages_become_each_speakers_procedure() -> None:
    """The 1.5B model's answer: two people's messages copied into one "rule" of the user's."""
    memories = parse(
        answer(
            procedure(
                "And when you book my flights, always pick an aisle seat.",
                "From now on, keep your answers short and always reply in English.",
                "Keep my answers short",
                trigger="John and I share you now",
                applies_to="the user",
                given_by="John",
            )
        )
    )
    assert [(m.subject, m.owner, m.attributes["given_by"], m.text) for m in memories] == [
        (
            "the user",
            "user",
            "the user",
            "Always: From now on, keep your answers short and always reply in English.",
        ),
        (
            "John",
            "user",
            "John",
            "Always: And when you book John's flights, always pick an aisle seat.",
        ),
        ("the user", "user", "the user", "Always: Keep the user's answers short."),
    ]


def test_a_copied_trigger_is_rewritten_about_its_speaker() -> None:
    (memory,) = parse(
        answer(procedure("Pick an aisle seat", trigger="when you book my flights", given_by="John"))
    )
    assert memory.attributes["trigger"] == "when you book John's flights"
    assert memory.text == "When you book John's flights: Pick an aisle seat."


async def test_a_copied_message_is_rewritten_without_a_retry() -> None:
    copied = procedure("When you book my flights, always pick an aisle seat", given_by="Tim")
    outcome = await extract(EXTRACTOR, office(), FakeChatModel(answer(copied)))
    assert outcome.attempts == 1
    assert [(m.subject, m.text) for m in outcome.memories] == [
        ("John", "Always: When you book John's flights, always pick an aisle seat.")
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"trigger": "what is the weather tomorrow?", "steps": ["Check the forecast"]},
        {"trigger": "always", "steps": ["Which day should we fly?"]},
        {"trigger": "明天天气怎么样？", "steps": ["问天气"]},
    ],
)
def test_a_question_is_not_a_procedure(fields: dict[str, Any]) -> None:
    assert parse(answer(fields)) == []


@pytest.mark.parametrize(
    ("trigger", "steps", "expected"),
    [
        ("always write in English", ["Reply in English"], "always"),
        ("never answer at length", ["Keep answers short"], "always"),
        ("from now on", ["Keep answers short"], "always"),
        ("keep answers short", ["Keep your answers short"], "always"),  # restates the step
        ("以后回答都用中文", ["用中文回答"], "always"),
        ("booking John's flights", ["Pick an aisle seat"], "booking John's flights"),
        ("exporting the monthly sales report", EXPORT, "exporting the monthly sales report"),
        ("  ", ["Keep answers short"], "always"),
    ],
)
def test_a_trigger_restating_the_rule_means_always(
    trigger: str, steps: list[str], expected: str
) -> None:
    (memory,) = parse(answer({"trigger": trigger, "steps": steps, "given_by": "the user"}))
    assert memory.attributes["trigger"] == expected


@pytest.mark.parametrize(
    ("steps", "kind", "expected"),
    [
        (["Keep answers short"], None, "rule"),
        (EXPORT, None, "workflow"),
        (EXPORT, "", "workflow"),
        (["Keep answers short"], "Instruction", "instruction"),
    ],
)
def test_a_missing_kind_is_inferred(steps: list[str], kind: str | None, expected: str) -> None:
    (memory,) = parse(answer({"kind": kind, "trigger": "always", "steps": steps}))
    assert memory.category == memory.attributes["kind"] == expected


def test_steps_are_cleaned_and_deduplicated() -> None:
    (memory,) = parse(answer(procedure(" Keep answers\n short. ", "Keep answers short", "")))
    assert memory.attributes["steps"] == ["Keep answers short"]


def test_a_missing_trigger_means_always() -> None:
    (memory,) = parse(answer({"steps": ["Keep answers short"]}))
    assert memory.attributes["trigger"] == "always"
    assert memory.text == "Always: Keep answers short."


# --- who it is for, who gave it ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("applies_to", "given_by", "subject", "owner", "source"),
    [
        ("the user", "the user", "the user", "user", "the user"),
        (None, None, "the user", "user", "the user"),
        ("Tim", "Tim", "the user", "user", "the user"),
        ("assistant", "the user", "the user", "user", "the user"),  # followed *for* the user
        # the assistant only acknowledged the user's rule ("Noted: short answers, in English")
        ("the user", "assistant", "the user", "user", "the user"),
        ("assistant", "assistant", "the user", "user", "the user"),
    ],
)
def test_who_a_rule_is_for_and_who_gave_it(
    applies_to: str | None, given_by: str | None, subject: str, owner: str, source: str
) -> None:
    (memory,) = parse(
        answer(procedure("Keep answers short", applies_to=applies_to, given_by=given_by))
    )
    assert (memory.subject, memory.owner, memory.attributes["given_by"]) == (
        subject,
        owner,
        source,
    )
    assert memory.attributes["applies_to"] == subject


@pytest.mark.parametrize("given_by", ["the user", "assistant", None])
def test_steps_the_assistant_wrote_are_the_assistants(given_by: str | None) -> None:
    """Only the assistant said how to export the report; the user only asked."""
    (memory,) = parse(answer({"steps": EXPORT, "applies_to": "the user", "given_by": given_by}))
    assert (memory.subject, memory.owner) == ("the user", "agent")


@pytest.mark.parametrize(
    "fields",
    [
        {"applies_to": "Person A", "given_by": "Person A"},  # the prompt example's placeholder
        {"applies_to": "the user", "given_by": "Olga"},
    ],
)
def test_a_procedure_of_someone_absent_is_dropped(fields: dict[str, str]) -> None:
    assert parse(answer(procedure("Keep answers short", **fields))) == []


def test_a_procedure_not_from_the_conversation_is_dropped() -> None:
    """The prompt example's backup workflow, answered for a conversation about something else."""
    snap = snapshot(
        turns=[
            {"content": "I live in Dublin and I work at a bank."},
            {"role": "assistant", "content": "Nice! How can I help?"},
        ]
    )
    steps = ["Plug in the external disk", "Open Time Machine", "Click Back Up Now"]
    assert parse(answer(procedure(*steps, kind="workflow", given_by="assistant")), snap) == []
    assert parse(answer(procedure("Water the plants", "Feed the cat"))) == []


def test_same_steps_for_two_people_stay_two_memories() -> None:
    memories = parse(
        answer(
            procedure("Pick an aisle seat", applies_to="John", given_by="John"),
            procedure("Pick an aisle seat", applies_to="the user", given_by="the user"),
            procedure("Pick an aisle seat", applies_to="john", given_by="John"),
        )
    )
    assert [m.subject for m in memories] == ["John", "the user"]


# --- rendering and Chinese ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trigger", "language", "expected"),
    [
        ("always", "en", "Always: A; B."),
        ("Every time", "en", "Always: A; B."),
        ("writing emails", "en", "When writing emails: A; B."),
        ("when writing emails", "en", "When writing emails: A; B."),
        ("before a release", "en", "Before a release: A; B."),
        ("写邮件", "zh", "当写邮件时\uff1aA\uff1bB。"),
        ("写邮件时", "zh", "当写邮件时\uff1aA\uff1bB。"),
        ("每次发布前", "zh", "每次发布前\uff1aA\uff1bB。"),
        ("始终", "zh", "始终\uff1aA\uff1bB。"),
    ],
)
def test_render(trigger: str, language: Any, expected: str) -> None:
    assert render(trigger, ["A", "B"], language) == expected


def test_an_assistants_answer_called_a_rule_is_its_workflow() -> None:
    """The 1.5B model's answer: the assistant's instructions as the user's "rule"."""
    (memory,) = parse(
        answer(
            {
                "kind": "rule",
                "trigger": "exporting the monthly sales report every month",
                "steps": [
                    "Open the dashboard, choose Reports, select Monthly Sales, click Export CSV"
                ],
                "applies_to": "the user",
                "given_by": "user",
            }
        )
    )
    assert (memory.subject, memory.owner, memory.attributes["given_by"]) == (
        "the user",
        "agent",
        "assistant",
    )
    assert memory.category == memory.attributes["kind"] == "instruction"


def test_a_chinese_rule() -> None:
    snap = snapshot(
        turns=[
            {"name": "王芳", "content": "以后写周报的时候，先列出本周完成的事，再写下周计划。"},
            {"role": "assistant", "content": "好的，记住了。"},
        ]
    )
    (memory,) = parse(
        answer(
            {
                "kind": "workflow",
                "trigger": "写周报",
                "steps": ["先列出本周完成的事", "再写下周计划"],
                "applies_to": "王芳",
                "given_by": "助手",
            }
        ),
        snap,
    )
    assert (memory.subject, memory.owner) == ("the user", "user")  # 王芳 is the user
    assert memory.attributes["given_by"] == "the user"  # the assistant only acknowledged it
    assert memory.text == "当写周报时\uff1a先列出本周完成的事\uff1b再写下周计划。"


# --- no procedure without someone giving or asking for one ----------------------------------


def chat(*turns: tuple[str, str]) -> SnapshotPromoted:
    return snapshot(turns=[{"role": role, "content": content} for role, content in turns])


@pytest.mark.parametrize(
    ("turns", "asks"),
    [
        ([("user", "hey there! how's it going?"), ("assistant", "Great, thanks!")], False),
        ([("user", "I'm a nurse in Leeds and I love gardening."), ("assistant", "Lovely!")], False),
        ([("user", "明天北京天气怎么样？"), ("assistant", "多云。")], False),
        ([("user", "From now on, answer briefly."), ("assistant", "Sure.")], True),
        ([("user", "How do I renew the certificate?"), ("assistant", "Run certbot.")], True),
        ([("user", "My Monday routine: bills, then meals."), ("assistant", "Got it.")], True),
        ([("user", "以后都用中文回答。"), ("assistant", "好的。")], True),
        ([("user", "发布前的检查怎么做？"), ("assistant", "先跑测试。")], True),
    ],
)
def test_a_procedure_needs_someone_giving_or_asking_for_one(
    turns: list[tuple[str, str]], asks: bool
) -> None:
    assert asks_for_a_procedure(transcript_of(chat(*turns))) is asks


def test_small_talk_has_no_procedure_whatever_the_llm_says() -> None:
    snap = chat(
        ("user", "hey there! how's it going?"),
        ("assistant", "Hi! I'm doing well. What can I do for you today?"),
        ("user", "nothing much, just saying hello :)"),
    )
    assert parse(answer(procedure("Say hello to the user", given_by="the user")), snap) == []


@pytest.mark.parametrize("step", ["Understood", "Noted, will do"])
def test_a_rule_in_the_assistants_own_words_is_no_rule(step: str) -> None:
    """Credited to the assistant and resting on no person's words: an acknowledgement."""
    assert parse(answer(procedure(step, given_by="assistant"))) == []
