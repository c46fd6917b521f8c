"""A blocking Python client of the HTTP API, for agents that want neither Kafka nor MongoDB.

    with HttpMemoryClient("http://127.0.0.1:8080", api_key) as memory:
        memory.record("s1", [{"role": "user", "content": "I work at Stripe."}], user_id="tim")
        memory.search("where does Tim work?", user_id="tim")

The calls mirror `MemoryClient`'s, but the user is a keyword: a service-account key acts on its
own memory and needs none. Errors raise `ApiError` with the server's problem details. The SDK's
Kafka path stays the fast path for producers (BENCHMARKS.md, "HTTP API").
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import quote

import httpx
import orjson

from events.consolidations import DEFAULT_MAX_CALLS
from memstream.sdk.results import (
    Consolidation,
    Document,
    ErasureReceipt,
    FlushReceipt,
    Memory,
    MemoryVersion,
    Profile,
    Rollback,
    SearchHit,
    TurnsReceipt,
    consolidation_complete,
    from_json,
)

if TYPE_CHECKING:  # only annotations: the HTTP client imports no search code
    from handlers.search import SearchMode
    from memstream.sdk.search_filters import SearchFilters


class ApiError(RuntimeError):
    """The API answered an error; `problem` holds its RFC 9457 problem details."""

    def __init__(self, status: int, problem: Document) -> None:
        super().__init__(f"{status}: {problem.get('detail') or problem.get('title')}")
        self.status = status
        self.problem = problem


class HttpMemoryClient:
    """The memstream HTTP API (`/v1`), authenticated with an API key."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/v1",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
        )

    def __enter__(self) -> HttpMemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- writing -------------------------------------------------------------------------------

    def record(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        occurred_at: datetime | None = None,
    ) -> TurnsReceipt:
        """Append messages as turns; returns the memory user and the turn ids."""
        body = {
            "user_id": user_id,
            "session_id": session_id,
            "agent_id": agent_id,
            "messages": list(messages),
            "occurred_at": occurred_at.isoformat() if occurred_at else None,
        }
        receipt: TurnsReceipt = from_json(self._call("POST", "/turns", body), TurnsReceipt)
        return receipt

    def flush(self, session_id: str, *, user_id: str | None = None) -> FlushReceipt:
        """End a session: promote its pending turns now; returns the memory user and session."""
        body = {"user_id": user_id, "session_id": session_id}
        receipt: FlushReceipt = from_json(self._call("POST", "/flush", body), FlushReceipt)
        return receipt

    def save(
        self, memory_type: str, text: str, *, user_id: str | None = None, **options: Any
    ) -> str:
        """Save a memory directly; returns the save's id."""
        body = {"user_id": user_id, "memory_type": memory_type, "text": text, **options}
        return str(self._call("POST", "/saves", body)["save_id"])

    def rollback(self, memory_id: str, to_version: int, *, user_id: str, reason: str = "") -> str:
        """Restore one memory to its version `to_version`; returns the rollback's id
        (`ApiError` 404: no such memory). Who asked is the key's principal."""
        path = f"/users/{_segment(user_id)}/memories/{_segment(memory_id)}/rollback"
        body = {"to_version": to_version, "reason": reason}
        return str(self._call("POST", path, body)["rollback_id"])

    def rollback_result(self, rollback_id: str, *, user_id: str) -> Rollback | None:
        """What the rollback did (`None`: not decided yet)."""
        try:
            found = self._call(
                "GET", f"/users/{_segment(user_id)}/rollbacks/{_segment(rollback_id)}"
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        result: Rollback = from_json(found, Rollback)
        return result

    def wait_for_rollback(
        self, rollback_id: str, timeout: float = 60.0, *, user_id: str, poll: float = 0.5
    ) -> Rollback:
        """The rollback's result once decided; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (found := self.rollback_result(rollback_id, user_id=user_id)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"rollback {rollback_id} not decided after {timeout:.0f}s")
            time.sleep(poll)
        return found

    # -- consolidation -------------------------------------------------------------------------

    def consolidate(
        self,
        *,
        user_id: str,
        memory_types: Sequence[str] | None = None,
        max_calls: int = DEFAULT_MAX_CALLS,
        reason: str = "",
    ) -> str:
        """Consolidate the user's memories; returns the consolidation's id. Who asked is the
        key's principal."""
        path = f"/users/{_segment(user_id)}/consolidations"
        body = {
            "memory_types": list(memory_types) if memory_types else None,
            "max_calls": max_calls,
            "reason": reason,
        }
        return str(self._call("POST", path, body)["consolidation_id"])

    def consolidation_result(self, consolidation_id: str, *, user_id: str) -> list[Consolidation]:
        """The runs decided so far, one per memory type (empty: none yet)."""
        path = f"/users/{_segment(user_id)}/consolidations/{_segment(consolidation_id)}"
        try:
            found = self._call("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise
        runs: list[Consolidation] = from_json(found["runs"], list[Consolidation])
        return runs

    def wait_for_consolidation(
        self, consolidation_id: str, timeout: float = 60.0, *, user_id: str, poll: float = 0.5
    ) -> list[Consolidation]:
        """Every requested type's run once decided; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not consolidation_complete(
            runs := self.consolidation_result(consolidation_id, user_id=user_id)
        ):
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"consolidation {consolidation_id} not decided after {timeout:.0f}s"
                )
            time.sleep(poll)
        return runs

    # -- forgetting ----------------------------------------------------------------------------

    def forget(self, memory_id: str, *, user_id: str, reason: str = "") -> str:
        """Forget one memory; returns the request id (`ApiError` 404: no such memory)."""
        path = f"/users/{_segment(user_id)}/memories/{_segment(memory_id)}"
        return self._forget(path, reason)

    def forget_session(self, session_id: str, *, user_id: str, reason: str = "") -> str:
        """Forget a session; returns the request id."""
        return self._forget(f"/users/{_segment(user_id)}/sessions/{_segment(session_id)}", reason)

    def forget_user(self, user_id: str, *, reason: str = "") -> str:
        """Forget everything of a user (a service-account key: only its own id); returns the
        request id."""
        return self._forget(f"/users/{_segment(user_id)}", reason)

    def erasures(self, *, user_id: str) -> list[ErasureReceipt]:
        """The user's erasure receipts, newest first, each with `complete`."""
        found = self._call("GET", f"/users/{_segment(user_id)}/erasures")["erasures"]
        receipts: list[ErasureReceipt] = from_json(found, list[ErasureReceipt])
        return receipts

    def erasure(self, request_id: str) -> ErasureReceipt | None:
        """One request's receipt (`None`: none yet, or not one this key may read)."""
        try:
            found = self._call("GET", f"/erasures/{_segment(request_id)}")
            receipt: ErasureReceipt = from_json(found, ErasureReceipt)
            return receipt
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def wait_for_erasure(
        self, request_id: str, timeout: float = 60.0, *, poll: float = 0.5
    ) -> ErasureReceipt:
        """The request's receipt once it is complete; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            receipt = self.erasure(request_id)
            if receipt is not None and receipt["complete"]:
                return receipt
            if time.monotonic() >= deadline:
                raise TimeoutError(f"erasure {request_id} not complete after {timeout:.0f}s")
            time.sleep(poll)

    def _forget(self, path: str, reason: str) -> str:
        params = {"reason": reason} if reason else None
        return str(self._call("DELETE", path, params=params)["request_id"])

    # -- reading -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        limit: int = 10,
        mode: SearchMode = "hybrid",
        **filters: Unpack[SearchFilters],
    ) -> list[SearchHit]:
        body = {"user_id": user_id, "query": query, "limit": limit, "mode": mode}
        body.update(_jsonable(filters))
        found = self._call("POST", "/search", body)["results"]
        results: list[SearchHit] = from_json(found, list[SearchHit])
        return results

    def build_context(self, query: str, *, user_id: str | None = None, **options: Any) -> str:
        body = {"user_id": user_id, "query": query, **options}
        return str(self._call("POST", "/context", body)["context"])

    def memories(
        self, *, user_id: str | None = None, page_size: int = 100, **options: Any
    ) -> Iterator[Memory]:
        """Every memory, newest first, fetched a page at a time."""
        params = {"user_id": user_id, "limit": page_size, **_jsonable(options)}
        cursor: str | None = None
        while True:
            page = self._call("GET", "/memories", params={**params, "cursor": cursor})
            yield from from_json(page["items"], list[Memory])
            cursor = page["next_cursor"]
            if cursor is None:
                return

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[MemoryVersion]:
        found = self._call("GET", f"/memories/{memory_id}/history", params={"user_id": user_id})
        versions: list[MemoryVersion] = from_json(found["versions"], list[MemoryVersion])
        return versions

    def profile(self, *, user_id: str | None = None) -> Profile | None:
        found = self._call("GET", "/profile", params={"user_id": user_id})["profile"]
        profile: Profile | None = from_json(found, Profile)
        return profile

    def events(
        self,
        *,
        user_id: str | None = None,
        since: int | datetime | None = None,
        follow: bool = False,
    ) -> Iterator[Document]:
        """The user's memory events, one dict per event; with `follow`, until the caller stops."""
        params = {
            "user_id": user_id,
            "since": since.isoformat() if isinstance(since, datetime) else since,
            "follow": follow,
        }
        with self._http.stream(
            "GET", "/events", params=_present(params), timeout=None if follow else 60.0
        ) as response:
            if response.status_code >= 400:
                response.read()
                raise _error(response)
            for line in response.iter_lines():
                if line:
                    yield orjson.loads(line)

    def status(self) -> Document:
        return self._call("GET", "/status")

    # -- internals -----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        params: Mapping[str, Any] | None = None,
    ) -> Document:
        response = self._http.request(
            method,
            path,
            content=None if body is None else orjson.dumps(_present(body)),
            headers={"Content-Type": "application/json"} if body is not None else None,
            params=_present(params or {}),
        )
        if response.status_code >= 400:
            raise _error(response)
        found: Document = response.json()
        return found


def _segment(value: str) -> str:
    """`value` as one URL path segment (a `/` in an id is escaped, not a separator)."""
    return quote(value, safe="")


def _present(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _jsonable(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` as JSON and query parameters take them: times as ISO 8601, sets and tuples
    (e.g. `types`) as lists."""
    return {k: _json_value(v) for k, v in values.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return value


def _error(response: httpx.Response) -> ApiError:
    try:
        problem = response.json()
    except ValueError:
        problem = {"title": response.reason_phrase, "detail": response.text[:500]}
    return ApiError(response.status_code, problem if isinstance(problem, dict) else {})
