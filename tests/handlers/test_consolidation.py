"""Consolidation decisions: clusters (never across subjects, users or agents), strict answers,
the budget, and the one record per request and type — the same every time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from events.consolidations import MemoriesConsolidated
from events.memories import LLMUsage, MemoryUpdated
from handlers.consolidation import (
    Cluster,
    ClusterAnswer,
    ForeignMemory,
    Verdict,
    clusters_of,
    consolidation_record,
    consolidation_result_id,
    decided,
    requested_types,
)
from handlers.consolidation_prompt import (
    OPENING,
    PROMPT_VERSION,
    ask,
    ask_within,
    parse,
    prompt,
)
from handlers.extraction.base import InvalidExtraction
from handlers.known_memory import KnownMemory
from handlers.known_state import with_own_records
from handlers.ports import ChatAnswer
from tests import factories as f

STAMP = f.provenance(prompt_version=None, embedding_model="e")


def known(
    memory_id: str,
    text: str,
    vector: tuple[float, ...] = (1.0, 0.0),
    *,
    subject: str = "the user",
    user_id: str | None = f.USER_ID,
    agent_id: str | None = None,
    version: int = 1,
    model: str = "e",
) -> KnownMemory:
    return KnownMemory(
        memory_id=memory_id,
        version=version,
        user_id=user_id,
        agent_id=agent_id,
        content=f.content(text=text, subject=subject),
        embedding=vector,
        embedding_model=model,
    )


LISBON = known("m1", "The user lives in Lisbon.", (1.0, 0.0), version=2)
PORTO = known("m2", "The user lives in Porto.", (0.9, 0.1))
SEA = known("m3", "The user likes the sea.", (0.0, 1.0))


def test_similar_memories_of_one_subject_form_a_cluster_and_others_stay_out() -> None:
    (cluster,) = clusters_of([SEA, PORTO, LISBON], user_id=f.USER_ID, threshold=0.8)
    assert cluster.memory_ids == ("m1", "m2")
    assert cluster.subject == "the user"


def test_clusters_are_connected_components_in_a_deterministic_order() -> None:
    chain = [
        known("c", "c", (0.0, 1.0)),
        known("a", "a", (1.0, 0.0)),
        known("b", "b", (0.7, 0.7)),  # links a and c, which are not alike
    ]
    (cluster,) = clusters_of(chain, user_id=f.USER_ID, threshold=0.7)
    assert cluster.memory_ids == ("a", "b", "c")
    again = clusters_of(list(reversed(chain)), user_id=f.USER_ID, threshold=0.7)
    assert [c.memory_ids for c in again] == [("a", "b", "c")]


def test_a_large_component_is_cut_in_clusters_of_the_cap() -> None:
    many = [known(f"m{n:02d}", f"fact {n}") for n in range(11)]
    clusters = clusters_of(many, user_id=f.USER_ID, threshold=0.9, max_size=4)
    assert [len(c.members) for c in clusters] == [4, 4, 3]


def test_never_across_subjects_even_when_the_texts_are_alike() -> None:
    john = known("j", "John lives in Lisbon.", (1.0, 0.0), subject="John")
    assert clusters_of([LISBON, john], user_id=f.USER_ID, threshold=0.5) == []
    # Case and spaces do not make another subject.
    same = known("x", "The user lives in Lisbon!", (1.0, 0.0), subject="The  User")
    (cluster,) = clusters_of([LISBON, same], user_id=f.USER_ID, threshold=0.5)
    assert cluster.memory_ids == ("m1", "x")


def test_never_across_agent_scopes_or_embedding_models() -> None:
    scoped = known("s", "The user lives in Lisbon.", agent_id="agent-1")
    other_model = known("o", "The user lives in Lisbon.", model="other")
    assert clusters_of([LISBON, scoped, other_model], user_id=f.USER_ID, threshold=0.5) == []


def test_a_memory_of_another_user_is_refused_loudly() -> None:
    foreign = known("z", "The user lives in Lisbon.", user_id="u2")
    with pytest.raises(ForeignMemory):
        clusters_of([LISBON, foreign], user_id=f.USER_ID, threshold=0.5)


def test_a_cluster_forged_across_subjects_or_users_decides_nothing() -> None:
    john = known("j", "John lives in Porto.", subject="John")
    request = f.consolidation_request()
    forged = Cluster("the user", (LISBON, john))
    with pytest.raises(ForeignMemory):
        decided(
            request,
            "semantic",
            forged,
            Verdict("supersede", survivor=1),
            embedding=None,
            provenance=STAMP,
            prompt_version=PROMPT_VERSION,
        )
    stranger = Cluster("the user", (LISBON, known("z", "x", user_id="u2")))
    with pytest.raises(ForeignMemory):
        decided(
            request,
            "semantic",
            stranger,
            Verdict("supersede", survivor=0),
            embedding=None,
            provenance=STAMP,
            prompt_version=PROMPT_VERSION,
        )


# --- answers -------------------------------------------------------------------------------


def test_the_prompt_numbers_the_cluster_and_says_what_it_is() -> None:
    messages = prompt(Cluster("the user", (LISBON, PORTO)))
    assert messages[0]["content"].startswith(OPENING)
    # Newest first: Porto (learned after Lisbon, or after it by id) is number 1.
    assert "1. The user lives in Porto.\n2. The user lives in Lisbon." in messages[1]["content"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            {"action": "KEEP", "keep": None, "reason": "two facts"},
            Verdict("keep", reason="two facts"),
        ),
        ({"action": "supersede", "keep": "2"}, Verdict("supersede", survivor=1)),
        (
            {"action": "MERGE", "keep": 1, "text": " One. ", "reason": "same"},
            Verdict("merge", survivor=0, text="One.", reason="same"),
        ),
    ],
)
def test_answers_are_read_strictly(answer: dict[str, Any], expected: Verdict) -> None:
    assert parse(json.dumps(answer), 2) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not valid JSON"),
        ('{"action": "DELETE"}', '"action" must be one of'),
        ('{"action": "SUPERSEDE", "keep": 3}', '"keep" must be the number'),
        ('{"action": "SUPERSEDE", "keep": 0}', '"keep" must be the number'),
        ('{"action": "SUPERSEDE", "keep": true}', '"keep" must be the number'),
        ('{"action": "MERGE", "keep": 1, "text": ""}', "a MERGE needs"),
        ('{"action": "MERGE", "keep": 1}', "a MERGE needs"),
    ],
)
def test_bad_answers_say_why(text: str, problem: str) -> None:
    with pytest.raises(InvalidExtraction, match=problem):
        parse(text, 2)


class Scripted:
    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.asked: list[Sequence[dict[str, str]]] = []

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        self.asked.append(messages)
        return ChatAnswer(self.texts.pop(0), "m", prompt_tokens=10, completion_tokens=2)


def test_a_bad_answer_is_asked_again_with_the_reason_then_kept() -> None:
    llm = Scripted('{"action": "SUPERSEDE", "keep": 7}', '{"action": "SUPERSEDE", "keep": 1}')
    cluster = Cluster("the user", (LISBON, PORTO))
    verdict, answers = asyncio.run(ask(llm, cluster, calls=3))
    assert verdict == Verdict("supersede", survivor=1)  # number 1, the newest: Porto
    assert len(answers) == 2
    assert "That answer was invalid" in llm.asked[1][-1]["content"]
    assert '"keep" must be the number' in llm.asked[1][-1]["content"]

    never = Scripted("nope", "still nope")
    verdict, answers = asyncio.run(ask(never, cluster, calls=2))
    assert verdict is None and len(answers) == 2


def test_the_budget_stops_at_the_same_cluster_every_time() -> None:
    clusters = [Cluster("the user", (LISBON, PORTO)) for _ in range(4)]
    calls: list[int] = []

    async def answer(cluster: Cluster, allowed: int) -> tuple[Verdict | None, list[ChatAnswer]]:
        calls.append(allowed)
        # The first question takes two calls (one re-ask), the others one.
        spent = 2 if len(calls) == 1 else 1
        return Verdict("keep"), [ChatAnswer("{}", "m")] * min(spent, allowed)

    answered, answers = asyncio.run(ask_within(clusters, max_calls=4, attempts=3, ask=answer))
    assert [each.asked for each in answered] == [True, True, True, False]
    assert calls == [3, 2, 1]
    assert len(answers) == 4
    nothing, none = asyncio.run(ask_within(clusters, max_calls=0, attempts=3, ask=answer))
    assert [each.asked for each in nothing] == [False] * 4 and none == []


# --- the record ----------------------------------------------------------------------------


def _record(*answered: ClusterAnswer, **vectors: Any) -> MemoriesConsolidated:
    return consolidation_record(
        f.consolidation_request(event_id="c-1"),
        "semantic",
        list(answered),
        vectors={0: (0.5, 0.5)},
        provenance=STAMP,
        usage=LLMUsage(calls=len(answered), prompt_tokens=10, completion_tokens=2),
        prompt_version=PROMPT_VERSION,
    )


def test_a_merge_updates_the_survivor_and_retires_the_others() -> None:
    cluster = Cluster("the user", (LISBON, PORTO))
    merged = Verdict("merge", survivor=0, text="The user lives in Lisbon and Porto.", reason="x")
    record = _record(ClusterAnswer(cluster, merged, asked=True))
    assert record.event_id == consolidation_result_id("c-1", "semantic")
    (update,) = record.decisions
    assert isinstance(update, MemoryUpdated)
    assert (update.memory_id, update.version, update.supersedes_version) == ("m1", 3, 2)
    assert update.content.text == "The user lives in Lisbon and Porto."
    assert update.embedding == (0.5, 0.5)
    assert update.reason is not None and "consolidation c-1" in update.reason
    assert "merged m2 (x)" in update.reason
    assert update.provenance is not None
    assert update.provenance.prompt_version == PROMPT_VERSION
    (retired,) = record.retired
    assert (retired.memory_id, retired.version, retired.into, retired.into_version) == (
        "m2",
        1,
        "m1",
        3,
    )
    assert retired.action == "merge"
    assert record.memory_ids == ("m1", "m2")
    assert [(c.action, c.survivor) for c in record.clusters] == [("merge", "m1")]
    assert record.unchanged is None
    assert record == _record(ClusterAnswer(cluster, merged, asked=True))  # the same every time


def test_a_supersede_keeps_the_survivors_text_and_vector() -> None:
    cluster = Cluster("the user", (LISBON, PORTO))
    record = _record(ClusterAnswer(cluster, Verdict("supersede", survivor=1), asked=True))
    (update,) = record.decisions
    assert (update.memory_id, update.content, update.embedding) == ("m2", PORTO.content, (0.9, 0.1))
    assert [r.memory_id for r in record.retired] == ["m1"]


def test_kept_unanswered_and_skipped_clusters_change_nothing_and_say_why() -> None:
    cluster = Cluster("the user", (LISBON, PORTO))
    record = _record(
        ClusterAnswer(cluster, Verdict("keep"), asked=True),
        ClusterAnswer(cluster, None, asked=True),
        ClusterAnswer(cluster, None, asked=False),
    )
    assert record.decisions == () and record.retired == ()
    assert [c.action for c in record.clusters] == ["keep", "unanswered", "skipped"]
    assert (record.clusters_found, record.clusters_asked, record.clusters_skipped) == (3, 2, 1)
    assert record.unchanged is not None and "kept" in record.unchanged
    assert _record().unchanged == "no cluster of similar memories of one subject"
    skipped = _record(ClusterAnswer(cluster, None, asked=False))
    assert skipped.unchanged is not None and "budget" in skipped.unchanged
    assert skipped.prompt_version is None


def test_the_stage_stops_seeing_retired_memories() -> None:
    cluster = Cluster("the user", (LISBON, PORTO))
    record = _record(ClusterAnswer(cluster, Verdict("supersede", survivor=1), asked=True))
    before = {m.memory_id: m for m in (LISBON, PORTO, SEA)}
    after = with_own_records(before, [record])
    assert sorted(after) == ["m2", "m3"]
    assert after["m2"].version == 2
    assert with_own_records(after, [record]) == after  # applied twice, the same


def test_a_record_refuses_another_users_decisions() -> None:
    cluster = Cluster("the user", (LISBON, PORTO))
    record = _record(ClusterAnswer(cluster, Verdict("supersede", survivor=1), asked=True))
    payload = record.model_dump()
    payload["user_id"] = "u2"
    with pytest.raises(ValueError, match="not of this user"):
        MemoriesConsolidated.model_validate(payload)


def test_a_request_naming_no_type_consolidates_the_enabled_ones() -> None:
    named = f.consolidation_request(memory_types=("episodic",))
    assert requested_types(named, ["semantic"]) == ("episodic",)
    everything = f.consolidation_request(memory_types=())
    assert requested_types(everything, ["semantic", "procedural"]) == ("semantic", "procedural")


def test_a_clusters_memories_are_listed_oldest_first() -> None:
    older = LISBON.model_copy(update={"memory_id": "z-old", "learned_at": f.at(0)})
    newer = PORTO.model_copy(update={"memory_id": "a-new", "learned_at": f.at(60)})
    (cluster,) = clusters_of([newer, older], user_id=f.USER_ID, threshold=0.8)
    assert cluster.memory_ids == ("z-old", "a-new")
    assert "newest first" in prompt(cluster)[0]["content"]
    assert "1. The user lives in Porto." in prompt(cluster)[1]["content"]


def test_a_run_at_the_largest_budget_fits_in_one_record() -> None:
    from events.codec import MAX_EVENT_BYTES, encode
    from events.consolidations import MAX_MAX_CALLS
    from handlers.vectors import rounded

    vector = rounded([0.123456789] * 1536)
    clusters = [
        Cluster(
            "the user",
            (
                known(f"a{n:02d}", "x" * 4000, vector, version=7),
                known(f"b{n:02d}", "y" * 4000, vector),
            ),
        )
        for n in range(MAX_MAX_CALLS)
    ]
    merged = Verdict("merge", survivor=0, text="z" * 4000, reason="r" * 300)
    record = consolidation_record(
        f.consolidation_request(max_calls=MAX_MAX_CALLS, reason="w" * 1000),
        "semantic",
        [ClusterAnswer(cluster, merged, asked=True) for cluster in clusters],
        vectors=dict.fromkeys(range(MAX_MAX_CALLS), vector),
        provenance=STAMP,
        usage=LLMUsage(calls=MAX_MAX_CALLS),
        prompt_version=PROMPT_VERSION,
    )
    assert len(record.decisions) == MAX_MAX_CALLS
    assert len(encode(record)) < MAX_EVENT_BYTES
