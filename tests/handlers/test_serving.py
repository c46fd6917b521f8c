"""Which read model is served: the fold of the switches, and the decisions of `memstream
promote` and `--back`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from events.codec import decode, encode
from handlers.serving import (
    LIVE,
    SwitchRefused,
    fold,
    promotion,
    return_to_replaced,
    switch_id,
)

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
ASKED = {"configured_extractor": "default", "requested_by": "cli:ops", "reason": "", "now": NOW}


def test_nothing_switched_serves_the_live_read_model() -> None:
    assert fold([]) == LIVE
    assert (LIVE.shadow, LIVE.version) == (None, 0)


def test_a_promotion_serves_the_shadow_and_remembers_what_it_replaced() -> None:
    switch = promotion(LIVE, "v2_all", "v2", **ASKED)
    assert (switch.version, switch.shadow, switch.extractor) == (1, "v2_all", "v2")
    assert (switch.replaced_shadow, switch.replaced_extractor, switch.back) == (
        None,
        "default",
        False,
    )
    served = fold([switch])
    assert (served.version, served.shadow, served.extractor, served.switch_id) == (
        1,
        "v2_all",
        "v2",
        switch.event_id,
    )
    assert decode(encode(switch)) == switch


def test_the_same_switch_decided_twice_has_one_id_and_two_switches_never_share_one() -> None:
    assert (
        promotion(LIVE, "a", "v2", **ASKED).event_id == promotion(LIVE, "a", "v2", **ASKED).event_id
    )
    assert switch_id(1, "a", "v2") != switch_id(1, "b", "v2")
    assert switch_id(1, "a", "v2") != switch_id(2, "a", "v2")
    assert switch_id(1, None, "v2") != switch_id(1, "v2", "v2")


def test_a_switch_decided_on_a_stale_view_and_a_repeated_one_are_left_out_of_the_fold() -> None:
    first = promotion(LIVE, "a", "v2", **ASKED)
    stale = promotion(LIVE, "b", "v3", **ASKED)  # decided before `first` was written
    served = fold([first, stale, first])
    assert (served.version, served.shadow, served.switch_id) == (1, "a", first.event_id)


def test_back_serves_what_the_last_switch_replaced_and_back_again_undoes_that() -> None:
    promoted = fold([promotion(LIVE, "a", "v2", **ASKED)])
    back = return_to_replaced(promoted, **ASKED)
    assert (back.version, back.shadow, back.extractor, back.back) == (2, None, "default", True)
    live_again = fold([back], promoted)
    assert (live_again.shadow, live_again.replaced_shadow) == (None, "a")
    forth = return_to_replaced(live_again, **ASKED)
    assert (forth.version, forth.shadow, forth.extractor) == (3, "a", "v2")


def test_promoting_the_served_shadow_and_going_back_before_any_switch_are_refused() -> None:
    promoted = fold([promotion(LIVE, "a", "v2", **ASKED)])
    with pytest.raises(SwitchRefused, match="served already"):
        promotion(promoted, "a", "v2", **ASKED)
    with pytest.raises(SwitchRefused, match="nothing was promoted"):
        return_to_replaced(LIVE, **ASKED)
