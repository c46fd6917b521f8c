"""The reconciliation evaluation: its pairs file, zones, threshold choice and scoring (pure), and
run.py's reconcile wiring against a scripted LLM."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from typing import Any

import pytest

from bench.reconcile_eval.pairs import (
    DEFAULT_PAIRS_FILE,
    Pair,
    PairFormatError,
    distractors,
    parse_pairs,
    scope_for,
)
from bench.reconcile_eval.run import (
    Prepared,
    ask_batch,
    ask_english_with,
    decide,
    prepare,
    report_json,
    saved_run,
)
from bench.reconcile_eval.scoring import (
    Choice,
    Outcome,
    Ranked,
    Request,
    SelectionRule,
    choose_thresholds,
    confusion,
    counts,
    fraction,
    grid,
    groups,
    harm,
    llm_usage,
    markdown_table,
    resolvable,
    right,
    zone,
)
from bench.reconcile_eval.tables import report, variants_table
from events.memories import Provenance
from handlers import reconcile_prompt
from handlers.known_memory import KnownMemory
from handlers.ports import ChatAnswer
from handlers.reconcile import NewMemory, Option, Thresholds
from tests import factories

MODEL = "scripted-embedding"


def raw_pair(pair_id: str, kind: str = "update", **fields: Any) -> dict[str, Any]:
    expected = {"paraphrase": "REINFORCE", "update": "UPDATE"}.get(kind, "ADD")
    other = "John" if kind == "different-subject" else "the user"
    return {
        "id": pair_id,
        "language": "en",
        "memory_type": "semantic",
        "kind": kind,
        "expected": expected,
        "topics": [pair_id],
        "existing": {"subject": other, "text": f"{pair_id}: old"},
        "new": {"subject": "the user", "text": f"{pair_id}: new"},
        **fields,
    }


def pair(pair_id: str, kind: str = "update", **fields: Any) -> Pair:
    (parsed,) = parse_pairs({"pairs": [raw_pair(pair_id, kind, **fields)]})
    return parsed


def ranked(p: Pair, *candidates: tuple[str, float]) -> Ranked:
    """`p` with candidates given as (memory id, similarity); "own" is the pair's memory."""
    named = tuple((p.existing_id if i == "own" else i, s) for i, s in candidates)
    return Ranked(p, named, named[0][1] if named else 0.0)


# --- the pairs file ---------------------------------------------------------------------------


def test_the_shipped_pairs_cover_what_the_benchmark_promises() -> None:
    pairs = parse_pairs(json.loads(DEFAULT_PAIRS_FILE.read_text(encoding="utf-8")))
    assert len(pairs) >= 80
    assert sum(p.language == "zh" for p in pairs) * 3 >= len(pairs)
    assert {p.kind for p in pairs} == {
        "paraphrase",
        "update",
        "different-fact",
        "different-subject",
    }
    assert {p.memory_type for p in pairs} == {"semantic", "procedural", "taxonomic", "episodic"}
    assert sum(p.memory_type == "semantic" for p in pairs) > len(pairs) / 2
    assert len({p.new.text for p in pairs}) == len(pairs)


def test_a_pair_must_expect_what_its_kind_allows() -> None:
    with pytest.raises(PairFormatError, match="a paraphrase pair expects REINFORCE"):
        parse_pairs({"pairs": [raw_pair("p", "paraphrase", expected="UPDATE")]})


def test_only_a_different_subject_pair_has_two_subjects() -> None:
    two_subjects = raw_pair("p", "update")
    two_subjects["existing"]["subject"] = "John"
    with pytest.raises(PairFormatError, match="only a different-subject pair"):
        parse_pairs({"pairs": [two_subjects]})
    one_subject = raw_pair("q", "different-subject")
    one_subject["existing"]["subject"] = "the user"
    with pytest.raises(PairFormatError, match="only a different-subject pair"):
        parse_pairs({"pairs": [one_subject]})


def test_duplicate_ids_and_bad_fields_are_refused() -> None:
    with pytest.raises(PairFormatError, match="duplicate pair ids: p"):
        parse_pairs({"pairs": [raw_pair("p"), raw_pair("p")]})
    with pytest.raises(PairFormatError, match="'language'"):
        parse_pairs({"pairs": [raw_pair("p", language="fr")]})
    with pytest.raises(PairFormatError, match="'topics'"):
        parse_pairs({"pairs": [raw_pair("p", topics=[])]})
    with pytest.raises(PairFormatError, match="non-empty list"):
        parse_pairs([raw_pair("p")])


def test_the_assistants_memories_are_owned_by_the_agent() -> None:
    raw = raw_pair("p", "paraphrase")
    raw["existing"]["subject"] = raw["new"]["subject"] = "assistant"
    (parsed,) = parse_pairs({"pairs": [raw]})
    assert parsed.existing.owner == parsed.new.owner == "agent"


# --- scopes and distractors ---------------------------------------------------------------------


def unit(similarity: float) -> tuple[float, float]:
    """A unit vector whose cosine with (1, 0) is `similarity`."""
    return (similarity, math.sqrt(1 - similarity * similarity))


def test_distractors_share_subject_type_and_language_but_no_topic_most_similar_first() -> None:
    target = pair("target", topics=["home"])
    near = pair("near", topics=["job"])
    far = pair("far", topics=["pet"])
    same_topic = pair("same-topic", topics=["home", "job"])
    chinese = pair("chinese", topics=["diet"], language="zh")
    procedural = pair("procedural", topics=["rule"], memory_type="procedural")
    johns = pair("johns", "different-subject", topics=["drink"])  # existing is John's
    everyone = [target, near, far, same_topic, chinese, procedural, johns]
    vectors = {p.existing.text: unit(0.5) for p in everyone} | {
        target.new.text: (1.0, 0.0),
        near.existing.text: unit(0.9),
        far.existing.text: unit(0.7),
        same_topic.existing.text: unit(0.99),
    }
    assert distractors(target, everyone, vectors, 5) == [near, far]
    assert distractors(target, everyone, vectors, 1) == [near]
    scope = scope_for(target, everyone, vectors, model=MODEL, distractor_count=2)
    assert [m.memory_id for m in scope] == ["target/existing", "near/existing", "far/existing"]


def test_prepare_ranks_only_same_subject_candidates() -> None:
    other = pair("other", "different-subject", topics=["x"])
    mine = pair("mine", topics=["y"])
    vectors = {
        other.existing.text: (1.0, 0.0),
        other.new.text: (1.0, 0.0),
        mine.existing.text: unit(0.8),
        mine.new.text: unit(0.1),
    }
    (item,) = prepare([other], [other, mine], vectors, model=MODEL, distractor_count=2)
    # John's identical memory is never a candidate; the user's other memory is.
    assert [memory_id for memory_id, _ in item.ranked.candidates] == ["mine/existing"]
    assert item.ranked.similarity == pytest.approx(1.0)


# --- zones and verdicts -------------------------------------------------------------------------


def test_zones_follow_the_handlers_inclusive_thresholds() -> None:
    p = pair("p")
    assert zone(ranked(p, ("own", 0.95)), 0.95, 0.9) == "REINFORCE"
    assert zone(ranked(p, ("own", 0.949)), 0.95, 0.9) == "LLM"
    assert zone(ranked(p, ("own", 0.9)), 0.95, 0.9) == "LLM"
    assert zone(ranked(p, ("own", 0.899)), 0.95, 0.9) == "ADD"
    assert zone(ranked(p), 0.95, 0.9) == "ADD"


def test_a_decision_is_right_only_with_the_expected_action_on_the_pairs_own_memory() -> None:
    update = pair("u")
    assert right(update, "UPDATE", "u/existing")
    assert not right(update, "UPDATE", "other/existing")
    assert not right(update, "REINFORCE", "u/existing")
    assert not right(update, "ADD", None)
    assert right(pair("d", "different-fact"), "ADD", None)


def test_the_llm_can_only_be_right_when_shown_the_pairs_memory() -> None:
    p = pair("p")
    assert resolvable(ranked(p, ("a", 0.97), ("own", 0.95)), 0.9, 2)
    assert not resolvable(ranked(p, ("a", 0.97), ("b", 0.96), ("own", 0.95)), 0.9, 2)
    assert not resolvable(ranked(p, ("a", 0.97), ("own", 0.85)), 0.9, 3)
    assert resolvable(ranked(pair("d", "different-fact"), ("a", 0.97)), 0.9, 1)


PARAPHRASE = ranked(pair("para", "paraphrase"), ("own", 0.97))
UPDATE_HIGH = ranked(pair("upd-high"), ("own", 0.96))
UPDATE_LOW = ranked(pair("upd-low"), ("own", 0.86))
FACT = ranked(pair("fact", "different-fact"), ("own", 0.88))
OTHER = ranked(pair("other", "different-subject"))
DISTRACTED = ranked(pair("distracted", "paraphrase"), ("else/existing", 0.99), ("own", 0.98))
SET = [PARAPHRASE, UPDATE_HIGH, UPDATE_LOW, FACT, OTHER]


def test_zone_counts_tell_wrong_reinforcements_swallowed_pairs_and_the_llm_band() -> None:
    c = counts([*SET, DISTRACTED], 0.965, 0.87, 3)
    assert (c.pairs, c.reinforced, c.reinforced_wrong) == (6, 2, 1)  # the distractor
    assert (c.asked, c.asked_resolvable) == (2, 2)  # upd-high, fact
    assert (c.added, c.added_wrong) == (2, 1)  # upd-low swallowed, other right
    assert c.rule_accuracy == pytest.approx(2 / 4)
    assert c.best_case_accuracy == pytest.approx(4 / 6)
    assert c.llm_share == pytest.approx(2 / 6)


def test_reinforce_is_the_smallest_value_a_margin_above_every_wrong_reinforcement() -> None:
    values = grid(0.80, 1.00, 0.01)
    choice = choose_thresholds(SET, values, SelectionRule(margin=0.005, max_swallowed=0.0))
    # upd-high at 0.96 must stay out even at reinforce - 0.005: 0.97 (0.965 > 0.96).
    assert choice.reinforce == 0.97
    assert (choice.highest_wrong_reinforce, choice.highest_wrong_reinforce_pair) == (
        0.96,
        "upd-high",
    )
    # No should-UPDATE-or-REINFORCE pair may be swallowed: upd-low at 0.86 keeps ask there.
    assert choice.ask == 0.86
    assert choice.swallowed == ()


def test_ask_is_the_largest_value_whose_add_zone_stays_within_the_budget() -> None:
    rule = SelectionRule(margin=0.005, max_swallowed=0.34)  # 1 of the 3 should-pairs
    choice = choose_thresholds(SET, grid(0.80, 1.00, 0.01), rule)
    assert choice.swallow_budget == 1
    assert choice.ask == 0.96  # swallows upd-low; 0.97 would also swallow upd-high
    assert choice.swallowed == ("upd-low",)


def test_without_wrong_reinforcements_the_lowest_value_is_safe() -> None:
    choice = choose_thresholds([PARAPHRASE, OTHER], grid(0.90, 1.00, 0.05), SelectionRule())
    assert choice.reinforce == 0.90
    assert choice.highest_wrong_reinforce is None


def test_with_no_safe_value_the_highest_is_taken() -> None:
    identical_update = ranked(pair("same"), ("own", 1.0))
    choice = choose_thresholds([identical_update], grid(0.90, 1.00, 0.05), SelectionRule())
    assert choice.reinforce == 1.0


def test_the_grid_is_rounded_and_inclusive() -> None:
    assert grid(0.80, 1.00, 0.005)[:3] == (0.8, 0.805, 0.81)
    assert grid(0.80, 1.00, 0.005)[-1] == 1.0
    assert len(grid(0.80, 1.00, 0.005)) == 41


# --- outcomes and tables ------------------------------------------------------------------------


def outcome(p: Pair, action: Any, target: str | None, **fields: Any) -> Outcome:
    return Outcome(p, fields.pop("zone", "LLM"), action, target, "note", **fields)


def test_confusion_separates_the_right_action_on_the_wrong_memory() -> None:
    u, f = pair("u"), pair("f", "different-fact")
    table = confusion(
        [
            outcome(u, "UPDATE", "u/existing"),
            outcome(u, "UPDATE", "x/existing"),
            outcome(f, "REINFORCE", "f/existing"),
            outcome(f, None, None, failure="LLM unavailable"),
        ]
    )
    assert table["UPDATE"] == {"UPDATE": 1, "UPDATE (other memory)": 1}
    assert table["ADD"] == {"REINFORCE": 1, "failed": 1}
    assert table["REINFORCE"] == {}


@pytest.mark.parametrize(
    ("kind", "action", "target", "expected"),
    [
        ("update", "UPDATE", "p/existing", "none"),
        ("different-fact", "UPDATE", "p/existing", "fact lost"),  # a true fact superseded
        ("different-fact", "REINFORCE", "p/existing", "fact lost"),  # the new fact dropped
        ("update", "REINFORCE", "p/existing", "fact lost"),  # the new value dropped
        ("paraphrase", "UPDATE", "x/existing", "fact lost"),  # an unrelated memory superseded
        ("update", "ADD", None, "stale or duplicate kept"),
        ("paraphrase", "ADD", None, "stale or duplicate kept"),
        ("paraphrase", "UPDATE", "p/existing", "bookkeeping only"),
        ("paraphrase", "REINFORCE", "x/existing", "bookkeeping only"),
        ("paraphrase", None, None, "failed"),
    ],
)
def test_harm_says_what_a_wrong_decision_does_to_the_store(
    kind: str, action: Any, target: str | None, expected: str
) -> None:
    assert harm(outcome(pair("p", kind), action, target)) == expected


def test_llm_usage_counts_only_the_band() -> None:
    u = pair("u")
    asked = outcome(
        u, "ADD", None, requests=(Request(2.0, 100, 10, "x"), Request(4.0, 120, 12, "y"))
    )
    usage = llm_usage([asked, outcome(u, "UPDATE", "u/existing", zone="ADD", unusable=True)])
    assert (usage.asked, usage.requests, usage.unusable) == (1, 2, 0)
    assert (usage.prompt_tokens, usage.completion_tokens) == (220, 22)
    assert usage.mean_seconds == pytest.approx(3.0)


def test_the_variants_table_costs_every_request_per_pair_asked() -> None:
    u, f = pair("u"), pair("f", "different-fact")
    batched = outcome(
        u, "UPDATE", "u/existing", requests=(Request(3.0, 300, 40, "x"), Request(1.0, 100, 20, "y"))
    )
    lost = outcome(f, "UPDATE", "f/existing")  # asked in the same call: no requests of its own
    rule = outcome(u, "ADD", None, zone="ADD")
    (row,) = variants_table([("r.json", "p", 2, [batched, lost, rule])]).splitlines()[2:]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells == [
        "r.json", "p", "2", "33% (1/3)", "50% (1/2)", "1", "2 (0)", "200 / 30.0", "230", "4 (2.0)"
    ]  # fmt: skip


def test_groups_are_all_then_each_kind_language_type_and_hardness() -> None:
    labels = [label for label, _ in groups([pair("a"), pair("b", "paraphrase", hard=True)])]
    assert labels == [
        "all",
        "kind: paraphrase",
        "kind: update",
        "language: en",
        "type: semantic",
        "hard",
        "not hard",
    ]


def test_markdown_table_and_fractions() -> None:
    assert fraction(1, 3) == "33% (1/3)" and fraction(0, 0) == "-"
    assert markdown_table(["a", "bb"], [["x", "y"]]).splitlines() == [
        "| a | bb |",
        "|---|----|",
        "| x | y  |",
    ]


# --- run.py: reconcile as the pipeline does it, with a scripted LLM ------------------------------


class ScriptedLLM:
    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.prompts: list[str] = []

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        self.prompts.append(messages[-1]["content"])
        return ChatAnswer(self.texts.pop(0), "scripted", prompt_tokens=50, completion_tokens=5)


def prepared_pair(
    kind: str, similarity: float, *, distractor: float | None = None, pair_id: str = "target"
) -> Prepared:
    target = pair(pair_id, kind)
    others = [pair("other", "different-fact", topics=["elsewhere"])] if distractor else []
    vectors = {target.new.text: (1.0, 0.0), target.existing.text: unit(similarity)}
    for other in others:
        vectors |= {other.existing.text: unit(distractor or 0.0), other.new.text: (0.0, 1.0)}
    (item,) = prepare([target], [target, *others], vectors, model=MODEL, distractor_count=2)
    return item


def decided(item: Prepared, llm: ScriptedLLM, thresholds: Thresholds) -> Outcome:
    provenance = Provenance(embedding_model=MODEL, embedding_dimensions=2)
    return asyncio.run(decide(item, thresholds, llm, attempts=2, provenance=provenance))


THRESHOLDS = Thresholds(reinforce=0.99, ask=0.9)


def test_the_band_asks_the_llm_which_must_pick_the_pairs_memory_by_number() -> None:
    item = prepared_pair("update", 0.93, distractor=0.95)
    llm = ScriptedLLM('{"contradicts": 2, "action": "UPDATE", "existing": 2, "reason": "moved"}')
    result = decided(item, llm, THRESHOLDS)
    assert result.zone == "LLM" and result.right
    assert result.shown == ("other/existing", "target/existing")
    assert "1. other: old\n2. target: old" in llm.prompts[0]
    assert [r.prompt_tokens for r in result.requests] == [50]


def test_an_invalid_answer_is_retried_and_then_the_memory_is_added() -> None:
    item = prepared_pair("update", 0.93)
    llm = ScriptedLLM('{"action": "UPDATE", "existing": 7}', '{"action": "MERGE"}')
    result = decided(item, llm, THRESHOLDS)
    assert (result.action, result.unusable, len(result.requests)) == ("ADD", True, 2)
    assert not result.right


def test_rule_zones_decide_without_the_llm() -> None:
    llm = ScriptedLLM()
    reinforced = decided(prepared_pair("paraphrase", 0.995), llm, THRESHOLDS)
    added = decided(prepared_pair("different-fact", 0.5), llm, THRESHOLDS)
    assert (reinforced.zone, reinforced.action, reinforced.right) == (
        "REINFORCE",
        "REINFORCE",
        True,
    )
    assert (added.zone, added.action, added.right) == ("ADD", "ADD", True)
    assert llm.prompts == []


def test_a_saved_report_gives_back_the_same_rankings_outcomes_and_tables() -> None:
    item = prepared_pair("update", 0.93, distractor=0.95)
    llm = ScriptedLLM('{"contradicts": 2, "action": "UPDATE", "existing": 2, "reason": "moved"}')
    result = decided(item, llm, THRESHOLDS)
    choice = Choice(0.99, 0.9, 0.96, "x", ("y",), 1)
    document = report_json(
        command=["run.py"],
        embedding=(MODEL, 2),
        model="scripted",
        base_url=None,
        prepared=[item],
        rule=SelectionRule(),
        choice=choice,
        thresholds=THRESHOLDS,
        max_options=3,
        distractors=2,
        attempts=2,
        system_prompt=None,
        outcomes=[result],
    )
    document = json.loads(json.dumps(document))
    assert document["pairs"][0]["decision"]["harm"] == "none"
    rankeds, outcomes = saved_run(document, [item.ranked.pair])
    assert outcomes is not None
    assert rankeds[0].candidates == tuple(
        (memory_id, round(similarity, 6)) for memory_id, similarity in item.ranked.candidates
    )
    assert outcomes == [result]
    tables = report(
        rankeds,
        embedding_model=MODEL,
        rule=SelectionRule(),
        choice=choice,
        thresholds=THRESHOLDS,
        config_defaults=(0.95, 0.86),
        outcomes=outcomes,
    )
    assert "| all " in tables and "LLM band:" in tables


def test_the_prompt_examples_are_none_of_the_labelled_pairs() -> None:
    """The handler's prompt is measured on the pairs, so its examples must not be pairs."""
    raw = json.loads(DEFAULT_PAIRS_FILE.read_text(encoding="utf-8"))["pairs"]
    labelled = {pair[side]["text"] for pair in raw for side in ("existing", "new")}
    examples = [
        line.split(" ", 1)[1]
        for line in reconcile_prompt.SYSTEM_PROMPT.splitlines()
        if line.startswith(("NEW: ", "1. ", "2. ", "3. "))
    ]
    assert len(examples) >= 10
    assert labelled.isdisjoint(examples)


# --- the inline batched candidate (bench/reconcile_eval/inline_batch.py) ----------------------


def test_the_inline_batch_lists_each_questions_own_candidates_under_it_numbered_from_one() -> None:
    first = prepared_pair("update", 0.93, distractor=0.95)
    second = prepared_pair("paraphrase", 0.96, pair_id="second")
    llm = ScriptedLLM(
        '{"A": {"new_info": "x", "contradicts": 2, "action": "UPDATE", "existing": 2},'
        ' "B": {"new_info": "nothing", "contradicts": null, "action": "REINFORCE", "existing": 1}}'
    )
    answered = asyncio.run(
        ask_batch([first, second], THRESHOLDS, llm, attempts=2, inline_prompt="SYSTEM")
    )
    assert llm.prompts[0] == (
        "A. NEW: target: new\nEXISTING:\n1. other: old\n2. target: old\n\n"
        "B. NEW: second: new\nEXISTING:\n1. second: old\nAnswer with the JSON."
    )
    (a, a_requests), (b, b_requests) = answered.values()
    assert a is not None and (a.action, a.target) == ("UPDATE", "target/existing")
    assert b is not None and (b.action, b.target) == ("REINFORCE", "second/existing")
    assert (len(a_requests), len(b_requests)) == (1, 0)


def test_the_inline_batch_asks_again_for_the_invalid_decisions_only() -> None:
    questions = [
        prepared_pair("update", 0.93),
        prepared_pair("different-fact", 0.92, pair_id="second"),
    ]
    llm = ScriptedLLM(
        '{"A": {"contradicts": 1, "action": "UPDATE", "existing": 1},'
        ' "B": {"action": "UPDATE", "existing": 4}}',
        '{"A": {"action": "ADD"}, "B": {"action": "ADD", "existing": null}}',
    )
    answered = asyncio.run(
        ask_batch(questions, THRESHOLDS, llm, attempts=2, inline_prompt="SYSTEM")
    )
    (a, requests), (b, _) = answered.values()
    assert a is not None and a.action == "UPDATE"  # the first answer's valid decision is kept
    assert b is not None and b.action == "ADD"
    assert len(requests) == 2 and "B: " in llm.prompts[1] and "A: " not in llm.prompts[1]


def test_the_inline_batch_gives_no_answer_to_a_question_never_decided() -> None:
    questions = [prepared_pair("update", 0.93), prepared_pair("update", 0.94, pair_id="second")]
    llm = ScriptedLLM('{"A": {"action": "ADD"}}', '{"A": {"action": "ADD"}}')
    answered = asyncio.run(
        ask_batch(questions, THRESHOLDS, llm, attempts=2, inline_prompt="SYSTEM")
    )
    assert [answer is None for answer, _ in answered.values()] == [False, True]


def test_an_english_prompt_replaces_the_system_prompt_of_questions_without_chinese_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reconcile_prompt, "prompt", reconcile_prompt.prompt)  # undone after

    def question(new: str, known: str) -> list[dict[str, str]]:
        memory = KnownMemory(
            memory_id="m1",
            version=1,
            content=factories.content(text=known),
            embedding=(1.0, 0.0),
            embedding_model="e",
        )
        return reconcile_prompt.prompt(
            NewMemory(factories.content(text=new), (1.0, 0.0)), [Option(memory, 0.9)]
        )

    ask_english_with("ENGLISH ONLY")
    assert question("The user moved to Porto.", "The user lives in Lisbon.")[0] == {
        "role": "system",
        "content": "ENGLISH ONLY",
    }
    for new, known in [
        ("用户搬到了波尔图。", "用户住在里斯本。"),
        ("The user moved.", "用户住在里斯本。"),
    ]:
        assert question(new, known)[0]["content"] == reconcile_prompt.SYSTEM_PROMPT
