"""`memstream keys create|list|revoke`: API keys for the HTTP API and the MCP server."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import orjson

from memstream.config import load_settings

if TYPE_CHECKING:  # imported where used: building the CLI's parser stays light
    from memstream.api.keys import KeyStore


def register(commands: Any) -> None:
    """Add `memstream keys` to the `memstream` parser's subcommands."""
    keys = commands.add_parser("keys", help="API keys of the HTTP API and MCP server")
    actions = keys.add_subparsers(required=True, metavar="action")

    create = actions.add_parser("create", help="create a key (printed once)")
    create.add_argument("--name", required=True, help="what the key is for")
    kind = create.add_mutually_exclusive_group(required=True)
    kind.add_argument(
        "--application",
        metavar="APP_ID",
        help="a standalone application: it names the user_id of every call",
    )
    kind.add_argument(
        "--service-account",
        metavar="ACCOUNT_ID",
        help="a deployed agent's service account: its id is the memory user",
    )
    create.add_argument(
        "--user-prefix", help="an application may only act on user ids starting with this"
    )
    create.add_argument(
        "--expires-in",
        type=_duration,
        help="refused after this long: 90d, 12h, 30m or seconds (default: never)",
    )
    create.add_argument(
        "--rate-limit", type=int, help="requests per minute at most (over it: HTTP 429)"
    )
    create.set_defaults(run=_create)

    listing = actions.add_parser("list", help="every key (never the secrets)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(run=_list)

    revoke = actions.add_parser("revoke", help="revoke a key: refused from the next request on")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=_revoke)


_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}


def _duration(text: str) -> timedelta:
    """`90d`, `12h`, `30m`, `45s` or plain seconds."""
    number, unit = (text[:-1], text[-1]) if text and text[-1] in _UNITS else (text, "s")
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a duration like 90d, 12h, 30m or 45s"
        ) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("a duration must be more than 0")
    return timedelta(seconds=seconds)


def _store() -> KeyStore:
    from memstream.api.keys import KeyStore

    settings = load_settings()
    if not settings.mongodb.uri:
        raise SystemExit("memstream: MONGODB_URI is not set (is `memstream up` running?)")
    return KeyStore(settings.mongodb.uri, settings.mongodb.database)


def _create(args: argparse.Namespace) -> int:
    async def create() -> int:
        store = _store()
        limits: dict[str, Any] = {"expires_in": args.expires_in, "rate_limit": args.rate_limit}
        try:
            if args.service_account:
                key, stored = await store.create(
                    args.name,
                    "service_account",
                    args.service_account,
                    user_prefix=args.user_prefix,
                    **limits,
                )
            else:
                key, stored = await store.create(
                    args.name,
                    "application",
                    args.application,
                    user_prefix=args.user_prefix,
                    **limits,
                )
        except ValueError as exc:
            print(f"memstream: {exc}", file=sys.stderr)
            return 2
        finally:
            await store.close()
        print(f"key id: {stored.key_id}", file=sys.stderr)
        print("the key is shown once; keep it secret:", file=sys.stderr)
        print(key)
        return 0

    return asyncio.run(create())


def _list(args: argparse.Namespace) -> int:
    async def listed() -> int:
        store = _store()
        try:
            keys = await store.list()
        finally:
            await store.close()
        for key in keys:
            described = key.described()
            if args.json:
                print(orjson.dumps(described).decode())
                continue
            scope = described["principal_id"]
            if described["user_prefix"]:
                scope += f" (users {described['user_prefix']}*)"
            state = f"revoked {described['revoked_at']}" if key.revoked_at else "active"
            if key.expires_at and not key.revoked_at:
                state += f", expires {described['expires_at']}"
            if key.rate_limit:
                state += f", {key.rate_limit}/min"
            print(
                f"{key.key_id}  {described['kind']:<15} {scope:<30} {state:<8} "
                f"ignored user ids: {key.ignored_user_ids}  {key.name}"
            )
        return 0

    return asyncio.run(listed())


def _revoke(args: argparse.Namespace) -> int:
    async def revoke() -> int:
        store = _store()
        try:
            revoked = await store.revoke(args.key_id)
        finally:
            await store.close()
        if not revoked:
            print(f"memstream: no active key {args.key_id!r}", file=sys.stderr)
            return 1
        print(f"revoked {args.key_id}")
        return 0

    return asyncio.run(revoke())
