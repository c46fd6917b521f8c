"""Scoring an extractor against labelled conversations (pure: no I/O, no LLM).

Every memory type has its own cases file (`cases-<type>.json`); each case is run through that
type's extractor and scored the same way. A labelled fact (an expected memory: a fact, an
episode, a procedure or a term) is a `subject` ("the user", a person's name, "assistant", or
for taxonomic memories the term itself, with optional `alternatives`), an optional `owner`
(by default "agent" for the subject "assistant", otherwise "user"; a workflow the assistant
provided for the user is labelled subject "the user", owner "agent"), `keywords`: a list of
alternative groups, each of which must have one keyword appearing (case-insensitively) in a
memory's text, and optional `attributes`: keyword groups per attribute (e.g. an episode's
`participants` must name John), matched against the attribute's value (a list's items joined).
Definitions of the scores (see `summarize`):

* fact recall — expected facts matched by an extracted memory with the right subject (and
  owner, when labelled), keywords and attributes, over all expected facts;
* attribution accuracy (multi-speaker cases only) — of the memories whose text matches an expected
  fact's keywords, the fraction with that fact's subject and owner;
* forbidden violations — forbidden facts (e.g. another person's job given to "the user") matched
  by an extracted memory with the forbidden subject and keywords;
* empty-case accuracy — cases without expected facts that returned zero memories and no failure;
* extra memories — extracted memories whose text matches no expected fact's keywords (a memory
  matching an `allowed` fact, e.g. "The user's name is Priya." restating the trusted name, is
  neither required nor counted as extra);
* precision — the extracted memories that are not errors, over all extracted memories; an error
  is an extra memory, a misattributed one, or one matching a forbidden fact. Extras therefore
  cost precision even where recall is perfect;
* invalid-output rate — cases that failed after the retries (or could not reach the LLM);
* language consistency — extracted memories written in their case's language (a Chinese
  conversation gives Chinese statements; docs/architecture.md, "Speakers"), by
  `handlers.rendering.detect_language`.

Expected keywords of Chinese cases also list English alternatives, so a fact written in the wrong
language still counts for recall (and a misattributed one still counts as a violation); the
language is scored separately.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from events.memories import MEMORY_TYPE_PATTERN, MEMORY_TYPES, MemoryType
from handlers.rendering import detect_language

CaseKind = Literal["empty", "single", "multi_speaker"]
CASE_KINDS: tuple[str, ...] = get_args(CaseKind)
ASSISTANT = "assistant"


Keywords = tuple[tuple[str, ...], ...]
"""Groups of alternatives: every group needs one of its keywords in the text."""


@dataclass(frozen=True)
class LabelledFact:
    """An expected (or forbidden) memory: whose it is and the keyword groups it must hit."""

    subject: str
    keywords: Keywords
    attributes: tuple[tuple[str, Keywords], ...] = ()
    """(attribute name, keyword groups its value must hit), all of them."""
    alternatives: tuple[str, ...] = ()
    """Other subjects accepted for this fact (a term's other spellings)."""
    owner_label: str | None = None
    """The labelled owner; None means the default (see `owner`)."""

    @property
    def owner(self) -> str:
        """The owner a memory of this fact must have: the labelled one, else "agent" only for
        the AI assistant."""
        if self.owner_label is not None:
            return self.owner_label
        return "agent" if _key(self.subject) == ASSISTANT else "user"

    @property
    def subjects(self) -> tuple[str, ...]:
        return (self.subject, *self.alternatives)


@dataclass(frozen=True)
class Case:
    """One labelled conversation."""

    id: str
    language: str
    kind: CaseKind
    messages: tuple[Mapping[str, Any], ...]
    expected: tuple[LabelledFact, ...]
    forbidden: tuple[LabelledFact, ...] = ()
    allowed: tuple[LabelledFact, ...] = ()
    """Facts that may be extracted without counting as extra, but are not required."""
    memory_type: MemoryType = "semantic"
    tags: tuple[str, ...] = ()
    """Free labels to select cases by (`run.py --tag/--skip-tag`)."""


@dataclass(frozen=True)
class ExtractedMemory:
    """What the extractor produced, reduced to what is scored."""

    subject: str
    owner: str
    text: str
    category: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CaseRun:
    """The outcome of running the extractor on one case."""

    case_id: str
    memories: tuple[ExtractedMemory, ...]
    seconds: float
    attempts: int
    failure: str | None = None
    """Set when the output was still invalid after the retries (or the LLM was unreachable)."""


@dataclass(frozen=True)
class CaseScore:
    """The scores of one case."""

    case_id: str
    kind: CaseKind
    expected: int
    recalled: int
    missed: tuple[LabelledFact, ...]
    keyword_matched: int
    """Memories whose text matches some expected fact's keywords."""
    attributed: int
    """Of those, the memories with a matching fact's subject and owner."""
    misattributed: tuple[ExtractedMemory, ...]
    wrong_language: tuple[ExtractedMemory, ...]
    """Memories not written in the case's language."""
    violations: tuple[tuple[LabelledFact, ExtractedMemory], ...]
    extras: tuple[ExtractedMemory, ...]
    errors: int
    """Memories that are extra, misattributed or forbidden (each memory counted once)."""
    empty_correct: bool | None
    """For a case without expected facts: no memories and no failure. None for other cases."""
    invalid: bool


@dataclass(frozen=True)
class Summary:
    """The scores over all cases; ratios are None when nothing was there to score."""

    cases: int
    expected_facts: int
    recalled_facts: int
    fact_recall: float | None
    attribution_matched: int
    attribution_correct: int
    attribution_accuracy: float | None
    forbidden_violations: int
    empty_cases: int
    empty_correct: int
    empty_case_accuracy: float | None
    memories: int
    extra_memories: int
    error_memories: int
    precision: float | None
    invalid_cases: int
    invalid_output_rate: float | None
    wrong_language_memories: int
    language_consistency: float | None
    mean_seconds: float | None
    median_seconds: float | None
    total_attempts: int
    per_kind_recall: dict[str, float | None] = field(default_factory=dict)


class CaseFormatError(ValueError):
    """A labelled case that does not follow the format; the message names the case."""


def parse_cases(raw: object, memory_type: str = "semantic") -> list[Case]:
    """Cases of `memory_type` from the decoded JSON of a cases file (a list of objects),
    validated; a case may repeat its file's type in `memory_type` but not name another."""
    if not isinstance(raw, list):
        raise CaseFormatError("a cases file holds a JSON list of cases")
    cases = [_case(item, index, _memory_type(memory_type)) for index, item in enumerate(raw)]
    ids = [case.id for case in cases]
    duplicates = sorted({case_id for case_id in ids if ids.count(case_id) > 1})
    if duplicates:
        raise CaseFormatError(f"duplicate case ids: {', '.join(duplicates)}")
    return cases


def _memory_type(name: str) -> MemoryType:
    """A built-in type, or a well-formed custom type's name (its extractor is the caller's)."""
    if name in MEMORY_TYPES or re.fullmatch(MEMORY_TYPE_PATTERN, name):
        return name
    raise CaseFormatError(
        f"unknown memory type {name!r} (one of {', '.join(MEMORY_TYPES)}, or a custom type)"
    )


def _case(item: object, index: int, memory_type: MemoryType) -> Case:
    if not isinstance(item, Mapping):
        raise CaseFormatError(f"case {index}: expected an object")
    case_id = item.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise CaseFormatError(f"case {index}: missing string 'id'")
    messages = item.get("messages")
    if not isinstance(messages, list) or not messages:
        raise CaseFormatError(f"case {case_id}: 'messages' must be a non-empty list")
    expected = _facts(item.get("expected", []), f"case {case_id}: expected")
    kind = item.get("kind", "empty" if not expected else "single")
    if kind not in CASE_KINDS:
        raise CaseFormatError(f"case {case_id}: 'kind' must be one of {', '.join(CASE_KINDS)}")
    if (kind == "empty") != (not expected):
        raise CaseFormatError(f"case {case_id}: kind 'empty' if and only if no expected facts")
    if item.get("memory_type", memory_type) != memory_type:
        raise CaseFormatError(
            f"case {case_id}: a {item.get('memory_type')} case in the {memory_type} cases"
        )
    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag for tag in tags):
        raise CaseFormatError(f"case {case_id}: 'tags' must be a list of non-empty strings")
    return Case(
        id=case_id,
        language=str(item.get("language", "en")),
        kind=kind,
        messages=tuple(messages),
        expected=expected,
        forbidden=_facts(item.get("forbidden", []), f"case {case_id}: forbidden"),
        allowed=_facts(item.get("allowed", []), f"case {case_id}: allowed"),
        memory_type=memory_type,
        tags=tuple(tags),
    )


def _facts(raw: object, where: str) -> tuple[LabelledFact, ...]:
    if not isinstance(raw, list):
        raise CaseFormatError(f"{where} must be a list")
    facts = []
    for index, fact in enumerate(raw):
        if not isinstance(fact, Mapping):
            raise CaseFormatError(f"{where}[{index}] must be an object")
        subject = fact.get("subject")
        if not isinstance(subject, str) or not subject.strip():
            raise CaseFormatError(f"{where}[{index}]: missing string 'subject'")
        alternatives = fact.get("alternatives", [])
        if not isinstance(alternatives, list) or not all(
            isinstance(name, str) and name.strip() for name in alternatives
        ):
            raise CaseFormatError(f"{where}[{index}]: 'alternatives' must be a list of strings")
        owner = fact.get("owner")
        if owner not in (None, "user", "agent"):
            raise CaseFormatError(f"{where}[{index}]: 'owner' must be 'user' or 'agent'")
        attributes = fact.get("attributes", {})
        if not isinstance(attributes, Mapping):
            raise CaseFormatError(f"{where}[{index}]: 'attributes' must be an object")
        facts.append(
            LabelledFact(
                subject,
                _keywords(fact.get("keywords"), f"{where}[{index}]: 'keywords'"),
                attributes=tuple(
                    (str(name), _keywords(groups, f"{where}[{index}]: attributes.{name}"))
                    for name, groups in attributes.items()
                ),
                alternatives=tuple(alternatives),
                owner_label=owner,
            )
        )
    return tuple(facts)


def _keywords(groups: object, where: str) -> Keywords:
    if (
        not isinstance(groups, list)
        or not groups
        or not all(
            isinstance(group, list)
            and group
            and all(isinstance(word, str) and word for word in group)
            for group in groups
        )
    ):
        raise CaseFormatError(f"{where} must be a non-empty list of non-empty lists of strings")
    return tuple(tuple(group) for group in groups)


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def keywords_match(keywords: Iterable[Iterable[str]], text: str) -> bool:
    """Whether every group has at least one keyword appearing in `text` (case-insensitive)."""
    folded = text.casefold()
    return all(any(word.casefold() in folded for word in group) for group in keywords)


def same_subject(expected: str, actual: str) -> bool:
    """Subjects compare case- and whitespace-insensitively ("The user" is "the user")."""
    return _key(expected) == _key(actual)


def attribute_text(value: object) -> str:
    """An attribute's value as text to match keywords in (a list's items joined by " | ")."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return " | ".join(attribute_text(item) for item in value)
    return str(value)


def fact_matches(fact: LabelledFact, memory: ExtractedMemory) -> bool:
    """The memory states this fact: right subject (and the labelled owner, when the label
    names one), every keyword group hit in its text and every labelled attribute's groups hit
    in that attribute."""
    return (
        any(same_subject(subject, memory.subject) for subject in fact.subjects)
        and (fact.owner_label is None or memory.owner == fact.owner_label)
        and keywords_match(fact.keywords, memory.text)
        and all(
            keywords_match(groups, attribute_text(memory.attributes.get(name)))
            for name, groups in fact.attributes
        )
    )


def correctly_attributed(fact: LabelledFact, memory: ExtractedMemory) -> bool:
    """The memory has the fact's subject and the owner the fact requires."""
    return (
        any(same_subject(subject, memory.subject) for subject in fact.subjects)
        and memory.owner == fact.owner
    )


def score_case(case: Case, run: CaseRun) -> CaseScore:
    """Score one run of one case (see the module docstring for the definitions)."""
    memories = run.memories
    recalled = [fact for fact in case.expected if any(fact_matches(fact, m) for m in memories)]
    keyword_matched = 0
    attributed = 0
    misattributed: list[ExtractedMemory] = []
    extras: list[ExtractedMemory] = []
    for memory in memories:
        candidates = [f for f in case.expected if keywords_match(f.keywords, memory.text)]
        if not candidates:
            if not any(fact_matches(fact, memory) for fact in case.allowed):
                extras.append(memory)
            continue
        keyword_matched += 1
        if any(correctly_attributed(fact, memory) for fact in candidates):
            attributed += 1
        else:
            misattributed.append(memory)
    violations = tuple(
        (fact, memory)
        for fact in case.forbidden
        for memory in memories
        if fact_matches(fact, memory)
    )
    wrong = {id(memory) for memory in (*extras, *misattributed)}
    wrong |= {id(memory) for _, memory in violations}
    invalid = run.failure is not None
    return CaseScore(
        case_id=case.id,
        kind=case.kind,
        expected=len(case.expected),
        recalled=len(recalled),
        missed=tuple(fact for fact in case.expected if fact not in recalled),
        keyword_matched=keyword_matched,
        attributed=attributed,
        misattributed=tuple(misattributed),
        wrong_language=tuple(m for m in memories if detect_language([m.text]) != case.language),
        violations=violations,
        extras=tuple(extras),
        errors=len(wrong),
        empty_correct=(not memories and not invalid) if not case.expected else None,
        invalid=invalid,
    )


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summarize(scores: Sequence[CaseScore], runs: Sequence[CaseRun]) -> Summary:
    """Aggregate the case scores; attribution accuracy counts only multi-speaker cases."""
    multi = [score for score in scores if score.kind == "multi_speaker"]
    empties = [score for score in scores if score.empty_correct is not None]
    expected = sum(score.expected for score in scores)
    recalled = sum(score.recalled for score in scores)
    matched = sum(score.keyword_matched for score in multi)
    correct = sum(score.attributed for score in multi)
    empty_correct = sum(1 for score in empties if score.empty_correct)
    invalid = sum(1 for score in scores if score.invalid)
    seconds = [run.seconds for run in runs]
    memories = sum(len(run.memories) for run in runs)
    errors = sum(score.errors for score in scores)
    wrong_language = sum(len(score.wrong_language) for score in scores)
    per_kind: dict[str, float | None] = {}
    for kind in CASE_KINDS:
        of_kind = [score for score in scores if score.kind == kind and score.expected]
        if of_kind:
            per_kind[kind] = _ratio(
                sum(s.recalled for s in of_kind), sum(s.expected for s in of_kind)
            )
    return Summary(
        cases=len(scores),
        expected_facts=expected,
        recalled_facts=recalled,
        fact_recall=_ratio(recalled, expected),
        attribution_matched=matched,
        attribution_correct=correct,
        attribution_accuracy=_ratio(correct, matched),
        forbidden_violations=sum(len(score.violations) for score in scores),
        empty_cases=len(empties),
        empty_correct=empty_correct,
        empty_case_accuracy=_ratio(empty_correct, len(empties)),
        memories=memories,
        extra_memories=sum(len(score.extras) for score in scores),
        error_memories=errors,
        precision=_ratio(memories - errors, memories),
        invalid_cases=invalid,
        invalid_output_rate=_ratio(invalid, len(scores)),
        wrong_language_memories=wrong_language,
        language_consistency=_ratio(memories - wrong_language, memories),
        mean_seconds=statistics.fmean(seconds) if seconds else None,
        median_seconds=statistics.median(seconds) if seconds else None,
        total_attempts=sum(run.attempts for run in runs),
        per_kind_recall=per_kind,
    )


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def summary_rows(summary: Summary) -> list[tuple[str, str]]:
    """(score, value) rows for a table."""
    rows = [
        (
            "fact recall",
            f"{_percent(summary.fact_recall)} ({summary.recalled_facts}/{summary.expected_facts})",
        ),
        *(
            (f"  recall, {kind} cases", _percent(value))
            for kind, value in summary.per_kind_recall.items()
        ),
        (
            "attribution accuracy (multi-speaker)",
            f"{_percent(summary.attribution_accuracy)} "
            f"({summary.attribution_correct}/{summary.attribution_matched})",
        ),
        ("forbidden-fact violations", str(summary.forbidden_violations)),
        (
            "empty-case accuracy",
            f"{_percent(summary.empty_case_accuracy)} "
            f"({summary.empty_correct}/{summary.empty_cases})",
        ),
        ("extra memories", f"{summary.extra_memories} (of {summary.memories} extracted)"),
        (
            "precision (not extra, misattributed or forbidden)",
            f"{_percent(summary.precision)} "
            f"({summary.memories - summary.error_memories}/{summary.memories})",
        ),
        (
            "invalid-output rate",
            f"{_percent(summary.invalid_output_rate)} ({summary.invalid_cases}/{summary.cases})",
        ),
        (
            "language consistency",
            f"{_percent(summary.language_consistency)} "
            f"({summary.memories - summary.wrong_language_memories}/{summary.memories})",
        ),
        ("LLM calls (attempts)", str(summary.total_attempts)),
        ("mean seconds / snapshot", _seconds(summary.mean_seconds)),
        ("median seconds / snapshot", _seconds(summary.median_seconds)),
    ]
    return rows


def format_table(rows: Sequence[tuple[str, str]]) -> str:
    """A two-column Markdown table of (score, value) rows."""
    width = max((len(name) for name, _ in rows), default=5)
    values = max((len(value) for _, value in rows), default=5)
    lines = [
        f"| {'score':<{width}} | {'value':<{values}} |",
        f"|{'-' * (width + 2)}|{'-' * (values + 2)}|",
    ]
    lines += [f"| {name:<{width}} | {value:<{values}} |" for name, value in rows]
    return "\n".join(lines)


def format_columns(columns: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> str:
    """A Markdown table of several summaries side by side: (header, summary rows) per column;
    a score missing from a column (a per-kind recall) is left blank."""
    names: list[str] = []
    for _, rows in columns:
        names += [name for name, _ in rows if name not in names]
    values = [dict(rows) for _, rows in columns]
    table = [["score", *(header for header, _ in columns)]]
    table += [[name, *(column.get(name, "") for column in values)] for name in names]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(table[0], widths, strict=True)) + " |"
    ]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += [
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |"
        for row in table[1:]
    ]
    return "\n".join(lines)
