"""Scoring reconciliation on the labelled pairs, and choosing its thresholds (pure: no model).

`handlers.reconcile` puts each new memory in one of three zones by the cosine similarity of its
best same-subject candidate: **REINFORCE** that candidate at or above `reinforce` (no LLM call),
ask the **LLM** at or above `ask`, **ADD** below `ask` or with no candidate. Here a pair's
decision is *right* when it is the pair's expected action and, for REINFORCE and UPDATE, names
the pair's own existing memory (reinforcing a distractor is wrong, whatever the label).

Counts at one pair of thresholds (`ZoneCounts`):

* REINFORCE zone, and how many of it are wrong (a wrong REINFORCE drops the new memory: an
  update is lost, or a different fact is never stored);
* ADD zone, and how many of it should have been an UPDATE or a REINFORCE ("swallowed": an
  update leaves the old and the new value side by side, a paraphrase becomes a duplicate);
* LLM zone, and how many of those an LLM *could* get right (the expected action is ADD, or the
  pair's memory is among the `max_options` candidates shown) — so "best case" accuracy is what
  the thresholds allow with a perfect LLM;
* rule-zone accuracy: right decisions among the pairs the rules decide without the LLM.

`choose_thresholds` applies the documented rule (`SelectionRule`): the *smallest* `reinforce`
that leaves a safety margin above every pair a rule REINFORCE would get wrong (so the REINFORCE
zone holds no wrong decision on the set, even `margin` lower), then the *largest* `ask` at which
the ADD zone swallows at most `max_swallowed` of the pairs that should UPDATE or REINFORCE. Both
minimise LLM calls under their constraint; they are independent (a REINFORCE error depends only
on `reinforce`, a swallowed pair only on `ask`), so the rule needs no weighting of one against
the other.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from bench.reconcile_eval.pairs import Pair
from handlers.reconcile import Action

Zone = Literal["REINFORCE", "LLM", "ADD"]
ACTIONS: tuple[Action, ...] = ("REINFORCE", "UPDATE", "ADD")


@dataclass(frozen=True)
class Ranked:
    """A pair and the candidates the reconciler sees for its new memory: (memory id, cosine)
    of the same-subject known memories, most similar first. `similarity` is the cosine of the
    pair's own two memories, whatever their subjects."""

    pair: Pair
    candidates: tuple[tuple[str, float], ...]
    similarity: float

    @property
    def best(self) -> float | None:
        return self.candidates[0][1] if self.candidates else None


def zone(ranked: Ranked, reinforce: float, ask: float) -> Zone:
    """The zone `handlers.reconcile.reconcile` puts the pair's new memory in."""
    best = ranked.best
    if best is not None and best >= reinforce:
        return "REINFORCE"
    if best is not None and best >= ask:
        return "LLM"
    return "ADD"


def right(pair: Pair, action: Action, target: str | None) -> bool:
    """Whether a decision is the pair's expected one (and names the pair's own memory)."""
    if action != pair.expected:
        return False
    return action == "ADD" or target == pair.existing_id


def reinforce_would_be_right(ranked: Ranked) -> bool:
    """Whether reinforcing the best candidate (the rule's REINFORCE) would be right."""
    return bool(ranked.candidates) and right(ranked.pair, "REINFORCE", ranked.candidates[0][0])


def resolvable(ranked: Ranked, ask: float, max_options: int) -> bool:
    """Whether an LLM asked about this pair could decide right: ADD is expected, or the pair's
    memory is among the candidates it is shown."""
    if ranked.pair.expected == "ADD":
        return True
    shown = [memory_id for memory_id, similarity in ranked.candidates if similarity >= ask]
    return ranked.pair.existing_id in shown[:max_options]


@dataclass(frozen=True)
class ZoneCounts:
    """How the pairs fall into the zones at one pair of thresholds (module doc)."""

    reinforce: float
    ask: float
    pairs: int
    reinforced: int
    reinforced_wrong: int
    asked: int
    asked_resolvable: int
    added: int
    added_wrong: int

    @property
    def rule_decided(self) -> int:
        return self.reinforced + self.added

    @property
    def rule_right(self) -> int:
        return self.rule_decided - self.reinforced_wrong - self.added_wrong

    @property
    def rule_accuracy(self) -> float | None:
        return ratio(self.rule_right, self.rule_decided)

    @property
    def llm_share(self) -> float | None:
        return ratio(self.asked, self.pairs)

    @property
    def best_case_accuracy(self) -> float | None:
        """Accuracy with a perfect LLM in the band."""
        return ratio(self.rule_right + self.asked_resolvable, self.pairs)


def counts(rankeds: Iterable[Ranked], reinforce: float, ask: float, max_options: int) -> ZoneCounts:
    """The zone counts of `rankeds` at (`reinforce`, `ask`)."""
    items = list(rankeds)
    zones = [zone(ranked, reinforce, ask) for ranked in items]
    paired = list(zip(items, zones, strict=True))
    return ZoneCounts(
        reinforce=reinforce,
        ask=ask,
        pairs=len(items),
        reinforced=zones.count("REINFORCE"),
        reinforced_wrong=sum(
            z == "REINFORCE" and not reinforce_would_be_right(r) for r, z in paired
        ),
        asked=zones.count("LLM"),
        asked_resolvable=sum(z == "LLM" and resolvable(r, ask, max_options) for r, z in paired),
        added=zones.count("ADD"),
        added_wrong=sum(z == "ADD" and r.pair.expected != "ADD" for r, z in paired),
    )


def grid(low: float, high: float, step: float) -> tuple[float, ...]:
    """Threshold values from `low` to `high` inclusive, rounded to 4 decimals."""
    count = round((high - low) / step)
    return tuple(round(low + index * step, 4) for index in range(count + 1))


def sweep(rankeds: Sequence[Ranked], values: Sequence[float], max_options: int) -> list[ZoneCounts]:
    """Zone counts at every (reinforce, ask) of `values` with ask <= reinforce."""
    return [
        counts(rankeds, reinforce, ask, max_options)
        for reinforce in values
        for ask in values
        if ask <= reinforce
    ]


@dataclass(frozen=True)
class SelectionRule:
    """How the default thresholds are chosen (module doc)."""

    margin: float = 0.005
    """`reinforce` must stay right even this much lower (unseen updates score a little higher
    than the highest one in the set)."""
    max_swallowed: float = 0.05
    """The share of should-UPDATE-or-REINFORCE pairs the ADD zone may take."""


@dataclass(frozen=True)
class Choice:
    """The chosen thresholds and the figures that decided them."""

    reinforce: float
    ask: float
    highest_wrong_reinforce: float | None
    """The best-candidate similarity of the highest pair a rule REINFORCE gets wrong."""
    highest_wrong_reinforce_pair: str | None
    swallowed: tuple[str, ...]
    """The should-UPDATE-or-REINFORCE pairs in the ADD zone at the chosen `ask`."""
    swallow_budget: int


def choose_thresholds(
    rankeds: Sequence[Ranked], values: Sequence[float], rule: SelectionRule
) -> Choice:
    """The thresholds `rule` picks among `values` (module doc). With no safe `reinforce` in
    `values` the highest is taken; with no `ask` within the budget, the lowest."""
    ordered = sorted(values)
    wrong = [
        (ranked.best, ranked.pair.id)
        for ranked in rankeds
        if ranked.best is not None and not reinforce_would_be_right(ranked)
    ]
    highest = max(wrong) if wrong else None
    safe = [v for v in ordered if highest is None or round(v - rule.margin, 9) > highest[0]]
    reinforce = safe[0] if safe else ordered[-1]
    should = [ranked for ranked in rankeds if ranked.pair.expected != "ADD"]
    budget = math.floor(rule.max_swallowed * len(should) + 1e-9)

    def swallowed(ask: float) -> list[str]:
        return [r.pair.id for r in should if r.best is None or r.best < ask]

    within = [v for v in ordered if v <= reinforce and len(swallowed(v)) <= budget]
    ask = within[-1] if within else ordered[0]
    return Choice(
        reinforce=reinforce,
        ask=ask,
        highest_wrong_reinforce=highest[0] if highest else None,
        highest_wrong_reinforce_pair=highest[1] if highest else None,
        swallowed=tuple(swallowed(ask)),
        swallow_budget=budget,
    )


# --- end-to-end outcomes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request to the LLM: its time, its token counts and its raw answer."""

    seconds: float
    prompt_tokens: int
    completion_tokens: int
    text: str


@dataclass(frozen=True)
class Outcome:
    """What reconciling one pair's new memory decided (`action` None: the run failed)."""

    pair: Pair
    zone: Zone
    action: Action | None
    target: str | None
    reason: str
    shown: tuple[str, ...] = ()
    """The memory ids the LLM was shown, in its numbering (empty when not asked)."""
    requests: tuple[Request, ...] = ()
    unusable: bool = False
    """Asked, but no answer held after the attempts (so ADDed)."""
    failure: str | None = None

    @property
    def right(self) -> bool:
        return self.action is not None and right(self.pair, self.action, self.target)

    @property
    def decided(self) -> str:
        """The decision as the confusion table shows it."""
        if self.action is None:
            return "failed"
        if self.action != "ADD" and self.target != self.pair.existing_id:
            return f"{self.action} (other memory)"
        return self.action


Harm = Literal["none", "fact lost", "stale or duplicate kept", "bookkeeping only", "failed"]
HARMS: tuple[Harm, ...] = (
    "none",
    "fact lost",
    "stale or duplicate kept",
    "bookkeeping only",
    "failed",
)


def harm(outcome: Outcome) -> Harm:
    """What a decision does to the store, worst first:

    * ``fact lost`` — a REINFORCE of a memory that was no paraphrase drops the new fact (or the
      new value of an update); an UPDATE of a memory that still holds (another fact, or a
      distractor) supersedes it;
    * ``stale or duplicate kept`` — an ADD instead of an UPDATE leaves the old value beside the
      new one as if both held; instead of a REINFORCE, a duplicate;
    * ``bookkeeping only`` — a paraphrase written as a new version of its own memory, or
      counted as evidence for another memory: every fact is still stored as it holds;
    * ``failed`` — no decision (the LLM was unreachable).
    """
    pair, action, target = outcome.pair, outcome.action, outcome.target
    if action is None:
        return "failed"
    if outcome.right:
        return "none"
    if action == "ADD":
        return "stale or duplicate kept"
    if pair.expected == "REINFORCE" and (action == "REINFORCE" or target == pair.existing_id):
        return "bookkeeping only"
    return "fact lost"


@dataclass(frozen=True)
class Tally:
    right: int
    total: int

    @property
    def accuracy(self) -> float | None:
        return ratio(self.right, self.total)


def tally(verdicts: Iterable[bool]) -> Tally:
    items = list(verdicts)
    return Tally(sum(items), len(items))


Grouping = Callable[[Pair], str]
GROUPINGS: Mapping[str, Grouping] = {
    "all": lambda pair: "all",
    "kind": lambda pair: pair.kind,
    "language": lambda pair: pair.language,
    "type": lambda pair: pair.memory_type,
    "hard": lambda pair: "hard" if pair.hard else "not hard",
}
"""The groups every table reports, in order."""


def groups(pairs: Iterable[Pair]) -> list[tuple[str, list[str]]]:
    """(label, pair ids) of every group of `GROUPINGS` that has pairs, in a stable order."""
    items = list(pairs)
    result: list[tuple[str, list[str]]] = []
    for name, key in GROUPINGS.items():
        labels = list(dict.fromkeys(sorted(key(pair) for pair in items)))
        for label in labels:
            members = [pair.id for pair in items if key(pair) == label]
            result.append((label if name in ("all", "hard") else f"{name}: {label}", members))
    return result


@dataclass(frozen=True)
class LLMUsage:
    """What the LLM band cost."""

    asked: int
    requests: int
    unusable: int
    """Asked pairs with no usable answer after the attempts (decided ADD)."""
    prompt_tokens: int
    completion_tokens: int
    seconds: tuple[float, ...]

    @property
    def mean_seconds(self) -> float | None:
        return statistics.fmean(self.seconds) if self.seconds else None

    @property
    def median_seconds(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None


def llm_usage(outcomes: Iterable[Outcome]) -> LLMUsage:
    asked = [outcome for outcome in outcomes if outcome.zone == "LLM"]
    requests = [request for outcome in asked for request in outcome.requests]
    return LLMUsage(
        asked=len(asked),
        requests=len(requests),
        unusable=sum(outcome.unusable for outcome in asked),
        prompt_tokens=sum(request.prompt_tokens for request in requests),
        completion_tokens=sum(request.completion_tokens for request in requests),
        seconds=tuple(request.seconds for request in requests),
    )


def confusion(outcomes: Iterable[Outcome]) -> dict[str, dict[str, int]]:
    """Expected action → decided action → count."""
    table: dict[str, dict[str, int]] = {action: {} for action in ACTIONS}
    for outcome in outcomes:
        row = table[outcome.pair.expected]
        row[outcome.decided] = row.get(outcome.decided, 0) + 1
    return table


# --- formatting ---------------------------------------------------------------------------------


def ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def fraction(part: int, whole: int) -> str:
    """``83% (5/6)``, or ``-`` for nothing."""
    return f"{percent(ratio(part, whole))} ({part}/{whole})" if whole else "-"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with padded columns."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "| " + " | ".join(f"{h:<{w}}" for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines += [
        "| " + " | ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    return "\n".join(lines)
