"""Attribution of extracted facts to the current user, other humans and the AI."""

from __future__ import annotations

import pytest

from handlers.attribution import (
    ASSISTANT,
    CURRENT_USER,
    Attribution,
    canonical_subject,
    evidence_terms,
    is_profile_eligible,
    rests_on,
)
from handlers.messages import ChatMessage
from handlers.rendering import current_user_name, named_speakers

SPEAKERS = ["John", "约翰"]


@pytest.mark.parametrize(
    "raw",
    [
        "the user",
        "The user",
        "user",
        "User",
        "USER",
        " the  user. ",
        "I",
        "me",
        "用户",
        "我",
        "当前用户",
        "Tim",
        "tim",
    ],
)
def test_the_current_users_facts_are_about_the_user(raw: str) -> None:
    attribution = canonical_subject(raw, user_name="Tim", speaker_names=SPEAKERS)
    assert attribution == CURRENT_USER
    assert attribution.subject == "the user"
    assert attribution.owner == "user"
    assert is_profile_eligible(attribution)


def test_the_users_name_is_only_the_user_when_the_user_is_named() -> None:
    attribution = canonical_subject("Tim", user_name=None, speaker_names=SPEAKERS)
    assert attribution == Attribution(subject="Tim", owner="user", kind="third_party")


@pytest.mark.parametrize(
    ("raw", "subject"), [("John", "John"), ("john", "John"), ("约翰", "约翰"), ("“John”", "John")]
)
def test_named_speakers_own_facts_are_theirs_and_owned_by_the_user(raw: str, subject: str) -> None:
    attribution = canonical_subject(raw, user_name="Tim", speaker_names=SPEAKERS)
    assert attribution == Attribution(subject=subject, owner="user", kind="third_party")
    assert attribution.owner != "agent"
    assert not is_profile_eligible(attribution)


@pytest.mark.parametrize("raw", ["Maria", "the user's sister", "Stripe"])
def test_other_names_stay_as_written_and_are_never_agent_or_profile(raw: str) -> None:
    attribution = canonical_subject(raw, user_name="Tim", speaker_names=SPEAKERS)
    assert attribution == Attribution(subject=raw, owner="user", kind="third_party")
    assert not is_profile_eligible(attribution)


@pytest.mark.parametrize(
    "raw", ["assistant", "the assistant", "Assistant", "AI", "the AI", "助手", "AI助手"]
)
def test_the_ai_assistants_facts_are_owned_by_the_agent(raw: str) -> None:
    attribution = canonical_subject(raw, user_name="Tim", speaker_names=SPEAKERS)
    assert attribution == ASSISTANT
    assert (attribution.subject, attribution.owner) == ("assistant", "agent")
    assert not is_profile_eligible(attribution)


def test_the_current_user_wins_over_a_speaker_with_the_same_name() -> None:
    assert canonical_subject("Tim", user_name="Tim", speaker_names=["Tim"]) == CURRENT_USER


@pytest.mark.parametrize("raw", ["", "   ", "。", '""'])
def test_an_empty_subject_is_invalid_llm_output(raw: str) -> None:
    with pytest.raises(ValueError, match="empty fact subject"):
        canonical_subject(raw, user_name="Tim", speaker_names=SPEAKERS)


def test_attribution_from_a_rendered_conversation() -> None:
    messages = [
        ChatMessage(role="user", name="Tim", content="我在 Stripe 工作。"),
        ChatMessage(role="assistant", name="John", content="我是住在柏林的护士。"),
        ChatMessage(role="assistant", content="好的,记住了。"),
    ]
    user_name, speakers = current_user_name(messages), named_speakers(messages)
    facts = {
        "用户": "用户在 Stripe 工作。",
        "John": "John is a nurse in Berlin.",
        "助手": "助手记下了。",
    }
    attributions = {
        raw: canonical_subject(raw, user_name=user_name, speaker_names=speakers) for raw in facts
    }
    assert attributions == {
        "用户": CURRENT_USER,
        "John": Attribution(subject="John", owner="user", kind="third_party"),
        "助手": ASSISTANT,
    }
    assert [raw for raw, a in attributions.items() if is_profile_eligible(a)] == ["用户"]


# --- the subject a statement opens with ------------------------------------------------------

from handlers.attribution import subject_in_statement, with_user_as_subject  # noqa: E402


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("The user works at Stripe.", "the user"),
        ("User likes tea.", "the user"),
        ("用户在 Stripe 工作。", "the user"),
        ("John is a nurse in Berlin.", "John"),
        ("Johnny is a nurse.", None),  # a longer name is not John
        ("John-Paul is a nurse.", None),  # nor a hyphenated one
        ("Tim lives in Lisbon.", "Tim"),
        ("The assistant recommended a café.", "assistant"),
        ("助手推荐了一家咖啡馆。", "assistant"),
        ("Lisbon is sunny.", None),
        ("Users often forget passwords.", None),
        ("User-friendly apps sell.", None),
    ],
)
def test_subject_in_statement(statement: str, expected: str | None) -> None:
    assert subject_in_statement(statement, user_name="Tim", speaker_names=["John"]) == expected


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("Tim works at Stripe.", "The user works at Stripe."),
        ("Tim's dog is called Rex.", "The user's dog is called Rex."),
        ("Tim在 Stripe 工作。", "用户在 Stripe 工作。"),
        ("Tim, John's friend, moved to Porto.", "The user, John's friend, moved to Porto."),
        ("Tim\uff0c李雷的朋友，搬到了杭州。", "用户\uff0c李雷的朋友，搬到了杭州。"),
        ("The user works at Stripe.", "The user works at Stripe."),
        ("Timothy works at Stripe.", "Timothy works at Stripe."),
    ],
)
def test_with_user_as_subject(statement: str, expected: str) -> None:
    assert with_user_as_subject(statement, "Tim") == expected


def test_an_ideograph_outside_the_basic_block_is_part_of_its_chinese_run() -> None:
    # 䶮 (U+4DAE) is in Extension A: the pairs around it are terms like any other.
    assert {"刘䶮", "䶮爱", "爱喝", "喝茶"} <= evidence_terms("刘䶮爱喝茶")
    assert rests_on("刘䶮爱喝茶。", ["我是刘䶮"], names=[])


# --- how a statement names a person: its opening, and anywhere --------------------------------

from handlers.attribution import mentions, opens_with, user_opening_length  # noqa: E402


@pytest.mark.parametrize(
    ("statement", "length"),
    [
        ("The user works at Stripe.", len("The user")),
        ("THE USER's dog barks.", len("THE USER")),
        ("user likes tea.", len("user")),
        ("该用户在杭州工作。", len("该用户")),
        ("用户在杭州工作。", len("用户")),
        ("Users often forget passwords.", 0),
        ("The user-facing app sells.", 0),
        ("Tim works at Stripe.", 0),
    ],
)
def test_user_opening_length_counts_the_words_naming_the_user_at_the_start(
    statement: str, length: int
) -> None:
    assert user_opening_length(statement) == length


@pytest.mark.parametrize(
    ("text", "opening", "expected"),
    [
        ("john's dog barks.", "John", True),
        ("Johnny is a nurse.", "John", False),
        ("John-Paul is a nurse.", "John", False),
        ("李雷在杭州工作。", "李雷", True),
    ],
)
def test_opens_with_takes_a_latin_opening_as_a_whole_word(
    text: str, opening: str, expected: bool
) -> None:
    assert opens_with(text, opening) is expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("went to a car show with Dave.", "Dave", True),
        ("went to a car show with dave.", "Dave", True),
        ("is the same as before.", "Sam", False),
        ("met Sam-Ann there.", "Sam", False),
        ("和李雷一起去了杭州。", "李雷", True),
    ],
)
def test_mentions_finds_a_latin_name_only_as_a_whole_word(
    text: str, name: str, expected: bool
) -> None:
    assert mentions(text, name) is expected
