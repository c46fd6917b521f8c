"""The extraction evaluation's scoring (pure) and its case files; run.py against a scripted LLM."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from bench.extraction_eval.run import (
    DEFAULT_CASES,
    cases_file,
    load_cases,
    main,
    run_case,
    snapshot_for,
)
from bench.extraction_eval.scoring import (
    Case,
    CaseFormatError,
    CaseRun,
    ExtractedMemory,
    LabelledFact,
    fact_matches,
    format_columns,
    format_table,
    keywords_match,
    parse_cases,
    score_case,
    summarize,
    summary_rows,
)
from handlers.ports import ChatAnswer

MARCO_NURSE = LabelledFact("Marco", (("nurse",),))
MARCO_BERLIN = LabelledFact("Marco", (("Berlin",),))
USER_SHOPIFY = LabelledFact("the user", (("Shopify", "analyst"),))
MULTI = Case(
    id="multi",
    language="en",
    kind="multi_speaker",
    messages=({"role": "user", "content": "x"},),
    expected=(MARCO_NURSE, MARCO_BERLIN, USER_SHOPIFY),
    forbidden=(LabelledFact("the user", (("nurse",),)), LabelledFact("the user", (("Berlin",),))),
    allowed=(LabelledFact("the user", (("Priya",),)),),
)
EMPTY = Case(
    id="empty",
    language="en",
    kind="empty",
    messages=({"role": "user", "content": "hi"},),
    expected=(),
)
AI = Case(
    id="ai",
    language="en",
    kind="multi_speaker",
    messages=({"role": "user", "content": "x"},),
    expected=(LabelledFact("assistant", (("ThinkPad",),)),),
)


def memory(subject: str, text: str, owner: str = "user") -> ExtractedMemory:
    return ExtractedMemory(subject=subject, owner=owner, text=text)


def run(case_id: str, *memories: ExtractedMemory, **fields: Any) -> CaseRun:
    values: dict[str, Any] = {"seconds": 1.0, "attempts": 1, **fields}
    return CaseRun(case_id=case_id, memories=memories, **values)


# --- matching ---------------------------------------------------------------------------------


def test_every_group_needs_one_keyword_case_insensitively() -> None:
    groups = (("Stripe",), ("engineer", "engineering"))
    assert keywords_match(groups, "The user is a backend ENGINEER at stripe.")
    assert keywords_match(groups, "The user works in engineering at Stripe.")
    assert not keywords_match(groups, "The user works at Stripe.")
    assert not keywords_match(groups, "The user is an engineer.")


def test_chinese_keywords_match_as_substrings() -> None:
    assert keywords_match((("青霉素",), ("过敏",)), "用户对青霉素过敏。")
    assert not keywords_match((("青霉素",), ("过敏",)), "用户需要青霉素。")


def test_a_fact_needs_the_right_subject_and_keywords() -> None:
    assert fact_matches(MARCO_NURSE, memory("Marco", "Marco is a nurse."))
    assert fact_matches(MARCO_NURSE, memory("marco", "Marco is a nurse."))
    assert not fact_matches(MARCO_NURSE, memory("the user", "The user is a nurse."))
    assert fact_matches(LabelledFact("The user", (("x",),)), memory("the user", "x"))


def test_owner_is_agent_only_for_the_assistant() -> None:
    assert LabelledFact("assistant", (("a",),)).owner == "agent"
    assert LabelledFact("Assistant", (("a",),)).owner == "agent"
    assert LabelledFact("the user", (("a",),)).owner == "user"
    assert LabelledFact("Marco", (("a",),)).owner == "user"


# --- one case ---------------------------------------------------------------------------------


def test_perfect_multi_speaker_run() -> None:
    score = score_case(
        MULTI,
        run(
            "multi",
            memory("Marco", "Marco is a nurse in Berlin."),
            memory("the user", "The user is a data analyst at Shopify."),
        ),
    )
    assert (score.recalled, score.expected) == (3, 3)
    assert (score.attributed, score.keyword_matched) == (2, 2)
    assert score.violations == () and score.extras == () and score.missed == ()
    assert score.empty_correct is None and not score.invalid


def test_another_persons_job_given_to_the_user() -> None:
    wrong = memory("the user", "The user works at a hospital in Berlin.")
    score = score_case(MULTI, run("multi", wrong, memory("the user", "The user works at Shopify.")))
    assert score.recalled == 1
    assert set(score.missed) == {MARCO_NURSE, MARCO_BERLIN}
    assert score.misattributed == (wrong,)
    assert (score.attributed, score.keyword_matched) == (1, 2)
    assert [(fact.keywords, found) for fact, found in score.violations] == [((("Berlin",),), wrong)]
    assert score.extras == ()


def test_a_memory_matching_several_facts_is_right_if_one_subject_fits() -> None:
    both = memory("Marco", "Marco is a nurse in Berlin and met a Shopify analyst.")
    score = score_case(MULTI, run("multi", both))
    assert (score.attributed, score.keyword_matched) == (1, 1)


def test_assistant_fact_needs_owner_agent() -> None:
    right = memory("assistant", "The assistant recommended a ThinkPad.", owner="agent")
    wrong_owner = memory("assistant", "The assistant recommended a ThinkPad.", owner="user")
    as_user = memory("the user", "The user will buy a ThinkPad.")
    assert score_case(AI, run("ai", right)).attributed == 1
    assert score_case(AI, run("ai", wrong_owner)).attributed == 0
    score = score_case(AI, run("ai", as_user))
    assert (score.recalled, score.attributed, score.keyword_matched) == (0, 0, 1)


def test_extras_skip_allowed_facts_only_with_their_subject() -> None:
    name = memory("the user", "The user's name is Priya.")
    chatter = memory("the user", "The user says hello.")
    priya_as_third_party = memory("Priya", "Priya is here.")
    score = score_case(MULTI, run("multi", name, chatter, priya_as_third_party))
    assert score.extras == (chatter, priya_as_third_party)


def test_empty_case_is_correct_only_without_memories_and_failure() -> None:
    assert score_case(EMPTY, run("empty")).empty_correct is True
    assert score_case(EMPTY, run("empty", memory("the user", "Hi."))).empty_correct is False
    failed = score_case(EMPTY, run("empty", attempts=3, failure="invalid LLM output: x"))
    assert failed.empty_correct is False and failed.invalid


# --- summary ----------------------------------------------------------------------------------


def test_summary_ratios_and_attribution_only_over_multi_speaker_cases() -> None:
    single = Case(
        id="single",
        language="en",
        kind="single",
        messages=({"role": "user", "content": "x"},),
        expected=(LabelledFact("the user", (("Dublin",),)),),
    )
    runs = [
        run("multi", memory("the user", "The user is a nurse."), seconds=4.0),
        run("single", memory("Dublin", "Dublin is nice."), seconds=2.0, attempts=2),
        run("empty", seconds=9.0, attempts=3, failure="invalid LLM output: x"),
    ]
    scores = [score_case(case, r) for case, r in zip((MULTI, single, EMPTY), runs, strict=True)]
    summary = summarize(scores, runs)
    assert (summary.recalled_facts, summary.expected_facts) == (0, 4)
    assert summary.fact_recall == 0.0
    # the single-speaker misattribution ("Dublin" as subject) is not in attribution accuracy
    assert (summary.attribution_correct, summary.attribution_matched) == (0, 1)
    assert summary.forbidden_violations == 1
    assert (summary.empty_correct, summary.empty_cases) == (0, 1)
    assert summary.extra_memories == 0
    assert summary.invalid_cases == 1
    assert summary.invalid_output_rate == pytest.approx(1 / 3)
    assert summary.mean_seconds == pytest.approx(5.0)
    assert summary.median_seconds == 4.0
    assert summary.total_attempts == 6
    assert summary.per_kind_recall == {"single": 0.0, "multi_speaker": 0.0}


def test_summary_of_nothing_has_no_ratios() -> None:
    summary = summarize([], [])
    assert summary.fact_recall is None and summary.attribution_accuracy is None
    assert summary.mean_seconds is None
    assert "n/a" in format_table(summary_rows(summary))


def test_table_lists_every_score() -> None:
    runs = [run("empty")]
    table = format_table(summary_rows(summarize([score_case(EMPTY, runs[0])], runs)))
    for name in (
        "fact recall",
        "attribution accuracy",
        "forbidden-fact violations",
        "empty-case accuracy",
        "extra memories",
        "invalid-output rate",
        "language consistency",
        "mean seconds",
        "median seconds",
    ):
        assert name in table
    assert "100% (1/1)" in table


# --- case file --------------------------------------------------------------------------------


def valid_case(**overrides: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "id": "c",
        "language": "en",
        "kind": "single",
        "messages": [{"role": "user", "content": "I live in Oslo."}],
        "expected": [{"subject": "the user", "keywords": [["Oslo"]]}],
        "forbidden": [],
    }
    case.update(overrides)
    return case


def test_parse_cases_reads_facts_as_tuples() -> None:
    [case] = parse_cases([valid_case()])
    assert case.expected == (LabelledFact("the user", (("Oslo",),)),)
    assert case.kind == "single"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"not": "a list"}, "JSON list"),
        ([valid_case(), valid_case()], "duplicate case ids: c"),
        ([valid_case(messages=[])], "'messages'"),
        ([valid_case(kind="weird")], "'kind'"),
        ([valid_case(kind="empty")], "kind 'empty'"),
        ([valid_case(expected=[{"subject": "the user", "keywords": ["Oslo"]}])], "'keywords'"),
        ([valid_case(expected=[{"subject": "", "keywords": [["Oslo"]]}])], "'subject'"),
        ([valid_case(forbidden=[{"subject": "x", "keywords": [[]]}])], "forbidden[0]"),
    ],
)
def test_parse_cases_refuses_malformed_cases(raw: object, message: str) -> None:
    with pytest.raises(CaseFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_cases(raw)


def test_the_shipped_semantic_cases_cover_the_required_situations() -> None:
    cases = parse_cases(json.loads(DEFAULT_CASES.read_text(encoding="utf-8")))
    kinds = [case.kind for case in cases]
    assert len(cases) >= 12
    assert kinds.count("empty") >= 3
    assert kinds.count("multi_speaker") >= 4
    assert sum(case.language == "zh" for case in cases) >= 2
    assert any(fact.subject == "assistant" for case in cases for fact in case.expected)
    for case in cases:
        snapshot = snapshot_for(case)  # every case normalises into a valid snapshot
        assert len(snapshot.turns) == len(case.messages)


# --- run.py with a scripted LLM ---------------------------------------------------------------


class ScriptedAnswers:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        return ChatAnswer(self.answers.pop(0))


async def test_run_case_extracts_scores_and_keeps_raw_answers() -> None:
    [case] = [
        c
        for c in parse_cases(json.loads(DEFAULT_CASES.read_text(encoding="utf-8")))
        if c.id == "multi-two-humans"
    ]
    answer = json.dumps(
        {
            "facts": [
                {"subject": "Marco", "statement": "Marco is a nurse in Berlin.", "owner": "user"},
                {"subject": "Priya", "statement": "Priya is a data analyst at Shopify."},
            ]
        }
    )
    report = await run_case(case, ScriptedAnswers("not json", answer), attempts=3)
    assert report.run.attempts == 2 and report.run.failure is None
    assert report.answers == ("not json", answer)
    assert {(m.subject, m.owner) for m in report.run.memories} == {
        ("Marco", "user"),
        ("the user", "user"),
    }
    assert (report.score.recalled, report.score.expected) == (3, 3)


async def test_run_case_records_a_failure_after_the_retries() -> None:
    [case] = parse_cases([valid_case()])
    report = await run_case(case, ScriptedAnswers("nope", "nope", "nope"), attempts=3)
    assert report.run.failure is not None and report.run.failure.startswith("invalid LLM output")
    assert report.score.invalid and report.score.recalled == 0


def test_memories_in_the_wrong_language_are_counted() -> None:
    zh = Case(
        id="zh",
        language="zh",
        kind="single",
        messages=({"role": "user", "content": "我对青霉素过敏。"},),
        expected=(LabelledFact("the user", (("青霉素", "penicillin"),)),),
    )
    chinese = memory("the user", "用户对青霉素过敏。")
    english = memory("the user", "The user is allergic to penicillin.")
    runs = [run("zh", chinese, english)]
    score = score_case(zh, runs[0])
    assert score.recalled == 1
    assert score.wrong_language == (english,)
    summary = summarize([score], runs)
    assert summary.wrong_language_memories == 1
    assert summary.language_consistency == 0.5
    assert "50% (1/2)" in format_table(summary_rows(summary))


# --- every memory type ------------------------------------------------------------------------


@pytest.mark.parametrize("memory_type", ["semantic", "episodic", "procedural", "taxonomic"])
def test_every_type_has_its_own_labelled_cases(memory_type: str) -> None:
    cases = load_cases(cases_file(memory_type), memory_type=memory_type)
    assert len(cases) >= 6
    assert all(case.memory_type == memory_type for case in cases)
    kinds = [case.kind for case in cases]
    assert kinds.count("empty") >= 2
    assert kinds.count("multi_speaker") >= 2
    assert any(
        message.get("role") == "assistant" and message.get("name")
        for case in cases
        for message in case.messages
    )  # a named other human
    assert sum(case.language == "zh" for case in cases) >= 2
    for case in cases:
        assert len(snapshot_for(case).turns) == len(case.messages)


def test_the_semantic_cases_of_earlier_runs_are_untouched_and_replies_are_tagged() -> None:
    """RESULTS.md compares runs on the first 14 cases; the assistant-replies cases came later."""
    cases = load_cases(DEFAULT_CASES, skip_tags=["assistant-replies", "issue-23"])
    assert len(cases) == 14
    replies = load_cases(DEFAULT_CASES, tags=["assistant-replies"])
    assert len(replies) >= 4 and {case.language for case in replies} == {"en", "zh"}


def test_the_issue_23_cases_keep_six_held_out_of_prompt_tuning_in_both_languages() -> None:
    """Precision, recall and attribution cases written with the time-grounded prompt: the
    `held-out` ones were never run while the prompt was tuned (BENCHMARKS.md reports both);
    the two `narration` cases came with the narration filter, and the two `borrowed-words`
    cases with the borrowed-words rule, after the prompt."""
    written = load_cases(DEFAULT_CASES, tags=["issue-23"])
    held_out = load_cases(DEFAULT_CASES, tags=["held-out"])
    narration = load_cases(DEFAULT_CASES, tags=["narration"])
    borrowed = load_cases(DEFAULT_CASES, tags=["borrowed-words"])
    assert len(written) == 16 and len(held_out) == 6
    assert len(narration) == 2 and len(borrowed) == 2
    assert {c.language for c in held_out} == {c.language for c in written} == {"en", "zh"}
    assert {c.language for c in borrowed} == {"en", "zh"}
    assert {c.kind for c in held_out} == {"empty", "single", "multi_speaker"}


def test_a_case_may_not_claim_another_type() -> None:
    with pytest.raises(CaseFormatError, match="a episodic case in the semantic cases"):
        parse_cases([valid_case(memory_type="episodic")])
    [case] = parse_cases([valid_case(memory_type="episodic")], "episodic")
    assert case.memory_type == "episodic"
    with pytest.raises(CaseFormatError, match="unknown memory type"):
        parse_cases([valid_case()], "Emotional!")
    [custom] = parse_cases([valid_case(memory_type="emotional")], "emotional")  # a custom type
    assert custom.memory_type == "emotional"


def test_the_custom_types_cases_load_against_their_declarations() -> None:
    from bench.extraction_eval.run import cases_file, custom_types, load_cases

    for memory_type in custom_types():
        cases = load_cases(cases_file(memory_type), memory_type=memory_type)
        held_out = [case for case in cases if "held-out" in case.tags]
        assert len(cases) == 12 and len(held_out) == 4
        assert {case.language for case in held_out} == {"en", "zh"}


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ({"subject": "x", "keywords": [["a"]], "owner": "robot"}, "'owner'"),
        ({"subject": "x", "keywords": [["a"]], "alternatives": "y"}, "'alternatives'"),
        ({"subject": "x", "keywords": [["a"]], "attributes": []}, "'attributes'"),
        (
            {"subject": "x", "keywords": [["a"]], "attributes": {"kind": ["rule"]}},
            "attributes.kind",
        ),
    ],
)
def test_parse_cases_refuses_malformed_labels(fact: dict[str, Any], message: str) -> None:
    with pytest.raises(CaseFormatError, match=message):
        parse_cases([valid_case(expected=[fact])])


def test_labels_read_owner_alternatives_attributes_and_tags() -> None:
    [case] = parse_cases(
        [
            valid_case(
                tags=["t"],
                expected=[
                    {
                        "subject": "DoD",
                        "alternatives": ["definition of done"],
                        "owner": "agent",
                        "keywords": [["done"]],
                        "attributes": {"kind": [["workflow", "instruction"]]},
                    }
                ],
            )
        ]
    )
    (fact,) = case.expected
    assert case.tags == ("t",)
    assert fact.owner == "agent" and fact.subjects == ("DoD", "definition of done")
    assert fact.attributes == (("kind", (("workflow", "instruction"),)),)


EPISODE = LabelledFact("the user", (("move",),), attributes=(("participants", (("John",),)),))
WORKFLOW = LabelledFact("the user", (("certbot",),), owner_label="agent")
TERM = LabelledFact("DoD", (("done",),), alternatives=("definition of done",))


def test_attributes_must_match_too() -> None:
    with_john = ExtractedMemory(
        "the user", "user", "The user helps John move.", "event", {"participants": ["John"]}
    )
    without = ExtractedMemory("the user", "user", "The user helps John move.", "event", {})
    assert fact_matches(EPISODE, with_john)
    assert not fact_matches(EPISODE, without)


def test_a_labelled_owner_overrides_the_default() -> None:
    case = Case(
        id="w",
        language="en",
        kind="single",
        messages=({"role": "user", "content": "x"},),
        expected=(WORKFLOW,),
        memory_type="procedural",
    )
    right = memory("the user", "When renewing: run certbot.", owner="agent")
    wrong = memory("the user", "When renewing: run certbot.", owner="user")
    assert score_case(case, run("w", right)).attributed == 1
    assert score_case(case, run("w", right)).recalled == 1
    assert score_case(case, run("w", wrong)).misattributed == (wrong,)
    assert score_case(case, run("w", wrong)).recalled == 0  # a labelled owner is required


def test_alternative_subjects_match() -> None:
    assert fact_matches(TERM, memory("definition of done", "definition of done: done means done"))
    assert fact_matches(TERM, memory("dod", "DoD: done"))
    assert not fact_matches(TERM, memory("the user", "DoD: done"))


def test_extras_misattributions_and_violations_cost_precision() -> None:
    extra = memory("the user", "The user says hello.")
    violation = memory("the user", "The user is a nurse in Berlin.")  # misattributed too
    right = memory("Marco", "Marco is a nurse in Berlin.")
    runs = [run("multi", right, extra, violation)]
    score = score_case(MULTI, runs[0])
    assert score.errors == 2  # the violation is counted once
    summary = summarize([score], runs)
    assert (summary.error_memories, summary.memories) == (2, 3)
    assert summary.precision == pytest.approx(1 / 3)
    assert "33% (1/3)" in format_table(summary_rows(summary))


def test_allowed_memories_are_not_errors() -> None:
    score = score_case(MULTI, run("multi", memory("the user", "The user's name is Priya.")))
    assert score.errors == 0


# --- run.py for every type, with a scripted LLM -----------------------------------------------


def shipped(memory_type: str, case_id: str) -> Case:
    [case] = load_cases(cases_file(memory_type), [case_id], memory_type=memory_type)
    return case


async def test_run_case_uses_the_cases_type_of_extractor() -> None:
    case = shipped("episodic", "ep-multi-helping-john-move")
    episode = {
        "subject": "the user",
        "title": "Helping John move",
        "summary": "The user will help John move to his new flat on Saturday at 9am.",
        "participants": ["the user", "John"],
        "outcome": "The user will bring lunch.",
    }
    report = await run_case(case, ScriptedAnswers(json.dumps({"episodes": [episode]})), 3)
    (found,) = report.run.memories
    assert (found.subject, found.owner, found.category) == ("the user", "user", "event")
    assert found.attributes["participants"] == ["the user", "John"]
    assert (report.score.recalled, report.score.errors) == (1, 0)


async def test_run_case_scores_an_assistant_workflow() -> None:
    case = shipped("procedural", "pr-assistant-workflow")
    steps = ["Run sudo certbot renew --dry-run", "Run sudo certbot renew", "Reload nginx"]
    answer = json.dumps(
        {
            "procedures": [
                {"kind": "workflow", "trigger": "renewing the certificate", "steps": steps}
            ]
        }
    )
    report = await run_case(case, ScriptedAnswers(answer), 3)
    (found,) = report.run.memories
    assert (found.subject, found.owner) == ("the user", "agent")
    assert report.score.recalled == 1


def test_rescore_recomputes_a_saved_report_for_a_subset(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    case = shipped("semantic", "single-job-city")
    found = {"subject": "the user", "owner": "user", "text": "The user lives in Dublin."}
    report = {
        "memory_type": "semantic",
        "model": "m",
        "cases": [
            {"id": case.id, "seconds": 2.0, "attempts": 1, "failure": None, "memories": [found]}
        ],
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    assert main(["--rescore", str(path), "--case", case.id]) == 0
    out = capsys.readouterr().out
    assert "50% (1/2)" in out  # recall: Dublin yes, Stripe no
    with pytest.raises(SystemExit, match="no run of"):
        main(["--rescore", str(path)])


def test_type_all_needs_a_type_placeholder_in_the_out_path() -> None:
    with pytest.raises(SystemExit):
        main(["--type", "all", "--out", "report.json", "--model", "m"])


def test_format_columns_puts_summaries_side_by_side() -> None:
    single = ("  recall, single cases", "40%")
    table = format_columns(
        [("semantic", [("fact recall", "50%"), single]), ("episodic", [("fact recall", "100%")])]
    )
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in table.splitlines()]
    assert rows[0] == ["score", "semantic", "episodic"]
    assert rows[2] == ["fact recall", "50%", "100%"]
    assert rows[3] == ["recall, single cases", "40%", ""]  # missing from a column: blank
    assert len({len(line) for line in table.splitlines()}) == 1  # aligned


def test_rescore_prints_one_column_per_report(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for memory_type in ("episodic", "taxonomic"):
        cases = load_cases(cases_file(memory_type), memory_type=memory_type)
        entries: list[dict[str, Any]] = [
            {"id": c.id, "seconds": 1.0, "attempts": 1, "failure": None, "memories": []}
            for c in cases
        ]
        path = tmp_path / f"{memory_type}.json"
        path.write_text(json.dumps({"memory_type": memory_type, "cases": entries}), "utf-8")
        paths.append(str(path))
    assert main(["--rescore", *paths]) == 0
    header = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| score")]
    assert "episodic (10 cases)" in header[0] and "taxonomic (8 cases)" in header[0]
