"""The shipped reconciliation thresholds are what the selection rule picks on the labelled pairs
with the local embedder, and at them no rule REINFORCE is wrong (bench/reconcile_eval)."""

from __future__ import annotations

import json

import pytest

from bench.reconcile_eval.pairs import DEFAULT_PAIRS_FILE, parse_pairs
from bench.reconcile_eval.run import RULE, embed, prepare
from bench.reconcile_eval.scoring import Ranked, choose_thresholds, counts
from bench.reconcile_eval.tables import GRID
from memstream.config import ReconcileSettings


@pytest.fixture(scope="module")
def rankeds() -> list[Ranked]:
    pairs = parse_pairs(json.loads(DEFAULT_PAIRS_FILE.read_text(encoding="utf-8")))
    model, _, vectors = embed(pairs)
    return [item.ranked for item in prepare(pairs, pairs, vectors, model=model, distractor_count=2)]


def test_the_default_thresholds_are_the_rules_choice_on_the_pairs(rankeds: list) -> None:  # type: ignore[type-arg]
    choice = choose_thresholds(rankeds, GRID, RULE)
    defaults = ReconcileSettings()
    assert (choice.reinforce, choice.ask) == pytest.approx(
        (defaults.reinforce_threshold, defaults.ask_threshold)
    )


def test_no_rule_reinforce_is_wrong_at_the_defaults(rankeds: list) -> None:  # type: ignore[type-arg]
    defaults = ReconcileSettings()
    zones = counts(
        rankeds, defaults.reinforce_threshold, defaults.ask_threshold, defaults.max_options
    )
    assert zones.reinforced_wrong == 0
    assert zones.added_wrong <= 0.05 * sum(r.pair.expected != "ADD" for r in rankeds)
