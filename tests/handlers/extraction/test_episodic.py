"""Episodic extraction: the prompt, strict parsing, enforced attribution and honest times."""

from __future__ import annotations

import json
from typing import Any

import pytest

from events import MemoryContent, SnapshotPromoted
from handlers.extraction.base import InvalidExtraction, extract
from handlers.extraction.episodic import SYSTEM_PROMPT, EpisodicExtractor, has_a_story
from handlers.extraction.transcript import transcript_of
from tests.factories import at, snapshot
from tests.handlers.extraction.test_extract import FakeChatModel

EXTRACTOR = EpisodicExtractor()


def trip() -> SnapshotPromoted:
    """Tim plans a trip with John (another human) and the AI assistant, over 40 minutes."""
    return snapshot(
        turns=[
            {
                "name": "Tim",
                "content": "John, want to come to Porto with me in May? I found cheap flights.",
                "occurred_at": at(0),
            },
            {
                "role": "assistant",
                "name": "John",
                "content": "Yes! I'll book the hotel near Ribeira.",
                "occurred_at": at(600),
            },
            {
                "content": "Great. Which day should we fly?",
                "occurred_at": at(1200),
            },
            {
                "role": "assistant",
                "content": "Fly on Friday 9 May: the fares are lowest and you get a full weekend.",
                "occurred_at": at(2400),
            },
        ]
    )


def answer(*episodes: dict[str, Any]) -> str:
    return json.dumps({"episodes": list(episodes)})


def episode(summary: str, subject: str = "the user", **extra: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"subject": subject, "title": "Planning a trip to Porto"}
    fields.update(summary=summary, **extra)
    return fields


PORTO = (
    "The user and John planned a trip to Porto in May; John will book the hotel and the "
    "assistant suggested flying on Friday 9 May."
)


def parse(text: str, snap: SnapshotPromoted | None = None) -> list[MemoryContent]:
    return EXTRACTOR.parse(text, snap or trip())


# --- prompt ---------------------------------------------------------------------------------------


def test_prompt_is_the_system_prompt_and_the_rendered_conversation() -> None:
    system, user = EXTRACTOR.prompt(trip())
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["content"].startswith("Conversation:\nThe user's name is Tim\n")
    assert "[user]: John, want to come to Porto" in user["content"]
    assert "[John]: Yes! I'll book the hotel" in user["content"]
    assert "[assistant]: Fly on Friday" in user["content"]
    assert "in English" in user["content"]
    assert user["content"].rstrip().endswith("Answer with the JSON.")


def test_prompt_asks_for_one_object_says_the_user_and_shows_empty_answers() -> None:
    assert '{"episodes": [ ... ]}' in SYSTEM_PROMPT
    assert SYSTEM_PROMPT.count('{"episodes": []}') >= 3  # the rule and two empty examples
    for field in ("subject", "title", "summary", "participants", "outcome"):
        assert f'"{field}"' in SYSTEM_PROMPT
    assert "[Person A]" in SYSTEM_PROMPT  # a placeholder, never a real-looking name
    assert "Never invent" in SYSTEM_PROMPT


def test_prompt_of_a_chinese_conversation_asks_for_chinese() -> None:
    snap = snapshot(turns=[{"name": "王芳", "content": "我昨天面试了一家银行，感觉不错。"}])
    conversation = EXTRACTOR.prompt(snap)[1]["content"]
    assert "用户名叫王芳" in conversation
    assert "in Chinese" in conversation and "用户" in conversation


# --- parsing --------------------------------------------------------------------------------------


def test_a_good_episode_is_parsed_with_the_snapshots_time_span() -> None:
    (memory,) = parse(
        answer(
            episode(
                PORTO,
                participants=["the user", "John", "assistant"],
                outcome="They will fly to Porto on Friday 9 May.",
            )
        )
    )
    assert memory == MemoryContent(
        subject="the user",
        owner="user",
        text=PORTO,
        category="event",
        attributes={
            "title": "Planning a trip to Porto",
            "participants": ["the user", "John", "assistant"],
            "started_at": "2026-01-31T12:00:00+00:00",
            "ended_at": "2026-01-31T12:40:00+00:00",
            "happened": "May",
            "outcome": "They will fly to Porto on Friday 9 May.",
        },
    )


def test_times_come_from_the_turns_never_from_the_llm() -> None:
    (memory,) = parse(
        answer(episode(PORTO, started_at="2020-01-01T00:00:00Z", ended_at="yesterday"))
    )
    assert memory.attributes["started_at"] == at(0).isoformat()
    assert memory.attributes["ended_at"] == at(2400).isoformat()


def test_time_span_is_the_earliest_and_latest_turn_even_out_of_order() -> None:
    snap = snapshot(
        turns=[
            {"content": "Back from my Porto trip, it was great.", "occurred_at": at(50)},
            {"role": "assistant", "content": "Welcome back!", "occurred_at": at(10)},
        ]
    )
    (memory,) = parse(answer(episode("The user came back from a trip to Porto.")), snap)
    assert (memory.attributes["started_at"], memory.attributes["ended_at"]) == (
        at(10).isoformat(),
        at(50).isoformat(),
    )


@pytest.mark.parametrize("text", ["{}", '{"episodes": null}', '{"episodes": []}'])
def test_missing_null_or_empty_episodes_mean_none(text: str) -> None:
    assert parse(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The user planned a trip.", "not valid JSON"),
        ("[]", "expected a JSON object, got list"),
        ('{"episodes": "a trip"}', '"episodes" must be a list, got str'),
        ('{"episodes": ["a trip"]}', '"episodes"[0] must be an object'),
        ('{"episodes": [{"summary": "The user planned a trip."}]}', '"episodes"[0].title'),
        ('{"episodes": [{"title": "Trip"}]}', '"episodes"[0].summary: Field required'),
        (answer(episode(PORTO, title="   ")), '"episodes"[0].title: must not be blank'),
        (answer(episode(" \n ")), '"episodes"[0].summary: must not be blank'),
        (answer(episode(PORTO, participants="the user, John")), '"episodes"[0].participants'),
        (answer(episode(PORTO, participants=["the user", 7])), '"episodes"[0].participants.1'),
        (answer(episode(PORTO, outcome=["booked"])), '"episodes"[0].outcome'),
        (answer(episode(PORTO, title="x" * 201)), '"episodes"[0].title'),
        (answer(episode(PORTO), episode("x" * 2_001)), '"episodes"[1].summary'),
        (answer(episode("A trip to Porto was planned.", subject=" . ")), '"episodes"[0].subject'),
    ],
)
def test_unusable_answers_raise_invalid_extraction(text: str, expected: str) -> None:
    with pytest.raises(InvalidExtraction) as info:
        parse(text)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    "summary",
    [
        "I planned a trip to Porto with John.",
        "We planned a trip to Porto.",
        "我和John计划去波尔图。",
    ],
)
def test_a_summary_in_the_first_person_is_a_copied_message_and_dropped(summary: str) -> None:
    kept = episode(PORTO, title="Porto")
    assert parse(answer(episode(summary), kept)) == parse(answer(kept))


def test_a_summary_that_only_tells_what_was_said_is_dropped() -> None:
    narration = episode(
        "John congratulated the user on the trip! He asked which day they would fly.",
        title="Congratulations",
    )
    kept = episode(PORTO, title="Porto")
    assert parse(answer(narration, kept)) == parse(answer(kept))


def test_a_summary_naming_a_place_no_one_in_the_conversation_named_is_dropped() -> None:
    invented = episode(PORTO.replace("Porto", "Lisbon"), title="Lisbon")
    kept = episode(PORTO, title="Porto")
    assert parse(answer(invented, kept)) == parse(answer(kept))


def test_a_summary_that_also_says_what_happened_is_kept() -> None:
    told = "John asked the user about the trip. John will book the hotel near Ribeira."
    (memory,) = parse(answer(episode(told, title="Porto")))
    assert memory.text == told


async def test_a_copied_message_costs_no_retry() -> None:
    """A retry asking for the third person did not make the 1.5B model rewrite it."""
    llm = FakeChatModel(answer(episode("I planned a trip to Porto.")))
    outcome = await extract(EXTRACTOR, trip(), llm)
    assert (outcome.attempts, outcome.memories, outcome.failure) == (1, (), None)


def test_whitespace_is_normalised_and_a_null_outcome_is_none() -> None:
    (memory,) = parse(answer(episode(f"  {PORTO}\n", title=" Porto \n trip ", outcome="none")))
    assert memory.text == PORTO
    assert memory.attributes["title"] == "Porto trip"
    assert memory.attributes["outcome"] is None


# --- attribution ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "summary", "expected"),
    [
        ("the user", PORTO, "the user"),
        ("", PORTO, "the user"),
        ("John", PORTO, "the user"),  # the participant the summary opens with wins
        ("Tim", "Tim planned a trip to Porto with John in May.", "the user"),
        ("assistant", "The assistant helped plan a trip to Porto in May.", "the user"),
        ("the user", "John will book the hotel near Ribeira for the Porto trip.", "John"),
    ],
)
def test_whose_episode_it_is(subject: str, summary: str, expected: str) -> None:
    (memory,) = parse(answer(episode(summary, subject=subject)))
    assert (memory.subject, memory.owner) == (expected, "user")  # never the agent's


def test_the_users_name_is_rewritten_as_the_user() -> None:
    (memory,) = parse(answer(episode("Tim planned a trip to Porto with John in May.")))
    assert memory.text == "The user planned a trip to Porto with John in May."


def test_the_users_name_is_the_user_throughout() -> None:
    (memory,) = parse(
        answer(
            episode(
                "Tim, John's friend, planned a trip to Porto; John will book Tim's hotel.",
                title="Tim's Porto trip",
                outcome="Tim and John fly on 9 May.",
            )
        )
    )
    assert memory.text == (
        "The user, John's friend, planned a trip to Porto; John will book the user's hotel."
    )
    assert memory.attributes["title"] == "The user's Porto trip"
    assert memory.attributes["outcome"] == "The user and John fly on 9 May."


def test_the_users_name_in_a_chinese_episode_is_yonghu() -> None:
    snap = snapshot(
        turns=[
            {"name": "王芳", "content": "李雷，妈妈下周六过生日，我们办个聚会吧？"},
            {"role": "assistant", "name": "李雷", "content": "好主意！蛋糕我来订。"},
        ]
    )
    summary = "王芳和李雷计划给妈妈办生日聚会，李雷订蛋糕，王芳请亲戚。"
    (memory,) = parse(answer(episode(summary, title="王芳的生日聚会计划")), snap)
    assert memory.text == "用户和李雷计划给妈妈办生日聚会，李雷订蛋糕，用户请亲戚。"
    assert memory.attributes["title"] == "用户的生日聚会计划"


@pytest.mark.parametrize(
    ("turns", "story"),
    [
        ([("user", "hey there! how's it going?"), ("assistant", "Great, thanks!")], False),
        ([("user", "What's the capital of Australia?"), ("assistant", "Canberra.")], False),
        ([("user", "你好呀"), ("assistant", "你好！有什么可以帮你的吗？")], False),
        ([("user", "I had my interview at Spotify."), ("assistant", "How was it?")], True),
        ([("user", "Can you help us plan the party?"), ("assistant", "Sure!")], True),
        ([("user", "我上周搬到杭州了。"), ("assistant", "恭喜！")], True),
        ([("user", "The US election is in November."), ("assistant", "Yes.")], False),
    ],
)
def test_an_episode_needs_someone_speaking_of_themselves(
    turns: list[tuple[str, str]], story: bool
) -> None:
    snap = snapshot(turns=[{"role": role, "content": content} for role, content in turns])
    assert has_a_story(transcript_of(snap)) is story


def test_small_talk_has_no_episode_whatever_the_llm_says() -> None:
    snap = snapshot(
        turns=[
            {"content": "hey there! how's it going?"},
            {"role": "assistant", "content": "Hi! What can I do for you today?"},
            {"content": "nothing much, just saying hello :)"},
        ]
    )
    greeting = episode("The user greeted the assistant and said hello.", title="Hello")
    assert parse(answer(greeting), snap) == []


def test_another_humans_story_counts() -> None:
    snap = snapshot(
        turns=[
            {"content": "John, how's your wrist?"},
            {"role": "assistant", "name": "John", "content": "I broke it falling off my bike."},
        ]
    )
    summary = "John broke his wrist falling off his bike."
    (memory,) = parse(answer(episode(summary, title="John's bike accident")), snap)
    assert (memory.subject, memory.owner) == ("John", "user")


def test_participants_are_canonical_and_grounded() -> None:
    (memory,) = parse(
        answer(
            episode(
                PORTO,
                participants=["Tim", "john", "The AI", "Person A", "Olga", "user", ""],
            )
        )
    )
    assert memory.attributes["participants"] == ["the user", "John", "assistant"]


def test_without_valid_participants_the_speakers_are_used() -> None:
    (memory,) = parse(answer(episode(PORTO, participants=["Person A"])))
    assert memory.attributes["participants"] == ["the user", "John", "assistant"]


def test_the_subject_is_always_a_participant() -> None:
    summary = "John will book the hotel near Ribeira for the Porto trip."
    (memory,) = parse(answer(episode(summary, participants=["the user"])))
    assert memory.attributes["participants"] == ["John", "the user"]


def test_the_assistant_is_a_participant_only_if_it_spoke() -> None:
    snap = snapshot(
        turns=[
            {"name": "Tim", "content": "John, I got the job at the bakery!"},
            {"role": "assistant", "name": "John", "content": "Congratulations, Tim!"},
        ]
    )
    summary = "The user told John about getting a job at the bakery."
    (memory,) = parse(
        answer(episode(summary, participants=["the user", "John", "assistant"])), snap
    )
    assert memory.attributes["participants"] == ["the user", "John"]


@pytest.mark.parametrize(
    ("subject", "summary"),
    [
        ("Person A", "Person A planned a hike on the lake trail on Saturday."),  # the example
        ("the user", "The user planned a hike on the lake trail with Person A."),  # not this talk
        ("Olga", "Olga moved to Kyiv last spring."),
    ],
)
def test_episodes_not_grounded_in_the_conversation_are_dropped(subject: str, summary: str) -> None:
    assert parse(answer(episode(summary, subject=subject))) == []


def test_two_episodes_with_the_same_title_are_one() -> None:
    memories = parse(answer(episode(PORTO), episode(PORTO + " Fares are lowest on Friday.")))
    assert [m.text for m in memories] == [PORTO]


# --- Chinese --------------------------------------------------------------------------------------


def test_a_chinese_episode() -> None:
    snap = snapshot(
        turns=[
            {"name": "王芳", "content": "李雷，我昨天去银行面试了，明天出结果。"},
            {"role": "assistant", "name": "李雷", "content": "祝你好运！面试官问了什么？"},
        ]
    )
    (memory,) = parse(
        answer(
            {
                "subject": "王芳",
                "title": "银行面试",
                "summary": "王芳昨天去银行面试，明天出结果。",
                "participants": ["用户", "李雷"],
                "outcome": None,
            }
        ),
        snap,
    )
    assert (memory.subject, memory.owner) == ("the user", "user")
    # Relative times are dates of the day it was said (the turns' 31 January 2026).
    assert memory.text == "用户2026年1月30日去银行面试，2026年2月1日出结果。"
    assert memory.attributes["happened"] == "2026年1月30日"
    assert memory.attributes["participants"] == ["the user", "李雷"]
    assert memory.attributes["title"] == "银行面试"
