"""Which read model is served, and the decisions that switch it (docs/architecture.md,
"Promotion").

The served read model is the fold of the `ReadModelSwitched` records in log order (`fold`),
starting from the live one (`LIVE`). A record applies when it makes the next version; one that
does not was decided on a stale view (another switch was written first, or it is a copy of one
applied already) and is left out, so every reader of the log folds to the same answer.

`promotion` decides `memstream promote NAME`; `return_to_replaced` decides `--back`, which serves
again what the last switch replaced (twice: back and forth).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from events.serving import ReadModelSwitched

SWITCH_NAMESPACE = uuid.UUID("a8c1d36e-4f0b-5f55-9d0c-7e9f0d3c2b41")


@dataclass(frozen=True)
class Served:
    """What the deployment serves: `shadow`'s read model (None: the live one) with `extractor`
    run live, as of serving `version` (0: no switch yet); and what the last switch replaced."""

    version: int
    shadow: str | None
    extractor: str | None
    """None before any switch: the extractor the deployment is configured with."""
    replaced_shadow: str | None = None
    replaced_extractor: str | None = None
    switch_id: str | None = None


LIVE = Served(version=0, shadow=None, extractor=None)
"""Before any switch: the live read model, with the configured extractor."""


class SwitchRefused(ValueError):
    """The switch asked for cannot be made; nothing was written."""


def fold(switches: Iterable[ReadModelSwitched], start: Served = LIVE) -> Served:
    """The served read model after `switches`, in log order (module doc)."""
    served = start
    for switch in switches:
        served = applied(served, switch)
    return served


def applied(served: Served, switch: ReadModelSwitched) -> Served:
    """`served` after `switch`, or unchanged when the switch does not make the next version."""
    if switch.version != served.version + 1:
        return served
    return Served(
        version=switch.version,
        shadow=switch.shadow,
        extractor=switch.extractor,
        replaced_shadow=switch.replaced_shadow,
        replaced_extractor=switch.replaced_extractor,
        switch_id=switch.event_id,
    )


def promotion(
    served: Served,
    shadow: str,
    extractor: str,
    *,
    configured_extractor: str,
    requested_by: str,
    reason: str,
    now: datetime,
) -> ReadModelSwitched:
    """Serve the shadow `shadow` (built by `extractor`) in place of what is served now."""
    if served.shadow == shadow:
        raise SwitchRefused(f"the shadow {shadow!r} is served already (version {served.version})")
    return _switch(
        served,
        shadow,
        extractor,
        configured_extractor=configured_extractor,
        back=False,
        requested_by=requested_by,
        reason=reason,
        now=now,
    )


def return_to_replaced(
    served: Served, *, configured_extractor: str, requested_by: str, reason: str, now: datetime
) -> ReadModelSwitched:
    """Serve again what the last switch replaced (`memstream promote --back`)."""
    if served.version == 0 or served.replaced_extractor is None:
        raise SwitchRefused("nothing was promoted: the live read model is served")
    return _switch(
        served,
        served.replaced_shadow,
        served.replaced_extractor,
        configured_extractor=configured_extractor,
        back=True,
        requested_by=requested_by,
        reason=reason,
        now=now,
    )


def switch_id(version: int, shadow: str | None, extractor: str) -> str:
    """A switch's id, from what it decides: the same switch decided twice (a command run again
    after a crash) has the same id; two different switches never do."""
    return str(uuid.uuid5(SWITCH_NAMESPACE, f"{version}|{shadow or ''}|{extractor}"))


def _switch(
    served: Served,
    shadow: str | None,
    extractor: str,
    *,
    configured_extractor: str,
    back: bool,
    requested_by: str,
    reason: str,
    now: datetime,
) -> ReadModelSwitched:
    version = served.version + 1
    return ReadModelSwitched(
        event_id=switch_id(version, shadow, extractor),
        occurred_at=now,
        version=version,
        shadow=shadow,
        extractor=extractor,
        replaced_shadow=served.shadow,
        replaced_extractor=served.extractor or configured_extractor,
        back=back,
        requested_by=requested_by,
        reason=reason,
    )
