"""Reconciliation decisions: ADD, UPDATE, REINFORCE, subject safety, the LLM band."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import pytest

from events import MemoryAdded, MemoryReinforced, MemoryUpdated, derived_id
from handlers.extraction.results import snapshot_source
from handlers.known_memory import KnownMemory
from handlers.reconcile import (
    Answer,
    NewMemory,
    Question,
    Reconciliation,
    Thresholds,
    new_memory_id,
    reconcile,
)
from tests import factories as f

THRESHOLDS = Thresholds(reinforce=0.95, ask=0.8)
MODEL = "scripted-embedding"


def at_similarity(similarity: float, side: int = 1) -> tuple[float, float]:
    """A unit vector whose cosine with (1, 0) is `similarity` (`side` -1: mirrored, so two
    such vectors on either side are far from each other)."""
    return (similarity, side * math.sqrt(1 - similarity * similarity))


def known(
    text: str,
    *,
    subject: str = "the user",
    vector: tuple[float, ...] = (1.0, 0.0),
    version: int = 1,
    model: str = MODEL,
    memory_id: str | None = None,
    **attributes: Any,
) -> KnownMemory:
    return KnownMemory(
        memory_id=memory_id or f"m-{text[:12]}",
        version=version,
        content=f.content(subject=subject, text=text, attributes=attributes),
        embedding=vector,
        embedding_model=model,
    )


def new(
    text: str,
    *,
    subject: str = "the user",
    similarity: float = 1.0,
    side: int = 1,
    **attributes: Any,
) -> NewMemory:
    return NewMemory(
        f.content(subject=subject, text=text, attributes=attributes),
        at_similarity(similarity, side),
    )


class ScriptedAsk:
    """The LLM port: answers in order, recording what it was shown and how many calls."""

    def __init__(self, *answers: Answer | None) -> None:
        self.answers = list(answers)
        self.shown: list[tuple[str, list[str]]] = []
        self.calls = 0

    async def __call__(self, questions: Sequence[Question]) -> list[Answer | None]:
        self.calls += 1
        given = []
        for question in questions:
            memory, options = question.new, question.options
            self.shown.append((memory.content.text, [o.memory.memory_id for o in options]))
            if not self.answers:
                raise AssertionError("the LLM was asked more often than scripted")
            given.append(self.answers.pop(0))
        return given


def run(
    news: list[NewMemory],
    knowns: list[KnownMemory],
    ask: ScriptedAsk | None = None,
    memory_type: str = "semantic",
    thresholds: Thresholds = THRESHOLDS,
    adds_only: bool = False,
) -> Reconciliation:
    snap = f.snapshot(occurred_at=f.at(30))
    return asyncio.run(
        reconcile(
            memory_type,  # type: ignore[arg-type]
            news,
            knowns,
            source=snapshot_source(snap),
            provenance=f.provenance(),
            thresholds=thresholds,
            ask=ask or ScriptedAsk(),
            adds_only=adds_only,
        )
    )


def test_a_memory_with_nothing_known_is_added() -> None:
    result = run([new("The user works at Stripe.")], [])
    (event,) = result.events
    assert isinstance(event, MemoryAdded)
    assert event.version == 1 and event.content.text == "The user works at Stripe."
    assert event.occurred_at == f.at(30)  # the source's event time
    assert event.provenance is not None and event.provenance.reconciled_by == "rule"
    assert [m.memory_id for m in result.known] == [event.memory_id]
    assert result.asked == 0


def test_a_near_duplicate_is_reinforced_without_asking_the_llm() -> None:
    existing = known("The user is vegan.")
    result = run([new("The user is a vegan.", similarity=0.97)], [existing])
    (event,) = result.events
    assert isinstance(event, MemoryReinforced)
    assert (event.memory_id, event.version) == (existing.memory_id, 1)
    assert result.asked == 0
    assert result.known == (existing,)
    assert "REINFORCE" in result.notes[0] and "0.970" in result.notes[0]


def test_the_ambiguous_band_asks_the_llm_which_may_update() -> None:
    existing = known("The user lives in Lisbon.")
    ask = ScriptedAsk(Answer("UPDATE", existing.memory_id, "moved"))
    result = run([new("The user lives in Porto.", similarity=0.9)], [existing], ask)
    (event,) = result.events
    assert isinstance(event, MemoryUpdated)
    assert (event.memory_id, event.version, event.supersedes_version) == (existing.memory_id, 2, 1)
    assert event.reason == "moved"
    assert event.event_id == derived_id("updated", existing.memory_id, 2)
    assert event.provenance is not None and event.provenance.reconciled_by == "llm"
    (after,) = result.known
    assert (after.version, after.content.text) == (2, "The user lives in Porto.")
    assert ask.shown == [("The user lives in Porto.", [existing.memory_id])]


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (Answer("REINFORCE", "m-The user lik", "same"), MemoryReinforced),
        (Answer("ADD", reason="different"), MemoryAdded),
        (Answer("UPDATE", "m-not-shown"), MemoryAdded),  # may only pick what it was shown
        (None, MemoryAdded),  # no usable answer after its retries
    ],
    ids=["reinforce", "add", "unknown-target", "no-answer"],
)
def test_the_llm_may_only_choose_among_the_candidates_it_was_shown(
    answer: Answer | None, kind: type
) -> None:
    existing = known("The user likes tea.")
    result = run(
        [new("The user likes green tea.", similarity=0.85)], [existing], ScriptedAsk(answer)
    )
    (event,) = result.events
    assert isinstance(event, kind)
    if answer is not None and answer.target == "m-not-shown":
        assert "'m-not-shown', which it was not shown" in result.notes[0]


def test_below_the_band_a_memory_is_added_without_asking() -> None:
    result = run([new("The user plays chess.", similarity=0.5)], [known("The user plays golf.")])
    assert isinstance(result.events[0], MemoryAdded)
    assert result.asked == 0


def test_a_memory_whose_words_open_a_known_one_is_reinforced_without_asking() -> None:
    sams = known("Sam is a friend of Evan's who is also a teacher.", subject="Sam")
    result = run([new("Sam is a friend of Evan's.", subject="Sam", similarity=0.85)], [sams])
    (event,) = result.events
    assert isinstance(event, MemoryReinforced) and event.memory_id == sams.memory_id
    assert result.asked == 0


def test_a_memory_opening_with_a_known_ones_words_updates_it_without_asking_below_the_band() -> (
    None
):
    sams = known("Sam is a friend of Evan's.", subject="Sam")
    longer = "Sam is a friend of Evan's who is also a teacher."
    result = run([new(longer, subject="Sam", similarity=0.5)], [sams])
    (event,) = result.events
    assert isinstance(event, MemoryUpdated) and event.memory_id == sams.memory_id
    assert event.content.text == longer
    assert result.asked == 0


def test_a_memory_extending_an_earlier_one_of_its_source_updates_it_in_the_next_wave() -> None:
    result = run(
        [
            new("The user has two cats.", similarity=1.0),
            new("The user has two cats and a dog.", similarity=0.3, side=-1),
        ],
        [],
    )
    first, second = result.events
    assert isinstance(first, MemoryAdded) and isinstance(second, MemoryUpdated)
    assert second.memory_id == first.memory_id and second.version == 2


def test_a_memory_about_another_subject_is_never_touched() -> None:
    """'The user likes coffee' and 'John likes coffee' stay two memories, however similar."""
    johns = known("John likes coffee.", subject="John")
    result = run([new("The user likes coffee.", similarity=1.0)], [johns])
    (event,) = result.events
    assert isinstance(event, MemoryAdded)
    assert {m.memory_id for m in result.known} == {johns.memory_id, event.memory_id}


def test_vectors_of_another_embedding_model_are_never_compared() -> None:
    other = known("The user is vegan.", model="another-model")
    result = run([new("The user is vegan.", similarity=1.0)], [other])
    assert isinstance(result.events[0], MemoryAdded)


def test_a_fact_restated_twice_in_one_batch_is_added_once_and_reinforced_once() -> None:
    result = run(
        [new("The user is vegan."), new("The user is strictly vegan.", similarity=0.99)], []
    )
    first, second = result.events
    assert isinstance(first, MemoryAdded) and isinstance(second, MemoryReinforced)
    assert second.memory_id == first.memory_id


def test_the_same_memory_twice_in_one_source_reinforces_instead_of_colliding() -> None:
    lenient = Thresholds(reinforce=1.0, ask=1.0)
    result = run(
        # three words: fewer than the wording rule decides on (handlers.restatement.MIN_WORDS)
        [new("Vegan since 2019."), new("Vegan since 2019.", similarity=0.999999)],
        [],
        thresholds=lenient,
    )
    first, second = result.events
    assert isinstance(second, MemoryReinforced) and second.memory_id == first.memory_id
    assert "repeated in the same source" in result.notes[1]


def at_angle(degrees: float) -> tuple[float, float]:
    """A unit vector at `degrees` from (1, 0): two of them are cos(their angle apart) similar."""
    return (math.cos(math.radians(degrees)), math.sin(math.radians(degrees)))


def test_the_ambiguous_memories_of_one_source_are_asked_in_one_call() -> None:
    lisbon = known("The user lives in Lisbon.", memory_id="m-city", vector=at_angle(50))
    cats = known("The user has two cats.", memory_id="m-cats", vector=at_angle(-60))
    ask = ScriptedAsk(Answer("UPDATE", "m-city", "moved"), Answer("ADD", reason="another pet"))
    result = run(
        [
            NewMemory(f.content(text="The user lives in Porto."), at_angle(26)),
            NewMemory(f.content(text="The user has a dog."), at_angle(-32)),
        ],
        [lisbon, cats],
        ask,
    )
    assert ask.calls == 1 and result.asked == 2
    assert ask.shown == [
        ("The user lives in Porto.", ["m-city"]),
        ("The user has a dog.", ["m-cats"]),
    ]
    update, added = result.events
    assert isinstance(update, MemoryUpdated) and update.memory_id == "m-city"
    assert isinstance(added, MemoryAdded)
    assert all(e.provenance and e.provenance.reconciled_by == "llm" for e in result.events)


def test_a_chain_said_in_one_source_updates_step_by_step() -> None:
    lisbon = known("The user lives in Lisbon.", memory_id="m-city")
    ask = ScriptedAsk(Answer("UPDATE", "m-city", "moved"), Answer("UPDATE", "m-city", "moved"))
    result = run(
        [
            NewMemory(f.content(text="The user lives in Porto."), at_angle(25)),
            NewMemory(f.content(text="The user lives in Faro."), at_angle(45)),
        ],
        [lisbon],
        ask,
    )
    assert ask.calls == 2, "Faro waits for the decision about Porto"
    assert ask.shown == [
        ("The user lives in Porto.", ["m-city"]),
        ("The user lives in Faro.", ["m-city"]),
    ]
    first, second = result.events
    assert isinstance(first, MemoryUpdated) and first.version == 2
    assert isinstance(second, MemoryUpdated) and second.version == 3
    assert second.supersedes_version == 2 and second.content.text == "The user lives in Faro."
    (current,) = result.known
    assert current.content.text == "The user lives in Faro." and current.version == 3


def test_a_memory_sharing_a_candidate_with_an_earlier_one_is_planned_after_its_decision() -> None:
    """Porto replaces Lisbon; Faro, which was only like Lisbon, is then like nothing known."""
    lisbon = known("The user lives in Lisbon.", memory_id="m-city")
    ask = ScriptedAsk(Answer("UPDATE", "m-city", "moved"))
    result = run(
        [
            new("The user lives in Porto.", similarity=0.9),
            new("The user lives in Faro.", similarity=0.88, side=-1),
        ],
        [lisbon],
        ask,
    )
    assert ask.calls == 1
    first, second = result.events
    assert isinstance(first, MemoryUpdated) and first.version == 2
    assert isinstance(second, MemoryAdded)
    assert "nothing similar" in result.notes[1]


def test_unrelated_memories_after_an_entangled_one_are_still_asked_in_the_first_call() -> None:
    lisbon = known("The user lives in Lisbon.", memory_id="m-city", vector=at_angle(50))
    cats = known("The user has two cats.", memory_id="m-cats", vector=at_angle(-70))
    ask = ScriptedAsk(
        Answer("UPDATE", "m-city", "moved"),
        Answer("ADD", reason="another pet"),
        Answer("UPDATE", "m-city", "moved again"),
    )
    result = run(
        [
            NewMemory(f.content(text="The user lives in Porto."), at_angle(26)),
            NewMemory(f.content(text="The user lives in Faro."), at_angle(0)),
            NewMemory(f.content(text="The user has a dog."), at_angle(-45)),
        ],
        [lisbon, cats],
        ask,
    )
    assert ask.calls == 2
    assert [text for text, _ in ask.shown] == [
        "The user lives in Porto.",
        "The user has a dog.",
        "The user lives in Faro.",
    ]
    kinds = [type(event) for event in result.events]
    assert kinds == [MemoryUpdated, MemoryAdded, MemoryUpdated]
    assert result.events[2].version == 3  # type: ignore[union-attr]


def test_an_ask_port_that_answers_another_number_of_questions_is_an_error() -> None:
    async def short(questions: Sequence[Question]) -> list[Answer | None]:
        return []

    porto = new("The user lives in Porto.", similarity=0.9)
    lisbon = known("The user lives in Lisbon.")
    with pytest.raises(ValueError, match="1 questions asked, 0 answers given"):
        run([porto], [lisbon], short)  # type: ignore[arg-type]


def test_the_llm_is_shown_at_most_max_options_most_similar_first() -> None:
    knowns = [
        known(f"The user likes sport {n}.", vector=at_similarity(0.81 + n / 100), memory_id=f"m{n}")
        for n in range(5)
    ]
    ask = ScriptedAsk(Answer("ADD"))
    run([new("The user likes sports.")], knowns, ask)
    assert ask.shown[0][1] == ["m4", "m3", "m2"]


def test_memory_ids_come_from_the_source_and_what_the_memory_says() -> None:
    snap = f.snapshot()
    content = f.content(text="The user works at Stripe.")
    expected = derived_id(
        "memory", "semantic", snap.event_id, "the user", "The user works at Stripe."
    )
    assert new_memory_id("semantic", snap.event_id, content) == expected
    result = run([new("B fact."), new("The user works at Stripe.", similarity=0.1)], [])
    source_id = result.events[1].evidence.snapshot_id or ""
    assert result.events[1].memory_id == new_memory_id("semantic", source_id, content)


# --- taxonomic terms --------------------------------------------------------------------------


def test_reinforcing_a_term_merges_new_aliases_and_examples() -> None:
    existing = KnownMemory(
        memory_id="t1",
        version=1,
        content=f.term("Kafka", "Apache Kafka", examples=["logs"]),
        embedding=(1.0, 0.0),
        embedding_model=MODEL,
    )
    restated = NewMemory(f.term("Kafka", "kafka", "AK", examples=["logs", "events"]), (1.0, 0.0))
    result = run([restated], [existing], memory_type="taxonomic")
    (event,) = result.events
    assert isinstance(event, MemoryReinforced)
    # "kafka" is the term itself, not an alias of it.
    assert event.merged_attributes == {
        "aliases": ["Apache Kafka", "AK"],
        "examples": ["logs", "events"],
    }
    (after,) = result.known
    assert after.content.attributes["aliases"] == ["Apache Kafka", "AK"]


@pytest.mark.parametrize(("reinforce", "ask"), [(0.8, 0.9), (1.1, 0.5), (0.5, -1.5)])
def test_thresholds_must_be_ordered_cosines(reinforce: float, ask: float) -> None:
    with pytest.raises(ValueError, match="thresholds"):
        Thresholds(reinforce=reinforce, ask=ask)


def test_thresholds_show_the_llm_at_least_one_candidate() -> None:
    with pytest.raises(ValueError, match="max_options"):
        Thresholds(reinforce=0.95, ask=0.8, max_options=0)


def test_a_type_that_only_adds_adds_even_a_near_duplicate_without_asking() -> None:
    existing = known("The user reported a broken charger.")
    result = run(
        [
            new("The user reported a broken charger.", similarity=0.999),
            new("The user reported a broken charger again.", similarity=0.95),
        ],
        [existing],
        memory_type="open_ticket",
        adds_only=True,
    )
    assert [type(event) for event in result.events] == [MemoryAdded, MemoryAdded]
    assert {event.memory_type for event in result.events} == {"open_ticket"}
    assert result.asked == 0
    assert all("only adds" in note for note in result.notes)


def test_a_type_that_only_adds_still_reinforces_a_repeat_in_the_same_source() -> None:
    result = run(
        [new("The user reported a broken charger."), new("The user reported a broken charger.")],
        [],
        adds_only=True,
    )
    first, second = result.events
    assert isinstance(second, MemoryReinforced) and second.memory_id == first.memory_id
