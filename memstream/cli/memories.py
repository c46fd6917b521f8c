"""`memstream memories | search | context | history --user U [--json]`: what was learned, read
from the command line through the SDK (the same reads an agent makes).

Text output is one memory per line (`[type] v<version> <text>  (<memory id>)`, and in `history`
the rollback that made a version: `[rollback to v<n> by <who>: <why>]`); `--json` prints
one JSON object per memory (the read model's document without its vector), or, for `context`,
`{"context": "<the block>"}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from events.memories import MEMORY_TYPES
from handlers.recall import PAST_MESSAGES
from memstream.cli.settings import settings_with_a_database
from memstream.sdk.memory_types import known_types

HIDDEN = ("embedding", "_id")
"""Fields not printed: vectors are long and useless on a terminal."""


def register(commands: Any) -> None:
    """Add the memory reading commands to the `memstream` parser's subcommands."""
    memories = commands.add_parser("memories", help="a user's current memories")
    _common(memories)
    memories.add_argument(
        "--type",
        metavar="TYPE",
        help=f"only this memory type ({', '.join(MEMORY_TYPES)} or a declared custom type)",
    )
    memories.add_argument("--all-versions", action="store_true", help="superseded ones too")
    memories.set_defaults(run=_memories)

    search = commands.add_parser("search", help="a user's memories that best answer a query")
    _common(search)
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--mode", choices=("hybrid", "vector", "keyword"), default="hybrid")
    search.set_defaults(run=_search)

    context = commands.add_parser("context", help="the prompt-ready block an agent is given")
    _common(context)
    context.add_argument("query")
    context.add_argument("--session", help="add this session's turns so far")
    context.add_argument("--max-chars", type=int, default=4_000)
    context.add_argument(
        "--past-messages",
        type=int,
        default=PAST_MESSAGES,
        help="earlier messages of the user's to show (0: none)",
    )
    context.add_argument(
        "--per-type", type=int, default=5, help="memories of each type to show (0: none)"
    )
    context.set_defaults(run=_context)

    history = commands.add_parser("history", help="every version of one memory")
    _common(history)
    history.add_argument("memory_id")
    history.set_defaults(run=_history)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", required=True, help="whose memories")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def _read(args: argparse.Namespace, read: Callable[[Any], Awaitable[Any]]) -> Any:
    from memstream.sdk.client import MemoryClient

    settings = settings_with_a_database()

    async def run() -> Any:
        async with MemoryClient(settings) as client:
            return await read(client)

    return asyncio.run(run())


def _memories(args: argparse.Namespace) -> int:
    if args.type is not None:
        known_types(settings_with_a_database(), [args.type])
    found = _read(
        args,
        lambda client: client.memories(args.user, memory_type=args.type, history=args.all_versions),
    )
    _print(found, args.json)
    return 0


def _search(args: argparse.Namespace) -> int:
    found = _read(
        args, lambda client: client.search(args.user, args.query, limit=args.limit, mode=args.mode)
    )
    _print(found, args.json)
    return 0


def _history(args: argparse.Namespace) -> int:
    found = _read(args, lambda client: client.history(args.user, args.memory_id))
    if not found:
        print(f"memstream: no memory {args.memory_id} of {args.user}")
        return 1
    _print(found, args.json)
    return 0


def _context(args: argparse.Namespace) -> int:
    block = _read(
        args,
        lambda client: client.build_context(
            args.user,
            args.query,
            session_id=args.session,
            max_chars=args.max_chars,
            per_type=args.per_type,
            past_messages=args.past_messages,
        ),
    )
    print(json.dumps({"context": block}, ensure_ascii=False) if args.json else block)
    return 0


def _print(memories: list[dict[str, Any]], as_json: bool) -> None:
    for memory in memories:
        if as_json:
            shown = {key: value for key, value in memory.items() if key not in HIDDEN}
            print(json.dumps(shown, ensure_ascii=False, default=str))
            continue
        status = "" if memory.get("status", "current") == "current" else f" ({memory['status']})"
        print(
            f"[{memory['memory_type']}] v{memory['version']}{status} {memory['text']}"
            f"  ({memory['memory_id']}){_rolled_back(memory)}"
        )


def _rolled_back(memory: dict[str, Any]) -> str:
    """`history`'s note on a version a rollback made: to which version, who, why."""
    rollback = memory.get("rolled_back_by")
    if not rollback:
        return ""
    why = f": {rollback['reason']}" if rollback.get("reason") else ""
    return f"  [rollback to v{rollback['to_version']} by {rollback['requested_by']}{why}]"
