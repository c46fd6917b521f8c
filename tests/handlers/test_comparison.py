"""Comparing two read models of one log: alike, changed, only on one side, duplicates, cost."""

from __future__ import annotations

from collections import Counter

from handlers.comparison import Cost, Remembered, Side, compare, summary_lines


def memory(text: str, *, user: str = "tim", snapshot: str | None = "s1") -> Remembered:
    return Remembered(user, "semantic", "the user", text, snapshot)


LIVE = Side(
    "memstream",
    [
        memory("The user keeps bees."),
        memory("The user lives in Lisbon."),
        memory("The user likes tea.", snapshot="s2"),
        memory("The user likes tea!", snapshot="s3"),
    ],
    events={("tim", "semantic"): Counter(MemoryAdded=4, MemoryUpdated=1)},
    costs={"semantic": Cost(snapshots=3, calls=4, prompt_tokens=1200, completion_tokens=90)},
)
SHADOW = Side(
    "trial",
    [
        memory("The user keeps bees."),
        memory("The user teaches maths in Lisbon."),
        memory("The user cycles.", snapshot=None),
        memory("The user plays chess.", user="ada"),
    ],
    events={("tim", "semantic"): Counter(MemoryAdded=3, MemoryReinforced=2)},
    costs={"semantic": Cost(snapshots=3, calls=3, prompt_tokens=900, completion_tokens=60)},
)


def test_each_user_and_type_says_what_is_alike_changed_and_only_on_one_side() -> None:
    ada, tim = compare(LIVE, SHADOW).differences
    assert (tim.user_id, tim.memory_type, tim.same) == ("tim", "semantic", 1)
    assert tim.changed == (("The user lives in Lisbon.", "The user teaches maths in Lisbon."),)
    assert tim.only_live == ("The user likes tea!", "The user likes tea.")
    assert tim.only_shadow == ("The user cycles.",)
    assert (tim.updates, tim.reinforcements) == ((1, 0), (0, 2))
    assert tim.duplicates == (1, 0)  # "likes tea." and "likes tea!" say the same words
    assert ada.only_shadow == ("The user plays chess.",) and ada.differs


def test_only_the_named_users_are_compared() -> None:
    (only,) = compare(LIVE, SHADOW, users=["ada"]).differences
    assert only.user_id == "ada"


def test_a_read_model_compared_with_itself_is_alike() -> None:
    comparison = compare(LIVE, LIVE)
    assert not any(d.differs for d in comparison.differences)
    assert summary_lines(comparison)[-2] == "1 of 1 user and type pairs alike"


def test_the_cost_is_per_snapshot_on_each_side() -> None:
    costs = compare(LIVE, SHADOW).costs["semantic"]
    assert costs["memstream"] == {
        "snapshots": 3,
        "calls": 1.33,
        "prompt_tokens": 400.0,
        "completion_tokens": 30.0,
    }
    assert costs["trial"]["calls"] == 1.0
