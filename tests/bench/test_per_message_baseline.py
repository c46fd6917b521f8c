"""The per-message (mem0-kind) baseline of the LLM-cost benchmark: its requests and its store."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bench import per_message_baseline as baseline
from bench.cost_answers import update_decisions
from bench.cost_conversation import Fact


def pair(user: str, assistant: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def test_extraction_request_shows_the_last_ten_messages_as_context_then_the_new_pair() -> None:
    history = [m for i in range(8) for m in pair(f"u{i}", f"a{i}")]
    messages = baseline.extraction_request(history, pair("I live in Oslo", "Nice"))

    assert messages[0] == {"role": "system", "content": baseline.EXTRACTION_PROMPT}
    text = messages[1]["content"]
    context, new = text.split(baseline.NEW_MESSAGES)
    assert "u2" not in context and "u3: " not in context  # only the last 10 messages
    assert "user: u3" in context and "assistant: a7" in context
    assert new == "\nuser: I live in Oslo\nassistant: Nice"
    assert baseline.request_kind({"messages": messages}) == "extract"
    assert baseline.new_part({"messages": messages}) == new


def test_first_extraction_request_has_no_context_section() -> None:
    messages = baseline.extraction_request([], pair("hi", "hello"))

    assert messages[1]["content"] == f"{baseline.NEW_MESSAGES}\nuser: hi\nassistant: hello"


def test_update_request_is_one_user_message_that_round_trips_what_it_shows() -> None:
    shown = [{"id": "0", "text": "Lives in Oslo"}, {"id": "1", "text": "用户喜欢爬山"}]
    messages = baseline.update_request(shown, ["Lives in Bergen"])

    assert [m["role"] for m in messages] == ["user"]
    assert messages[0]["content"].startswith(baseline.UPDATE_OPENING)
    assert "用户喜欢爬山" in messages[0]["content"]  # not escaped: counted as the model sees it
    assert baseline.request_kind({"messages": messages}) == "update"
    assert baseline.shown_in_update({"messages": messages}) == (shown, ["Lives in Bergen"])


def test_update_request_without_memories_says_so() -> None:
    messages = baseline.update_request([], ["Name is Tom"])

    assert "There are no existing memories." in messages[0]["content"]
    assert baseline.shown_in_update({"messages": messages}) == ([], ["Name is Tom"])


def _embed(texts: Sequence[str]) -> list[list[float]]:
    """Vectors by first letter: texts starting alike are identical."""
    return [
        [1.0 if t[:1].lower() == c else 0.0 for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts
    ]


def test_store_numbers_the_nearest_memories_and_applies_add_update_delete() -> None:
    store = baseline.Store(_embed)
    store.apply({"memory": [{"id": "0", "text": "lives in Oslo", "event": "ADD"}]}, {})
    store.apply({"memory": [{"id": "0", "text": "bakes bread", "event": "ADD"}]}, {})

    shown, numbers = store.similar(["lives in Bergen"])
    assert shown[0] == {"id": "0", "text": "lives in Oslo"}
    counts = store.apply(
        {
            "memory": [
                {"id": "0", "text": "lives in Bergen", "event": "UPDATE"},
                {"id": "1", "text": "bakes bread", "event": "DELETE"},
                {"id": "2", "text": "Name is Tom", "event": "ADD"},
            ]
        },
        numbers,
    )

    assert counts == {"ADD": 1, "UPDATE": 1, "DELETE": 1, "NONE": 0}
    assert sorted(text for text, _ in store.memories.values()) == ["Name is Tom", "lives in Bergen"]


def test_run_makes_one_extraction_call_per_pair_and_an_update_call_only_with_facts() -> None:
    sent: list[list[dict[str, str]]] = []

    def chat(messages: list[dict[str, str]]) -> str:
        sent.append(messages)
        if baseline.request_kind({"messages": messages}) == "update":
            return json.dumps({"memory": [{"id": "0", "text": "lives in Oslo", "event": "ADD"}]})
        new = baseline.new_part({"messages": messages})
        return json.dumps({"facts": ["lives in Oslo"] if "Oslo" in new else []})

    sessions = [pair("hi", "hello") + pair("I live in Oslo", "nice"), pair("bye", "bye")]
    counts = baseline.run(sessions, chat, baseline.Store(_embed))

    assert counts["extraction_calls"] == 3
    assert counts["update_calls"] == 1
    assert counts["ADD"] == 1


def test_scripted_update_answer_lists_every_memory_shown_and_adds_only_new_facts() -> None:
    facts = {
        "Lives in Bergen": Fact("Lives in Bergen", replaces="Lives in Oslo"),
        "Still bakes": Fact("Still bakes", same_as="Bakes bread"),
        "Name is Tom": Fact("Name is Tom"),
    }
    shown = [{"id": "0", "text": "Lives in Oslo"}, {"id": "1", "text": "Bakes bread"}]

    answer = update_decisions(facts, shown, ["Lives in Bergen", "Still bakes", "Name is Tom"])

    assert answer == {
        "memory": [
            {
                "id": "0",
                "text": "Lives in Bergen",
                "event": "UPDATE",
                "old_memory": "Lives in Oslo",
            },
            {"id": "1", "text": "Bakes bread", "event": "NONE"},
            {"id": "2", "text": "Name is Tom", "event": "ADD"},
        ]
    }
