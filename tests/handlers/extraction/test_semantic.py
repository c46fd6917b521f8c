"""Semantic extraction: the prompt, strict parsing of the answer, and enforced attribution."""

from __future__ import annotations

import json
from typing import Any

import pytest

from events import MemoryContent, SnapshotPromoted
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.json_answer import items_under, load_object
from handlers.extraction.semantic import SYSTEM_PROMPT, SemanticExtractor
from handlers.extraction.transcript import transcript_of
from tests.factories import snapshot

EXTRACTOR = SemanticExtractor()


def multi_speaker() -> SnapshotPromoted:
    return snapshot(
        turns=[
            # Every statement a test below parses must rest on its subject's own messages.
            {
                "name": "Tim",
                "content": "I work at Stripe. Fact: I live in Lisbon, I like tea and"
                " coffee, I drive on the I-95 and I like Imagine Dragons.",
            },
            {
                "role": "assistant",
                "name": "John",
                "content": "I am a nurse in Berlin. I like"
                " coffee too, and I work at Stripe as well: fact.",
            },
            {"role": "assistant", "content": "Here is a packing list: passport, charger."},
            {
                "content": "My sister Maria and my brother Ian visit next week. Maria lives in"
                " Berlin, a fact. What should I pack for Berlin?"
            },
        ]
    )


def answer(*facts: dict[str, Any]) -> str:
    return json.dumps({"facts": list(facts)})


def fact(statement: str, subject: str = "the user", **extra: Any) -> dict[str, Any]:
    return {"subject": subject, "statement": statement, **extra}


def parse(text: str, snap: SnapshotPromoted | None = None) -> list[MemoryContent]:
    return EXTRACTOR.parse(text, snap or multi_speaker())


# --- prompt ---------------------------------------------------------------------------------------


def test_prompt_is_a_system_message_and_the_rendered_conversation() -> None:
    system, user = EXTRACTOR.prompt(multi_speaker())
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    conversation = user["content"]
    assert conversation.startswith("Conversation:\nThe user's name is Tim\n")
    assert "[user]: I work at Stripe." in conversation
    assert "[John]: I am a nurse in Berlin." in conversation
    assert "[assistant]: Here is a packing list" in conversation
    assert "[Tim]" not in conversation  # the user stays [user] even when named
    assert conversation.rstrip().endswith("Answer with the JSON.")


def test_prompt_shows_the_empty_result_and_asks_for_one_object() -> None:
    system = EXTRACTOR.prompt(multi_speaker())[0]["content"]
    assert '{"facts": []}' in system
    assert '{"facts": [ ... ]}' in system
    for field in ("subject", "statement", "owner", "category", "profile_field"):
        assert f'"{field}"' in system


def test_prompt_of_a_chinese_conversation_uses_the_chinese_name_line() -> None:
    snap = snapshot(turns=[{"name": "Tim", "content": "我在深圳的一家银行工作。"}])
    conversation = EXTRACTOR.prompt(snap)[1]["content"]
    assert "用户名叫Tim" in conversation
    assert "[user]: 我在深圳的一家银行工作。" in conversation


def test_prompt_without_a_user_name_has_no_name_line() -> None:
    conversation = EXTRACTOR.prompt(snapshot())[1]["content"]
    assert "name is" not in conversation
    assert "[user]: I work at Stripe." in conversation


def test_transcript_knows_the_speakers() -> None:
    transcript = transcript_of(multi_speaker())
    assert transcript.user_name == "Tim"
    assert transcript.speaker_names == frozenset({"John"})
    assert transcript.names == ["John", "Tim"]
    assert transcript.text.splitlines()[0] == "The user's name is Tim"


# --- parsing --------------------------------------------------------------------------------------


def test_good_answer_is_parsed() -> None:
    memories = parse(
        answer(
            fact(
                "The user works at Stripe.",
                owner="user",
                category="work",
                profile_field="employer",
            )
        )
    )
    assert memories == [
        MemoryContent(
            subject="the user",
            owner="user",
            text="The user works at Stripe.",
            category="work",
            attributes={"profile_field": "employer"},
        )
    ]


@pytest.mark.parametrize(
    "wrap",
    [
        lambda text: f"```json\n{text}\n```",
        lambda text: f"```\n{text}\n```",
        lambda text: f"  \n```json {text}```\n",
        lambda text: f"\n\n{text}\n",
    ],
    ids=["json-fence", "bare-fence", "tight-fence", "whitespace"],
)
def test_fenced_or_padded_answer_is_tolerated(wrap: Any) -> None:
    memories = parse(wrap(answer(fact("The user works at Stripe."))))
    assert [m.text for m in memories] == ["The user works at Stripe."]


@pytest.mark.parametrize("text", ["{}", '{"facts": null}', '{"facts": []}', '{"other": [1]}'])
def test_missing_null_or_empty_facts_mean_none(text: str) -> None:
    assert parse(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The user works at Stripe.", "not valid JSON"),
        ("", "not valid JSON"),
        ('{"facts": [', "not valid JSON"),
        ("[]", "expected a JSON object, got list"),
        ('"facts"', "expected a JSON object, got str"),
        ("null", "expected a JSON object, got NoneType"),
        ('{"facts": "The user works at Stripe."}', '"facts" must be a list, got str'),
        ('{"facts": {"statement": "x"}}', '"facts" must be a list, got dict'),
        ('{"facts": ["The user works at Stripe."]}', '"facts"[0] must be an object'),
        ('{"facts": [{"subject": "the user"}]}', '"facts"[0].statement: Field required'),
        ('{"facts": [{"subject": "the user", "statement": ""}]}', '"facts"[0].statement'),
        ('{"facts": [{"subject": "the user", "statement": 7}]}', '"facts"[0].statement'),
        (answer(fact("ok."), {"subject": "x", "statement": None}), '"facts"[1].statement'),
        (answer(fact("x" * 1_001)), '"facts"[0].statement'),
        (answer(fact("ok.", subject="x" * 201)), '"facts"[0].subject'),
    ],
)
def test_unusable_answers_raise_invalid_extraction(text: str, expected: str) -> None:
    with pytest.raises(InvalidExtraction) as info:
        parse(text)
    assert expected in str(info.value)


def test_invalid_extraction_is_a_value_error() -> None:
    assert issubclass(InvalidExtraction, ValueError)


def test_statement_whitespace_is_normalised() -> None:
    (memory,) = parse(answer(fact("  The user\n works   at Stripe. ")))
    assert memory.text == "The user works at Stripe."


def test_unknown_keys_in_a_fact_are_ignored() -> None:
    (memory,) = parse(answer(fact("The user works at Stripe.", confidence=0.9)))
    assert memory.text == "The user works at Stripe."


@pytest.mark.parametrize(
    ("category", "expected"),
    [("work", "work"), ("preference", "preference"), ("hobby", "other"), (None, "other")],
)
def test_unknown_or_missing_category_becomes_other(category: str | None, expected: str) -> None:
    (memory,) = parse(answer(fact("The user works at Stripe.", category=category)))
    assert memory.category == expected


# --- attribution ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "owner", "expected_subject", "expected_owner"),
    [
        ("John", "agent", "John", "user"),  # another human is never the agent's
        ("john", "user", "John", "user"),  # the speaker's own spelling
        ("Tim", "user", "the user", "user"),  # the user's own name
        ("tim", None, "the user", "user"),
        ("the user", "agent", "the user", "user"),
        ("User", "user", "the user", "user"),
        ("用户", "user", "the user", "user"),
        ("I", "user", "the user", "user"),
        ("assistant", "user", "assistant", "agent"),
        ("The AI", None, "assistant", "agent"),
        ("助手", "user", "assistant", "agent"),
        ("Maria", "agent", "Maria", "user"),  # a person only mentioned
    ],
)
def test_attribution_is_enforced(
    subject: str, owner: str | None, expected_subject: str, expected_owner: str
) -> None:
    statement = "The assistant suggested a packing list." if expected_owner == "agent" else "Fact."
    (memory,) = parse(answer(fact(statement, subject=subject, owner=owner)))
    assert (memory.subject, memory.owner) == (expected_subject, expected_owner)


def test_a_fact_about_john_labelled_agent_comes_out_as_johns() -> None:
    (memory,) = parse(
        answer(fact("John is a nurse in Berlin.", subject="John", owner="agent", category="work"))
    )
    assert memory.subject == "John"
    assert memory.owner == "user"
    assert memory.text == "John is a nurse in Berlin."


def test_missing_subject_falls_back_to_the_statement() -> None:
    (memory,) = parse(answer({"statement": "John", "owner": "agent"}))
    assert (memory.subject, memory.owner) == ("John", "user")


def test_profile_field_is_kept_for_the_current_user() -> None:
    (memory,) = parse(answer(fact("Tim lives in Lisbon.", subject="Tim", profile_field="location")))
    assert memory.subject == "the user"
    assert memory.attributes == {"profile_field": "location"}


@pytest.mark.parametrize("subject", ["John", "assistant", "Maria"])
def test_profile_field_is_dropped_for_other_subjects(subject: str) -> None:
    statement = (
        "The assistant suggested a packing list." if subject == "assistant" else "Lives in Berlin."
    )
    (memory,) = parse(answer(fact(statement, subject=subject, profile_field="location")))
    assert memory.attributes == {}


@pytest.mark.parametrize(
    ("subject", "statement"),
    [
        ("Person A", "Person A is a nurse who works nights."),  # the prompt example's placeholder
        ("Olga", "Olga lives in Kyiv."),  # nobody in the conversation
        ("assistant", "Here is a packing list: passport, charger."),  # a copied reply
        ("assistant", "Use slicing: items[::-1]."),
    ],
)
def test_facts_not_grounded_in_the_conversation_are_dropped(subject: str, statement: str) -> None:
    assert parse(answer(fact(statement, subject=subject))) == []


@pytest.mark.parametrize("field", ["hobby", "favourite_colour", "", None])
def test_unknown_profile_field_is_dropped(field: str | None) -> None:
    (memory,) = parse(answer(fact("The user likes tea.", profile_field=field)))
    assert memory.attributes == {}


def test_duplicates_within_one_answer_are_merged() -> None:
    memories = parse(
        answer(
            fact("The user works at Stripe.", category="work"),
            fact("the user works at stripe.", subject="Tim", category="other"),
            fact("The user  works at Stripe.", subject="user"),
            fact("John works at Stripe.", subject="John"),  # another subject: kept
        )
    )
    assert [(m.subject, m.text, m.category) for m in memories] == [
        ("the user", "The user works at Stripe.", "work"),
        ("John", "John works at Stripe.", "other"),
    ]


def test_same_statement_about_two_subjects_stays_two_memories() -> None:
    memories = parse(
        answer(fact("Likes coffee.", subject="the user"), fact("Likes coffee.", subject="John"))
    )
    assert [m.subject for m in memories] == ["the user", "John"]


@pytest.mark.parametrize("subject", ["   ", ".", "?!"])
def test_blank_subject_is_invalid_extraction(subject: str) -> None:
    with pytest.raises(InvalidExtraction):
        parse(answer(fact("Works at Stripe.", subject=subject)))


@pytest.mark.parametrize("subject", ["", "   ", "John"])
def test_the_participant_a_statement_opens_with_is_its_subject(subject: str) -> None:
    (memory,) = parse(answer(fact("The user works at Stripe.", subject=subject)))
    assert (memory.subject, memory.owner) == ("the user", "user")


# --- json_answer helpers --------------------------------------------------------------------------


def test_load_object_and_items_under() -> None:
    assert load_object('```json\n{"a": 1}\n```') == {"a": 1}
    assert items_under('{"episodes": [{"title": "x"}]}', "episodes") == [{"title": "x"}]
    assert items_under('{"facts": [{"statement": "x"}]}', "episodes") == []


@pytest.mark.parametrize(
    "statement",
    [
        "I'm John, Tim's friend. I'm a nurse in Berlin.",
        "I work at Stripe.",
        "My dog is Rex.",
        "我在 Stripe 工作。",
        "I\u2019m a nurse.",
    ],
)
def test_statements_in_the_first_person_are_dropped(statement: str) -> None:
    assert parse(answer(fact(statement, subject="John"))) == []


def test_words_starting_with_i_are_not_first_person() -> None:
    (memory,) = parse(answer(fact("Ian is the user's brother.", subject="Ian")))
    assert memory.subject == "Ian"


@pytest.mark.parametrize(
    "statement",
    [
        "The user asked about the weather in Reykjavik.",
        "The user is saying hello.",
        "The assistant is greeting the user.",
        "The assistant provides tips for the last month of training.",
        "Does the user like tea?",
        "用户询问了天气。",
        "The conversation took place on Wednesday, 1 February 2023.",
        "This chat happened on 8 May 2023.",
        "对话发生在2023年5月8日。",
    ],
)
def test_statements_narrating_the_conversation_are_dropped(statement: str) -> None:
    assert parse(answer(fact(statement, subject="the user"))) == []


@pytest.mark.parametrize(
    ("statement", "subject"),
    [
        ("John told the user that coffee is great.", "John"),
        ("John congratulated the user on the job at Stripe.", "John"),
        ("The user thanked John. He asked about Berlin.", "the user"),
    ],
)
def test_what_one_participant_said_to_another_is_dropped(statement: str, subject: str) -> None:
    assert parse(answer(fact(statement, subject=subject))) == []


def test_a_fact_after_a_narrating_sentence_is_kept() -> None:
    statement = "John asked the user about work. John is a nurse in Berlin."
    (memory,) = parse(answer(fact(statement, subject="John")))
    assert (memory.subject, memory.text) == ("John", statement)


def test_prompt_asks_for_the_conversation_language() -> None:
    chinese = snapshot(turns=[{"role": "user", "content": "我在 Stripe 工作。"}])
    english = snapshot(turns=[{"role": "user", "content": "I work at Stripe."}])
    assert "in Chinese" in SemanticExtractor().prompt(chinese)[-1]["content"]
    assert "in English" in SemanticExtractor().prompt(english)[-1]["content"]


@pytest.mark.parametrize(
    "statement",
    [
        "The user is a nurse now, I work night shifts in Berlin.",
        "John says my dog is old.",
        "用户说我在上海工作。",
        "The assistant replied with a greeting.",
    ],
)
def test_copied_or_narrating_statements_are_dropped_anywhere(statement: str) -> None:
    assert parse(answer(fact(statement, subject="the user"))) == []


def test_a_fact_about_a_conversation_the_user_had_is_kept() -> None:
    said = "I gave a talk on Rust in Berlin, and I had a long conversation with my boss."
    snap = snapshot(turns=[{"role": "user", "content": said}])
    statements = [
        "The user gave a talk on Rust in Berlin.",
        "The user had a long conversation with their boss.",
    ]
    kept = parse(answer(*(fact(s) for s in statements)), snap)
    assert [m.text for m in kept] == statements


@pytest.mark.parametrize(
    "statement", ["The user drives on the I-95.", "The user likes Imagine Dragons."]
)
def test_capital_i_inside_words_is_not_first_person(statement: str) -> None:
    assert len(parse(answer(fact(statement)))) == 1


def demo_party() -> SnapshotPromoted:
    return snapshot(
        turns=[
            {"name": "Tim", "content": "I just moved to Lisbon and I work at Stripe."},
            {"role": "assistant", "name": "John", "content": "I'm John. I'm a nurse in Berlin."},
            {"role": "assistant", "content": "Nice to meet you, John! Tim, anything else?"},
            {"content": "Yes: I'm allergic to peanuts."},
        ]
    )


@pytest.mark.parametrize(
    ("subject", "statement", "kept_as"),
    [
        ("John", "John is allergic to peanuts.", None),  # the user's allergy, said after John
        ("the user", "The user is a nurse in Berlin.", None),  # John's job
        ("John", "John is allergic to cats and dogs.", None),  # nobody said so
        ("the user", "The user is a keen surfer and a nurse.", None),  # nor this
        ("the user", "The user is allergic to peanuts.", "the user"),
        ("John", "John is a nurse in Berlin.", "John"),
        ("the user", "The user lives in Lisbon.", "the user"),
    ],
)
def test_a_fact_must_rest_on_its_subjects_own_messages(
    subject: str, statement: str, kept_as: str | None
) -> None:
    memories = parse(answer(fact(statement, subject=subject)), demo_party())
    assert [m.subject for m in memories] == ([kept_as] if kept_as else [])


@pytest.mark.parametrize(
    ("subject", "statement", "moved"),
    [
        (
            "John",
            "John is allergic to peanuts and carries an epipen.",
            "The user is allergic to peanuts and carries an epipen.",
        ),
        (
            "the user",
            "The user works night shifts as a nurse in Berlin.",
            "John works night shifts as a nurse in Berlin.",
        ),
    ],
)
def test_a_fact_in_another_speakers_own_words_is_moved_to_them(
    subject: str, statement: str, moved: str
) -> None:
    party = snapshot(
        turns=[
            {"name": "Tim", "content": "I just moved to Lisbon and I work at Stripe."},
            {
                "role": "assistant",
                "name": "John",
                "content": "I'm John. I'm a nurse in Berlin, on night shifts.",
            },
            {"content": "I'm allergic to peanuts, so I carry an epipen."},
        ]
    )
    memories = parse(answer(fact(statement, subject=subject)), party)
    assert [m.text for m in memories] == [moved]


def test_a_users_fact_naming_the_user_as_someone_else_is_dropped() -> None:
    """Tim is the user: "a colleague of Tim's" is someone else's fact, muddled."""
    assert parse(answer(fact("The user works at Stripe, like Tim's colleague."))) == []


def test_a_chinese_fact_in_another_speakers_words_is_moved_to_them() -> None:
    chinese = snapshot(
        turns=[
            {"name": "王芳", "content": "李雷，你现在在哪里工作？我在银行上班。"},
            {"role": "assistant", "name": "李雷", "content": "我是医生，在上海的一家医院工作。"},
        ]
    )
    doctor = answer(fact("用户是一名医生，在上海的一家医院工作。", subject="the user"))
    banker = answer(fact("用户在银行上班。", subject="the user"))
    assert [(m.subject, m.text) for m in parse(doctor, chinese)] == [
        ("李雷", "李雷是一名医生，在上海的一家医院工作。")
    ]
    assert [m.text for m in parse(banker, chinese)] == ["用户在银行上班。"]


def test_a_translated_fact_cannot_be_judged_by_its_words_and_is_kept() -> None:
    """Small models often answer a Chinese conversation in English; the facts are still right."""
    chinese = snapshot(
        turns=[
            {"content": "我对青霉素过敏，下个月要搬到成都。"},
            {"role": "assistant", "content": "好的，我记住了。"},
        ]
    )
    allergy = answer(fact("The user is allergic to penicillin.", subject="the user"))
    assert [m.text for m in parse(allergy, chinese)] == ["The user is allergic to penicillin."]


# --- the assistant's replies are not memories (reported: a third of short conversations) ------


def chat(*turns: tuple[str, str]) -> SnapshotPromoted:
    """A snapshot of (role, content) turns between the user and the AI assistant."""
    return snapshot(turns=[{"role": role, "content": content} for role, content in turns])


SMALL_TALK = chat(
    ("user", "Long day at work, so tired."),
    ("assistant", "Coffee all day, that's the secret! Hang in there."),
)
VEGAN = chat(("user", "I'm vegan, by the way."), ("assistant", "Noted, you're vegan!"))
SMALL_TALK_ZH = chat(("user", "今天上班好累。"), ("assistant", "那就喝一整天咖啡吧！加油！"))
VEGAN_ZH = chat(("user", "我吃纯素。"), ("assistant", "好的，记下了，你吃纯素！"))
LAPTOP = chat(
    ("user", "Can you recommend a laptop for Python under $1500?"),
    ("assistant", "I recommend the Lenovo ThinkPad T14s: great keyboard, runs Linux well."),
)
HOTPOT_ZH = chat(
    ("user", "能推荐一家成都的火锅店吗？"), ("assistant", "推荐蜀大侠火锅，在春熙路。")
)
VEGAN_DINNER = chat(
    ("user", "I'm vegan. Any dinner ideas for tonight?"),
    ("assistant", "Sure! Try a red lentil curry with coconut milk and rice."),
)


def assistant_fact(statement: str) -> str:
    return answer(fact(statement, subject="assistant", owner="agent"))


@pytest.mark.parametrize(
    ("snap", "statement"),
    [
        (SMALL_TALK, "The assistant recommended coffee all day."),
        (SMALL_TALK, "The assistant suggested drinking coffee all day."),
        (VEGAN, "Assistant noted that the user is vegan."),
        (VEGAN, "The assistant noted the user's vegan diet."),
        (VEGAN, "The assistant acknowledged that the user is vegan."),
        (VEGAN, "The assistant will remember that the user is vegan."),
        (VEGAN_DINNER, "The assistant recommended a vegan diet."),  # the user's own fact
        (LAPTOP, "The assistant said it is happy to help."),
        (LAPTOP, "The assistant agreed that a laptop is useful."),
        (SMALL_TALK_ZH, "助手推荐整天喝咖啡。"),
        (SMALL_TALK_ZH, "助手建议用户加油。"),
        (VEGAN_ZH, "助手记下了用户吃纯素。"),
        (VEGAN_ZH, "助手表示用户吃纯素。"),
    ],
    ids=[
        "coffee-small-talk",
        "coffee-suggested",
        "noted-vegan",
        "noted-vegan-diet",
        "acknowledged",
        "will-remember",
        "restates-the-user",
        "happy-to-help",
        "agreed",
        "zh-coffee-small-talk",
        "zh-cheer",
        "zh-noted",
        "zh-said",
    ],
)
def test_the_assistants_replies_are_not_agent_memories(
    snap: SnapshotPromoted, statement: str
) -> None:
    assert parse(assistant_fact(statement), snap) == []


@pytest.mark.parametrize(
    ("snap", "statement"),
    [
        (LAPTOP, "The assistant recommended the Lenovo ThinkPad T14s."),
        (LAPTOP, "The assistant's recommended laptop is the ThinkPad T14s."),
        (VEGAN_DINNER, "The assistant suggested a red lentil curry for dinner."),
        (HOTPOT_ZH, "助手推荐了春熙路的蜀大侠火锅。"),
    ],
    ids=["recommended", "possessive", "suggested", "zh-recommended"],
)
def test_what_the_assistant_provided_when_asked_is_kept(
    snap: SnapshotPromoted, statement: str
) -> None:
    (memory,) = parse(assistant_fact(statement), snap)
    assert (memory.subject, memory.owner, memory.text) == ("assistant", "agent", statement)


@pytest.mark.parametrize(
    ("snap", "statement", "kept"),
    [
        (VEGAN, "The user is vegan.", "The user is vegan."),
        (VEGAN_ZH, "用户吃纯素。", "用户吃纯素。"),
    ],
)
def test_the_users_fact_survives_beside_a_dropped_assistant_restatement(
    snap: SnapshotPromoted, statement: str, kept: str
) -> None:
    restated = (
        "Assistant noted that the user is vegan." if "vegan" in kept else "助手记下了用户吃纯素。"
    )
    memories = parse(
        answer(fact(statement), fact(restated, subject="assistant", owner="agent")), snap
    )
    assert [(m.subject, m.owner, m.text) for m in memories] == [("the user", "user", kept)]


def test_an_unrequested_recommendation_is_small_talk() -> None:
    """Nobody asked for anything: the assistant's suggestion answers no need."""
    snap = chat(
        ("user", "I finally finished the quarterly report."),
        ("assistant", "Congrats! Treat yourself to a cheesecake tonight."),
    )
    assert parse(assistant_fact("The assistant recommended a cheesecake."), snap) == []


def test_prompt_says_the_assistants_replies_are_not_facts() -> None:
    assert "The assistant's replies are not facts" in SYSTEM_PROMPT
    assert "never repeat the user's fact as something the assistant noted" in SYSTEM_PROMPT
    assert '"statement": "The user is vegan."' in SYSTEM_PROMPT  # only the user's fact


WEATHER = chat(
    ("user", "What's the weather usually like in Reykjavik in March?"),
    ("assistant", "Cold and windy: highs around 3°C, frequent rain or snow showers."),
)


@pytest.mark.parametrize(
    "statement",
    [
        "The assistant provided information about the weather in Reykjavik in March.",
        "The assistant gave the user some details about Reykjavik in March.",
        "The assistant provided an explanation of the weather in Reykjavik.",
    ],
)
def test_an_answer_to_a_general_question_is_not_an_agent_memory(statement: str) -> None:
    assert parse(assistant_fact(statement), WEATHER) == []


@pytest.mark.parametrize(
    "statement",
    [
        "The user learned how to reverse a list in Python using slicing.",
        "The user found out that Reykjavik is cold in March.",
        "用户了解到雷克雅未克三月很冷。",
    ],
)
def test_what_the_user_learned_in_the_conversation_is_narration(statement: str) -> None:
    assert parse(answer(fact(statement)), WEATHER) == []


def test_what_the_user_learned_elsewhere_is_a_fact() -> None:
    snap = chat(("user", "I learned Spanish in Madrid."), ("assistant", "¡Muy bien!"))
    assert [m.text for m in parse(answer(fact("The user learned Spanish in Madrid.")), snap)] == [
        "The user learned Spanish in Madrid."
    ]


# --- a Chinese message copied as a fact -----------------------------------------------------------

BANKERS = snapshot(
    turns=[
        {"name": "王芳", "content": "我吃纯素，我在北京的一家银行工作。"},
        {"role": "assistant", "name": "李雷", "content": "我是医生，在上海工作。"},
        {"role": "assistant", "content": "好的，记下了。"},
    ]
)


@pytest.mark.parametrize(
    ("subject", "statement", "expected"),
    [
        ("the user", "我吃纯素。", ("the user", "用户吃纯素。")),
        ("王芳", "我在北京的一家银行工作。", ("the user", "用户在北京的一家银行工作。")),
        ("李雷", "我是医生，在上海工作。", ("李雷", "李雷是医生，在上海工作。")),
    ],
)
def test_a_copied_chinese_message_is_rewritten_about_its_speaker(
    subject: str, statement: str, expected: tuple[str, str]
) -> None:
    (memory,) = parse(answer(fact(statement, subject=subject)), BANKERS)
    assert (memory.subject, memory.text) == expected


@pytest.mark.parametrize(
    ("subject", "statement"),
    [
        ("the user", "我是医生，在上海工作。"),  # 李雷's message given to the user
        ("李雷", "我吃纯素。"),  # the user's message given to 李雷
        ("assistant", "我记下了。"),
        ("the user", "我们都在工作。"),  # "we"
        ("Olga", "我吃纯素。"),  # nobody in the conversation
    ],
)
def test_a_copied_chinese_message_that_is_not_plainly_its_speakers_is_dropped(
    subject: str, statement: str
) -> None:
    assert parse(answer(fact(statement, subject=subject)), BANKERS) == []


def test_an_english_copy_is_not_rewritten() -> None:
    assert parse(answer(fact("I work at Stripe."))) == []


def test_prompt_excludes_passing_moods() -> None:
    assert "no passing moods or states of the moment" in " ".join(SYSTEM_PROMPT.split())


@pytest.mark.parametrize(
    "statement",
    [
        "The user should pack light layers and a light jacket.",
        "The user might want to try the 28 tram.",
        "The user is tired.",
        "The user is so tired today.",
        "The user feels bored.",
        "用户应该多休息。",
        "用户今天上班好累啊。",
        "用户很累。",
    ],
)
def test_advice_and_passing_moods_are_not_lasting_facts(statement: str) -> None:
    snap = chat(
        ("user", "Long day, so tired and bored. 今天上班好累，很累，应该多休息。"),
        ("assistant", "You should pack light layers and a light jacket, or try the 28 tram."),
    )
    assert parse(answer(fact(statement)), snap) == []


def test_a_habit_is_a_lasting_fact() -> None:
    snap = chat(("user", "I'm always tired in the mornings."), ("assistant", "Same here!"))
    statement = "The user is tired in the mornings, always."
    assert [m.text for m in parse(answer(fact(statement)), snap)] == [statement]


# --- issue 23: content, dates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "John shared a photo.",
        "John has shared a picture with the user.",
        "John is happy to hear from the user.",
    ],
)
def test_a_statement_without_content_is_dropped(statement: str) -> None:
    assert parse(answer(fact(statement, subject="John"))) == []


def test_a_fact_naming_a_place_no_one_in_the_conversation_named_is_dropped() -> None:
    snap = chat(("user", "I moved here from my home country."), ("assistant", "Oh, welcome!"))
    said = answer(
        fact("The user moved here from France."),
        fact("The user moved here from their home country."),
    )
    assert [m.text for m in parse(said, snap)] == ["The user moved here from their home country."]


def test_a_statement_that_only_names_someone_the_conversation_names_is_dropped() -> None:
    snap = snapshot(
        turns=[
            {"name": "Caroline", "content": "Hey Mel! I went to a support group yesterday."},
            {"role": "assistant", "name": "Melanie", "content": "Wow, how did it go?"},
        ]
    )
    said = answer(
        fact("The user is Caroline."),
        fact("Melanie is Melanie.", subject="Melanie"),
        fact("The user went to a support group.", subject="the user"),
    )
    assert [m.text for m in parse(said, snap)] == ["The user went to a support group."]


def test_a_name_the_conversation_did_not_give_is_kept() -> None:
    snap = chat(("user", "Hi, I'm Dana, nice to meet you."), ("assistant", "Hi Dana!"))
    (memory,) = parse(answer(fact("The user is Dana.")), snap)
    assert memory.text == "The user is Dana."


def test_a_photo_with_what_it_shows_is_kept() -> None:
    snap = snapshot(
        turns=[
            {"name": "Tim", "content": "Look! [shares a photo of my new puppy, a beagle]"},
            {"role": "assistant", "name": "John", "content": "So cute!"},
        ]
    )
    (memory,) = parse(answer(fact("Tim shared a photo of his new beagle puppy.")), snap)
    assert memory.subject == "the user" and "beagle" in memory.text


def test_relative_times_in_a_fact_become_dates_of_the_day_it_was_said() -> None:
    # The factories' turns take place on 31 January 2026 (a Saturday).
    (memory,) = parse(answer(fact("The user visits Berlin next week with Maria.")))
    assert memory.text == "The user visits Berlin the week after 31 January 2026 with Maria."
    prompt = EXTRACTOR.prompt(multi_speaker())[1]["content"]
    assert "The conversation took place on Saturday, 31 January 2026." in prompt
