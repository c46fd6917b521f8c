"""Which read model the deployment serves: the live one, or a shadow promoted in its place
(docs/architecture.md, "Promotion").

`ReadModelSwitched` is the one record of a switch, on the serving topic: `memstream promote NAME`
writes one that serves the shadow NAME (and from then on runs its extractor live), `memstream
promote --back` one that serves again what the last switch replaced. The served read model is
the fold of these records in log order (`handlers.serving`); each carries the version it makes
(the first switch makes version 1), so a record decided on a stale view (another switch was
written first) is recognised and left out of the fold.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.base import Event

SERVING_KEY = "read-model"
"""Every switch's Kafka key: one partition holds them all, in order."""

ShadowName = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,40}$")


class ReadModelSwitched(Event):
    """From `occurred_at` on, the deployment serves `shadow`'s read model (None: the live one,
    the database it was configured with) and runs `extractor` live."""

    event_type: Literal["ReadModelSwitched"] = "ReadModelSwitched"
    schema_version: Literal[1] = 1

    version: int = Field(ge=1)
    """The serving version this switch makes: one more than the one it was decided on."""
    shadow: str | None = ShadowName
    extractor: str = Field(min_length=1, max_length=64)
    replaced_shadow: str | None = ShadowName
    """What was served before (None: the live read model)."""
    replaced_extractor: str = Field(min_length=1, max_length=64)
    back: bool = False
    """Whether this switch undoes the one before it (`memstream promote --back`)."""
    requested_by: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=2000)

    @property
    def key(self) -> str:
        return SERVING_KEY
