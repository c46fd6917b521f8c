"""The Markdown tables of the reconciliation evaluation (pure: from rankings and outcomes)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.reconcile_eval.pairs import KINDS, LANGUAGES
from bench.reconcile_eval.scoring import (
    ACTIONS,
    HARMS,
    Choice,
    Outcome,
    Ranked,
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
    percent,
    reinforce_would_be_right,
    zone,
)
from handlers.reconcile import Thresholds

GRID = grid(0.80, 1.00, 0.005)
"""The thresholds the rule chooses among."""


def similarity_table(rankeds: Sequence[Ranked]) -> str:
    """Min / median / max cosine of each pair's own two memories, by kind and language."""
    rows = []
    for kind in KINDS:
        for language in LANGUAGES:
            values = [
                r.similarity for r in rankeds if r.pair.kind == kind and r.pair.language == language
            ]
            if values:
                rows.append(
                    [
                        kind,
                        language,
                        str(len(values)),
                        f"{min(values):.3f}",
                        f"{statistics.median(values):.3f}",
                        f"{max(values):.3f}",
                    ]
                )
    return markdown_table(["kind", "language", "pairs", "min", "median", "max"], rows)


def reinforce_table(rankeds: Sequence[Ranked], values: Sequence[float]) -> str:
    """How many pairs a rule REINFORCE takes, and gets wrong, as `reinforce` falls."""
    rows = []
    for value in sorted(values, reverse=True):
        taken = [r for r in rankeds if r.best is not None and r.best >= value]
        wrong = [r for r in taken if not reinforce_would_be_right(r)]
        by_kind = ", ".join(
            f"{kind} {n}" for kind in KINDS if (n := sum(r.pair.kind == kind for r in wrong))
        )
        rows.append([f"{value:.3f}", str(len(taken)), str(len(wrong)), by_kind or "-"])
    return markdown_table(["reinforce", "REINFORCE zone", "wrong", "wrong, by kind"], rows)


def ask_table(
    rankeds: Sequence[Ranked], reinforce: float, values: Sequence[float], max_options: int
) -> str:
    """What the ADD zone swallows and what the LLM gets as `ask` falls (at `reinforce`)."""
    rows = []
    for value in sorted((v for v in values if v <= reinforce), reverse=True):
        c = counts(rankeds, reinforce, value, max_options)
        below = [r for r in rankeds if zone(r, reinforce, value) == "ADD"]
        rows.append(
            [
                f"{value:.3f}",
                str(c.added),
                str(sum(r.pair.expected == "UPDATE" for r in below)),
                str(sum(r.pair.expected == "REINFORCE" for r in below)),
                fraction(c.asked, c.pairs),
                percent(c.rule_accuracy),
                percent(c.best_case_accuracy),
            ]
        )
    return markdown_table(
        [
            "ask",
            "ADD zone",
            "swallowed UPDATE",
            "swallowed REINFORCE",
            "LLM zone",
            "rule zones right",
            "best case",
        ],
        rows,
    )


def zones_table(
    rankeds: Sequence[Ranked],
    thresholds: Thresholds,
    outcomes: Sequence[Outcome] | None,
) -> str:
    """Per group: the zones at `thresholds`, rule-zone accuracy and end-to-end accuracy."""
    by_id = {r.pair.id: r for r in rankeds}
    results = {o.pair.id: o for o in outcomes or ()}
    rows = []
    for label, ids in groups(r.pair for r in rankeds):
        c = counts(
            [by_id[i] for i in ids], thresholds.reinforce, thresholds.ask, thresholds.max_options
        )
        row = [
            label,
            str(c.pairs),
            f"{c.reinforced} ({c.reinforced_wrong})",
            str(c.asked),
            f"{c.added} ({c.added_wrong})",
            fraction(c.rule_right, c.rule_decided),
        ]
        if outcomes is not None:
            asked = [results[i] for i in ids if results[i].zone == "LLM"]
            row.append(fraction(sum(o.right for o in asked), len(asked)))
            row.append(fraction(sum(results[i].right for i in ids), len(ids)))
            row.append(str(sum(harm(results[i]) == "fact lost" for i in ids)))
        rows.append(row)
    headers = [
        "group",
        "pairs",
        "REINFORCE zone (wrong)",
        "LLM zone",
        "ADD zone (wrong)",
        "rule zones right",
    ]
    if outcomes is not None:
        headers += ["LLM band right", "end to end right", "facts lost"]
    return markdown_table(headers, rows)


def compare_table(
    rankeds: Sequence[Ranked], settings: Sequence[tuple[str, float, float]], max_options: int
) -> str:
    rows = []
    for label, reinforce, ask in settings:
        c = counts(rankeds, reinforce, ask, max_options)
        rows.append(
            [
                label,
                f"{reinforce:.3f} / {ask:.3f}",
                f"{c.reinforced} ({c.reinforced_wrong})",
                fraction(c.asked, c.pairs),
                f"{c.added} ({c.added_wrong})",
                fraction(c.rule_right, c.rule_decided),
                percent(c.best_case_accuracy),
            ]
        )
    return markdown_table(
        [
            "thresholds",
            "reinforce / ask",
            "REINFORCE zone (wrong)",
            "LLM zone",
            "ADD zone (wrong)",
            "rule zones right",
            "best case",
        ],
        rows,
    )


def confusion_table(outcomes: Sequence[Outcome]) -> str:
    table = confusion(outcomes)
    columns = [*ACTIONS, *sorted({d for row in table.values() for d in row} - set(ACTIONS))]
    rows = [
        [f"{expected} expected", *(str(table[expected].get(column, 0)) for column in columns)]
        for expected in ACTIONS
    ]
    return markdown_table(["", *(f"decided {c}" for c in columns)], rows)


def harm_table(outcomes: Sequence[Outcome]) -> str:
    """What the wrong decisions do to the store (`scoring.harm`), by zone."""
    rows = []
    for kind in HARMS[1:]:
        by_zone = [sum(o.zone == z and harm(o) == kind for o in outcomes) for z in ZONES]
        if any(by_zone):
            rows.append([kind, *(str(n) for n in by_zone), str(sum(by_zone))])
    return markdown_table(["wrong decision", *(f"{z} zone" for z in ZONES), "all"], rows)


ZONES = ("REINFORCE", "LLM", "ADD")


def usage_table(outcomes: Sequence[Outcome]) -> str:
    usage = llm_usage(outcomes)
    requests = usage.requests or 1
    seconds = usage.seconds
    return markdown_table(
        ["score", "value"],
        [
            ["pairs asked (LLM calls)", str(usage.asked)],
            ["requests (with retries)", str(usage.requests)],
            ["no usable answer (ADDed)", str(usage.unusable)],
            ["prompt tokens / request", f"{usage.prompt_tokens / requests:.0f}"],
            ["completion tokens / request", f"{usage.completion_tokens / requests:.1f}"],
            [
                "seconds / request: mean, median, max",
                f"{usage.mean_seconds or 0:.1f}, {usage.median_seconds or 0:.1f}, "
                f"{max(seconds, default=0):.1f}",
            ],
            ["seconds, all requests", f"{sum(seconds):.0f}"],
        ],
    )


def held_out_table(rankeds: Sequence[Ranked], rule: SelectionRule, max_options: int) -> str:
    """The rule applied to one language's pairs alone, and what it does on the other's: how
    much the chosen thresholds depend on the pairs they were chosen on."""
    rows = []
    for chosen_on in LANGUAGES:
        for applied_to in LANGUAGES:
            if chosen_on == applied_to:
                continue
            train = [r for r in rankeds if r.pair.language == chosen_on]
            test = [r for r in rankeds if r.pair.language == applied_to]
            choice = choose_thresholds(train, GRID, rule)
            c = counts(test, choice.reinforce, choice.ask, max_options)
            rows.append(
                [
                    chosen_on,
                    f"{choice.reinforce:.3f} / {choice.ask:.3f}",
                    applied_to,
                    f"{c.reinforced} ({c.reinforced_wrong})",
                    fraction(c.asked, c.pairs),
                    f"{c.added} ({c.added_wrong})",
                ]
            )
    return markdown_table(
        [
            "chosen on",
            "reinforce / ask",
            "applied to",
            "REINFORCE zone (wrong)",
            "LLM zone",
            "ADD zone (wrong)",
        ],
        rows,
    )


def choice_text(choice: Choice, rule: SelectionRule, should: int) -> str:
    highest = (
        f"the highest wrong rule REINFORCE is {choice.highest_wrong_reinforce_pair} at "
        f"{choice.highest_wrong_reinforce:.3f}"
        if choice.highest_wrong_reinforce is not None
        else "no rule REINFORCE is wrong"
    )
    swallowed = ", ".join(choice.swallowed) or "none"
    return (
        f"reinforce = {choice.reinforce:.3f}: the smallest grid value more than {rule.margin} "
        f"above every wrong rule REINFORCE ({highest}).\n"
        f"ask = {choice.ask:.3f}: the largest grid value at which the ADD zone swallows at most "
        f"{percent(rule.max_swallowed)} ({choice.swallow_budget}) of the {should} pairs that "
        f"should UPDATE or REINFORCE; it swallows {len(choice.swallowed)}: {swallowed}."
    )


def wrong_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """One line per wrong decision: the pair, what was decided, what the LLM answered."""
    lines = []
    for outcome in outcomes:
        if outcome.right:
            continue
        pair = outcome.pair
        answer = outcome.requests[-1].text.strip() if outcome.requests else ""
        lines.append(
            f"{pair.id} ({outcome.zone}): expected {pair.expected}, decided {outcome.decided}"
            f" [{harm(outcome)}] — {pair.existing.text} → {pair.new.text}"
            + (f"; shown {list(outcome.shown)}; answer {answer[:200]!r}" if answer else "")
            + (f"; {outcome.failure}" if outcome.failure else "")
        )
    return lines


def report(
    rankeds: Sequence[Ranked],
    *,
    embedding_model: str,
    rule: SelectionRule,
    choice: Choice,
    thresholds: Thresholds,
    config_defaults: tuple[float, float],
    outcomes: Sequence[Outcome] | None,
) -> str:
    """Every table of a run, as Markdown with short headings."""
    should = sum(r.pair.expected != "ADD" for r in rankeds)
    parts = [
        f"{len(rankeds)} pairs, embedded with {embedding_model}",
        "Similarity of each pair's two memories:",
        similarity_table(rankeds),
        "Rule REINFORCE as the threshold falls:",
        reinforce_table(rankeds, grid(0.90, 1.00, 0.005)),
        f"ADD zone as ask falls (reinforce = {thresholds.reinforce:.3f}):",
        ask_table(rankeds, thresholds.reinforce, grid(0.80, 1.00, 0.01), thresholds.max_options),
        "Chosen by the rule:",
        choice_text(choice, rule, should),
        "The rule on one language's pairs, applied to the other's:",
        held_out_table(rankeds, rule, thresholds.max_options),
        "The chosen thresholds against the configured defaults:",
        compare_table(
            rankeds,
            [("chosen", choice.reinforce, choice.ask), ("config defaults", *config_defaults)],
            thresholds.max_options,
        ),
        f"At reinforce = {thresholds.reinforce:.3f}, ask = {thresholds.ask:.3f}:",
        zones_table(rankeds, thresholds, outcomes),
    ]
    if outcomes is not None:
        parts += [
            "Decisions, end to end:",
            confusion_table(outcomes),
            "What the wrong decisions do:",
            harm_table(outcomes),
            "LLM band:",
            usage_table(outcomes),
        ]
        wrong = wrong_lines(outcomes)
        if wrong:
            parts += ["Wrong decisions:", "\n".join(f"  {line}" for line in wrong)]
    return "\n\n".join(parts)


def variants_table(runs: Sequence[tuple[str, str, int, Sequence[Outcome]]]) -> str:
    """One row per run — (its report's name, its prompt, questions per call, its outcomes) — with
    what it decided and what the band cost per decided pair (every request, retries included,
    over the pairs asked)."""
    rows = []
    for name, prompt, per_call, outcomes in runs:
        usage = llm_usage(outcomes)
        asked = max(usage.asked, 1)
        seconds = sum(usage.seconds)
        rows.append(
            [
                name,
                prompt,
                str(per_call),
                fraction(sum(o.right for o in outcomes), len(outcomes)),
                fraction(sum(o.right for o in outcomes if o.zone == "LLM"), usage.asked),
                str(sum(harm(o) == "fact lost" for o in outcomes)),
                f"{usage.requests} ({usage.unusable})",
                f"{usage.prompt_tokens / asked:.0f} / {usage.completion_tokens / asked:.1f}",
                f"{(usage.prompt_tokens + usage.completion_tokens) / asked:.0f}",
                f"{seconds:.0f} ({seconds / asked:.1f})",
            ]
        )
    return markdown_table(
        [
            "report",
            "prompt",
            "per call",
            "end to end right",
            "LLM band right",
            "facts lost",
            "requests (no usable answer)",
            "prompt / completion tokens per decided pair",
            "tokens per decided pair",
            "seconds, all requests (per decided pair)",
        ],
        rows,
    )
