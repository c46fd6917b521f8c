"""A fact told in another speaker's own words is theirs: moved to them, or dropped."""

from __future__ import annotations

from handlers.attribution import ASSISTANT, CURRENT_USER, Attribution
from handlers.extraction.borrowed_words import borrowed_from
from handlers.extraction.transcript import Transcript, transcript_of
from tests.factories import snapshot

JOHN = Attribution(subject="John", owner="user", kind="third_party")
MARIA = Attribution(subject="Maria", owner="user", kind="third_party")


def two_friends(*extra: dict[str, str]) -> Transcript:
    """James (the user) and John, who took up the drums; James went bowling."""
    return transcript_of(
        snapshot(
            turns=[
                {"name": "James", "content": "Hey John! I went bowling yesterday, 2 strikes."},
                {
                    "role": "assistant",
                    "name": "John",
                    "content": "Nice! I've been playing drums for a month now, it's been"
                    " tough but fun. Are you still planning to visit Japan in April?",
                },
                {"content": "Yes, I am. My sister Maria lives in Kyoto and loves hiking."},
                *extra,
            ]
        )
    )


def test_a_users_fact_copied_from_johns_account_of_himself_is_moved_to_john() -> None:
    borrowed = borrowed_from(
        "The user has been playing drums for a month now, it was tough but fun.",
        CURRENT_USER,
        two_friends(),
    )
    assert borrowed is not None
    assert borrowed.owner == JOHN
    assert borrowed.moved == "John has been playing drums for a month now, it was tough but fun."


def test_a_fact_naming_its_owner_again_cannot_be_moved_and_is_dropped() -> None:
    borrowed = borrowed_from(
        "The user plays drums with John, tough but fun.", CURRENT_USER, two_friends()
    )
    assert borrowed is not None
    assert borrowed.owner == JOHN
    assert borrowed.moved is None


def test_a_word_containing_the_owners_name_is_not_naming_them() -> None:
    """ "Johnson" does not name John: the fact is moved to him, not dropped."""
    borrowed = borrowed_from(
        "The user has been playing drums for a month now with Johnson, tough but fun.",
        CURRENT_USER,
        two_friends(),
    )
    assert borrowed is not None
    assert (
        borrowed.moved == "John has been playing drums for a month now with Johnson, tough but fun."
    )


def test_johns_fact_copied_from_the_users_account_is_moved_to_the_user() -> None:
    borrowed = borrowed_from("John went bowling and got 2 strikes.", JOHN, two_friends())
    assert borrowed is not None
    assert borrowed.owner == CURRENT_USER
    assert borrowed.moved == "The user went bowling and got 2 strikes."


def test_a_question_about_the_listener_is_not_the_askers_account() -> None:
    """John asked whether the user plans to visit Japan: that plan is the user's."""
    plan = "The user is planning to visit Japan."
    assert borrowed_from(plan, CURRENT_USER, two_friends()) is None


def test_a_fact_its_subject_said_as_well_stays_theirs() -> None:
    both = two_friends({"content": "I've been playing drums for a month too, it's tough."})
    assert borrowed_from("The user has been playing drums for a month.", CURRENT_USER, both) is None


def test_a_fact_not_opening_with_its_subject_is_not_judged() -> None:
    assert borrowed_from("Plays drums, tough but fun.", CURRENT_USER, two_friends()) is None


def test_dates_the_extractor_wrote_are_not_counted_as_words() -> None:
    """Without the date, two of the fact's three terms ("drums", "month") are in John's account
    and none in the user's; counting "27", "March" and "2022" would make it two of six."""
    borrowed = borrowed_from(
        "The user has played drums for a month as of 27 March 2022.", CURRENT_USER, two_friends()
    )
    assert borrowed is not None and borrowed.owner == JOHN


def test_an_account_told_over_several_messages_counts_as_one() -> None:
    """Andrew told of a bird, then of eagles (half the fact's terms between them, a quarter in
    each); the user only asked."""
    birds = transcript_of(
        snapshot(
            turns=[
                {
                    "role": "assistant",
                    "name": "Andrew",
                    "content": "I love watching a bird soar.",
                },
                {"name": "Audrey", "content": "Me too! Do you have a favorite type of bird?"},
                {
                    "role": "assistant",
                    "name": "Andrew",
                    "content": "Eagles have always mesmerized me!",
                },
            ]
        )
    )
    borrowed = borrowed_from("The user has a favorite type of bird, eagles.", CURRENT_USER, birds)
    assert borrowed is not None
    assert borrowed.moved == "Andrew has a favorite type of bird, eagles."


def test_a_fact_of_fewer_than_three_terms_is_not_judged() -> None:
    """ "friend" alone could be either friend's word."""
    friends = two_friends({"content": "John is my best friend."})
    assert borrowed_from("John is a friend of the user.", JOHN, friends) is None


def test_the_ai_assistant_is_never_the_owner() -> None:
    chat = two_friends({"role": "assistant", "content": "I love sailing on quiet lakes."})
    assert borrowed_from("The user loves sailing on quiet lakes.", CURRENT_USER, chat) is None
    assert borrowed_from("The assistant loves sailing.", ASSISTANT, chat) is None


def test_a_person_who_does_not_speak_is_not_judged() -> None:
    """Maria is talked about, not a speaker: what the user says of her is not borrowed."""
    assert borrowed_from("Maria lives in Kyoto and loves hiking.", MARIA, two_friends()) is None


def test_a_chinese_fact_in_the_users_words_is_moved_to_the_user() -> None:
    chinese = transcript_of(
        snapshot(
            turns=[
                {"name": "王芳", "content": "我上个月开始学游泳，每周去三次。"},
                {"role": "assistant", "name": "李雷", "content": "太棒了！我在医院上班。"},
            ]
        )
    )
    li_lei = Attribution(subject="李雷", owner="user", kind="third_party")
    borrowed = borrowed_from("李雷上个月开始学游泳，每周去三次。", li_lei, chinese)
    assert borrowed is not None
    assert borrowed.moved == "用户上个月开始学游泳，每周去三次。"
