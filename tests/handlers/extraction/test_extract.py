"""`extract`: prompt, validate, retry with the reason, or give up with a failure to dead-letter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from events.memories import MemoryContent
from events.snapshots import SnapshotPromoted
from handlers.extraction.base import (
    ExtractionLimits,
    ExtractionOutcome,
    Extractor,
    extract,
    snapshot_parts,
)
from handlers.extraction.episodic import EpisodicExtractor
from handlers.extraction.procedural import ProceduralExtractor
from handlers.extraction.semantic import SemanticExtractor
from handlers.extraction.taxonomic import TaxonomicExtractor
from handlers.ports import ChatAnswer, LLMUnavailable
from tests.factories import snapshot

GOOD = json.dumps({"facts": [{"subject": "the user", "statement": "The user works at Stripe."}]})
NOT_JSON = "Sure! The user works at Stripe."
NOT_A_LIST = json.dumps({"facts": "The user works at Stripe."})


class FakeChatModel:
    """Answers with the scripted answers in order (an exception in the script is raised)."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[list[dict[str, str]]] = []

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        self.calls.append(list(messages))
        if not self.answers:
            raise AssertionError("the LLM was called more often than scripted")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return ChatAnswer(answer, "fake", prompt_tokens=10, completion_tokens=5)


async def run(llm: FakeChatModel, attempts: int = 3) -> ExtractionOutcome:
    return await extract(SemanticExtractor(), snapshot(), llm, attempts=attempts)


async def test_valid_first_answer() -> None:
    llm = FakeChatModel(GOOD)
    outcome = await run(llm)
    assert outcome.attempts == 1
    assert outcome.failure is None
    assert [m.text for m in outcome.memories] == ["The user works at Stripe."]
    assert len(llm.calls) == 1
    assert llm.calls[0] == SemanticExtractor().prompt(snapshot())


async def test_empty_answer_is_a_success_with_no_memories() -> None:
    outcome = await run(FakeChatModel('{"facts": []}'))
    assert (outcome.memories, outcome.attempts, outcome.failure) == ((), 1, None)
    assert [answer.text for answer in outcome.answers] == ['{"facts": []}']


async def test_invalid_then_valid_retries_with_the_reason() -> None:
    llm = FakeChatModel(NOT_A_LIST, GOOD)
    outcome = await run(llm)
    assert outcome.attempts == 2
    assert outcome.failure is None
    assert len(outcome.memories) == 1
    retry = llm.calls[1]
    prompt = SemanticExtractor().prompt(snapshot())
    assert retry[: len(prompt)] == prompt
    assert retry[len(prompt)] == {"role": "assistant", "content": NOT_A_LIST}
    correction = retry[len(prompt) + 1]
    assert correction["role"] == "user"
    assert '"facts" must be a list, got str' in correction["content"]
    assert "only the JSON" in correction["content"]


async def test_each_retry_is_told_only_the_latest_reason() -> None:
    llm = FakeChatModel(NOT_JSON, NOT_A_LIST, GOOD)
    outcome = await run(llm)
    assert outcome.attempts == 3
    third = llm.calls[2]
    assert len(third) == len(llm.calls[1])  # corrections do not pile up
    assert "must be a list" in third[-1]["content"]
    assert "not valid JSON" not in third[-1]["content"]


@pytest.mark.parametrize("attempts", [1, 2, 3, 5])
async def test_always_invalid_gives_a_failure_after_exactly_attempts_calls(attempts: int) -> None:
    llm = FakeChatModel(*[NOT_JSON] * attempts)
    outcome = await run(llm, attempts=attempts)
    assert len(llm.calls) == attempts
    assert outcome.attempts == attempts
    assert outcome.memories == ()
    assert outcome.failure is not None
    assert outcome.failure.startswith("invalid LLM output: ")
    assert "not valid JSON" in outcome.failure
    assert outcome.last_answer == NOT_JSON


class ListingTwice(EpisodicExtractor):
    """An extractor whose parsing returns what the LLM listed, repeats included."""

    def worth_asking(self, snapshot: SnapshotPromoted) -> bool:
        return True

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        return [
            MemoryContent(subject="user", owner="user", text=text) for text in json.loads(answer)
        ]


async def test_the_same_memory_listed_twice_in_one_answer_is_one_memory() -> None:
    listed = ["The user hiked Mont Blanc.", "The user baked bread.", "the user hiked mont blanc."]
    outcome = await extract(ListingTwice(), snapshot(), FakeChatModel(json.dumps(listed)))
    assert [m.text for m in outcome.memories] == listed[:2]


async def test_failure_names_the_last_reason() -> None:
    outcome = await run(FakeChatModel(NOT_JSON, NOT_A_LIST), attempts=2)
    assert outcome.failure == 'invalid LLM output: "facts" must be a list, got str'
    assert outcome.last_answer == NOT_A_LIST


async def test_long_bad_answers_are_cut_in_the_retry_prompt() -> None:
    long_answer = "x" * 5_000
    llm = FakeChatModel(long_answer, GOOD)
    await run(llm)
    echoed = [m for m in llm.calls[1] if m["role"] == "assistant"]
    assert echoed == [{"role": "assistant", "content": "x" * 2_000}]


@pytest.mark.parametrize("script", [(), (NOT_JSON,)], ids=["first-call", "on-retry"])
async def test_llm_unavailable_propagates(script: tuple[str, ...]) -> None:
    llm = FakeChatModel(*script, LLMUnavailable("connection refused"))
    with pytest.raises(LLMUnavailable, match="connection refused"):
        await run(llm)
    assert len(llm.calls) == len(script) + 1


async def test_blank_subject_answer_is_retried() -> None:
    blank = json.dumps({"facts": [{"subject": " ", "statement": "Works at Stripe."}]})
    outcome = await run(FakeChatModel(blank, GOOD))
    assert outcome.attempts == 2


@pytest.mark.parametrize(
    ("extractor", "small_talk"),
    [
        (EpisodicExtractor(), "What's the capital of Australia?"),
        (ProceduralExtractor(), "How's it going? Nice weather today."),
        (SemanticExtractor(), "Hi! How's it going?"),
        (EpisodicExtractor(), "Hey, I'm good, thanks! You?"),
        (TaxonomicExtractor(), "Hi! How's it going?"),
        (TaxonomicExtractor(), "At Spotify we have a standup every day at 9:30."),
    ],
)
async def test_a_snapshot_not_worth_asking_about_costs_no_llm_call(
    extractor: Extractor, small_talk: str
) -> None:
    llm = FakeChatModel()  # any call fails the test
    quiet = snapshot([{"role": "user", "content": small_talk}])
    assert not extractor.worth_asking(quiet)
    outcome = await extract(extractor, quiet, llm)
    assert (outcome.memories, outcome.attempts, outcome.answers, outcome.failure) == (
        (),
        0,
        (),
        None,
    )


@pytest.mark.parametrize(
    ("extractor", "said"),
    [
        (EpisodicExtractor(), "I went hiking with my sister yesterday."),
        (ProceduralExtractor(), "From now on, always answer me in French."),
        (SemanticExtractor(), "I moved to Porto."),
        (TaxonomicExtractor(), 'At work a "P0" is an outage that hits every customer.'),
    ],
)
def test_every_other_snapshot_is_worth_asking_about(extractor: Extractor, said: str) -> None:
    assert extractor.worth_asking(snapshot([{"role": "user", "content": said}]))


# --- limits -----------------------------------------------------------------------------------


def facts(count: int) -> str:
    items = [{"subject": "the user", "statement": f"The user owns bike {i}."} for i in range(count)]
    return json.dumps({"facts": items})


async def test_an_answer_over_the_memory_cap_is_retried_with_the_cap_then_fails() -> None:
    llm = FakeChatModel(facts(4), facts(4))
    limits = ExtractionLimits(max_memories=3)
    outcome = await extract(SemanticExtractor(), snapshot(), llm, attempts=2, limits=limits)
    assert outcome.memories == () and outcome.failure is not None
    assert "4 memories in one answer, more than the limit of 3" in outcome.failure
    assert "limit of 3" in llm.calls[1][-1]["content"]  # the retry was told the cap


async def test_an_answer_at_the_memory_cap_is_accepted() -> None:
    limits = ExtractionLimits(max_memories=3)
    outcome = await extract(SemanticExtractor(), snapshot(), FakeChatModel(facts(3)), limits=limits)
    assert outcome.failure is None and outcome.attempts == 1  # (parsing then drops unsupported)


async def test_an_answer_over_the_size_limit_is_not_parsed_and_is_retried() -> None:
    huge = facts(1)[:-2] + "]" + " " * 5_000 + "}"
    limits = ExtractionLimits(max_answer_bytes=1_000)
    llm = FakeChatModel(huge, GOOD)
    outcome = await extract(SemanticExtractor(), snapshot(), llm, limits=limits)
    assert outcome.attempts == 2 and [m.text for m in outcome.memories] == [
        "The user works at Stripe."
    ]
    assert "more than the limit of 1000" in llm.calls[1][-1]["content"]


async def test_an_answer_always_over_the_size_limit_fails_with_the_reason() -> None:
    limits = ExtractionLimits(max_answer_bytes=1_000)
    llm = FakeChatModel(*(["x" * 2_000] * 3))
    outcome = await extract(SemanticExtractor(), snapshot(), llm, limits=limits)
    assert outcome.failure is not None and "2000 bytes, more than the limit" in outcome.failure


def repeated_until_cut(count: int) -> str:
    """A small model's failure: it repeats one fact until the token limit cuts its answer."""
    item = {"subject": "the user", "statement": "The user works at Stripe."}
    return json.dumps({"facts": [item] * count})[:-40]


async def test_an_answer_cut_short_keeps_its_completed_memories_without_a_retry() -> None:
    llm = FakeChatModel(repeated_until_cut(200))
    limits = ExtractionLimits(max_memories=3)
    outcome = await extract(SemanticExtractor(), snapshot(), llm, limits=limits)
    assert (outcome.attempts, outcome.failure) == (1, None)
    assert [m.text for m in outcome.memories] == ["The user works at Stripe."]


async def test_the_memory_cap_counts_distinct_items_of_a_cut_answer() -> None:
    llm = FakeChatModel(facts(5)[:-40], GOOD)
    limits = ExtractionLimits(max_memories=3)
    outcome = await extract(SemanticExtractor(), snapshot(), llm, limits=limits)
    assert outcome.attempts == 2  # 4 completed distinct items: over the cap, retried
    assert "4 memories in one answer, more than the limit of 3" in llm.calls[1][-1]["content"]


# --- a long snapshot, part by part ------------------------------------------------------------


def said(*texts: str) -> SnapshotPromoted:
    return snapshot([{"role": "user", "content": text} for text in texts])


def test_a_snapshot_is_split_into_consecutive_parts_that_keep_its_ids() -> None:
    whole = said("I work at Stripe.", "I have a beagle.", "I live in Lisbon.", "I play chess.")
    parts = snapshot_parts(whole, 3)
    assert [[t.content for t in part.turns] for part in parts] == [
        ["I work at Stripe.", "I have a beagle.", "I live in Lisbon."],
        ["I play chess."],
    ]
    assert {(p.event_id, p.session_id, p.seq, p.occurred_at) for p in parts} == {
        (whole.event_id, whole.session_id, whole.seq, whole.occurred_at)
    }
    assert snapshot_parts(whole, 4) == [whole] and snapshot_parts(whole, None) == [whole]


def fact_answer(*statements: str) -> str:
    return json.dumps({"facts": [{"subject": "the user", "statement": s} for s in statements]})


async def test_a_long_snapshot_is_asked_about_part_by_part_and_its_memories_merged() -> None:
    llm = FakeChatModel(
        fact_answer("The user works at Stripe.", "The user has a beagle."),
        fact_answer("The user has a beagle.", "The user lives in Lisbon."),
    )
    whole = said("I work at Stripe.", "I have a beagle.", "My beagle and I live in Lisbon.")
    limits = ExtractionLimits(turns_per_call=2)
    outcome = await extract(SemanticExtractor(), whole, llm, limits=limits)
    assert [m.text for m in outcome.memories] == [
        "The user works at Stripe.",
        "The user has a beagle.",
        "The user lives in Lisbon.",
    ]
    assert (outcome.attempts, outcome.failure, len(outcome.answers)) == (2, None, 2)
    asked = [call[-1]["content"] for call in llm.calls]
    assert "Stripe" in asked[0] and "Lisbon" not in asked[0]
    assert "Lisbon" in asked[1] and "Stripe" not in asked[1]


async def test_a_part_that_fails_fails_the_whole_snapshot_and_says_which() -> None:
    llm = FakeChatModel(fact_answer("The user works at Stripe."), NOT_JSON, NOT_JSON)
    whole = said("I work at Stripe.", "I have a beagle.", "I live in Lisbon.")
    outcome = await extract(
        SemanticExtractor(), whole, llm, attempts=2, limits=ExtractionLimits(turns_per_call=2)
    )
    assert outcome.memories == () and outcome.attempts == 3
    assert outcome.failure is not None and outcome.failure.startswith("part 2 of 2: ")


class ConcurrentChatModel:
    """Answers every call with one fact after the others started, counting calls in flight; the
    call about `outage_on` fails as an unreachable endpoint."""

    def __init__(self, outage_on: str | None = None) -> None:
        self.outage_on = outage_on
        self.in_flight = self.peak = self.answered = 0

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            for _ in range(3):
                await asyncio.sleep(0)  # let the other parts start
            if self.outage_on and self.outage_on in messages[-1]["content"]:
                raise LLMUnavailable("connection refused")
            await asyncio.sleep(0.05)
            self.answered += 1
            return ChatAnswer(fact_answer("The user works at Stripe."), "fake", 10, 5)
        finally:
            self.in_flight -= 1


async def test_the_parts_of_a_long_snapshot_are_asked_at_once() -> None:
    llm = ConcurrentChatModel()
    whole = said("I work at Stripe.", "I have a beagle.", "I live in Lisbon.", "I play chess.")
    outcome = await extract(
        SemanticExtractor(), whole, llm, limits=ExtractionLimits(turns_per_call=2)
    )
    assert (llm.peak, llm.answered, outcome.attempts) == (2, 2, 2)


async def test_an_outage_in_one_part_cancels_the_others_and_reaches_the_caller() -> None:
    llm = ConcurrentChatModel(outage_on="Lisbon")
    whole = said("I work at Stripe.", "I have a beagle.", "I live in Lisbon.", "I play chess.")
    with pytest.raises(LLMUnavailable):
        await extract(SemanticExtractor(), whole, llm, limits=ExtractionLimits(turns_per_call=2))
    assert (llm.peak, llm.answered, llm.in_flight) == (2, 0, 0)


async def test_other_types_see_the_whole_snapshot_in_one_call() -> None:
    llm = FakeChatModel('{"episodes": []}')
    whole = said("I work at Stripe.", "I have a beagle.", "I live in Lisbon.")
    await extract(EpisodicExtractor(), whole, llm, limits=ExtractionLimits(turns_per_call=2))
    assert len(llm.calls) == 1


async def test_a_cut_answer_with_an_integer_past_64_bits_is_counted_and_parsed() -> None:
    item = (
        '{"subject": "the user", "statement": "The user works at Stripe.", '
        '"n": 1180591620717411303424}'
    )
    outcome = await run(FakeChatModel('{"facts": [' + item + ", " + item[:30]))
    assert (outcome.failure, [m.text for m in outcome.memories]) == (
        None,
        ["The user works at Stripe."],
    )
