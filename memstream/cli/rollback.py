"""`memstream rollback --user U --memory ID --to-version N --by WHO [--reason WHY] [--wait]`.

Writes one rollback request to the log (through `MemoryClient`) and prints its id; `--wait`
then waits for the memory's stage to decide it and prints the result as JSON (the version it
made, or why it was refused: exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from events.forgetting import MAX_REASON_CHARS
from memstream.cli.settings import settings_with_a_database

DEFAULT_WAIT_SECONDS = 120.0


def register(commands: Any) -> None:
    """Add `rollback` to the `memstream` parser's subcommands."""
    rollback = commands.add_parser("rollback", help="restore a memory to an earlier version")
    rollback.add_argument("--user", required=True, help="whose memory")
    rollback.add_argument("--memory", required=True, help="the memory id")
    rollback.add_argument("--to-version", type=int, required=True, help="the version to restore")
    rollback.add_argument("--by", required=True, help="who asks (kept, shown by history)")
    rollback.add_argument("--reason", default="", help="why (kept, shown by history)")
    rollback.add_argument("--wait", action="store_true", help="wait for the result, print it")
    rollback.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        help=f"seconds --wait waits (default {DEFAULT_WAIT_SECONDS:.0f})",
    )
    rollback.set_defaults(run=_rollback)


def refusal(args: argparse.Namespace) -> str | None:
    """Why the arguments are refused before anything is sent (None: they are fine)."""
    if args.to_version < 1:
        return "--to-version is a version number, 1 or more"
    if not args.by.strip():
        return "--by names who asks"
    if len(args.reason) > MAX_REASON_CHARS:
        return f"--reason is at most {MAX_REASON_CHARS} characters"
    return None


def _rollback(args: argparse.Namespace) -> int:
    from memstream.sdk.client import MemoryClient, MemoryNotFound

    if (refused := refusal(args)) is not None:
        print(f"memstream: {refused}", file=sys.stderr)
        return 2
    settings = settings_with_a_database()

    async def run() -> int:
        async with MemoryClient(settings) as client:
            try:
                rollback_id = await client.rollback(
                    args.user,
                    args.memory,
                    args.to_version,
                    requested_by=args.by,
                    reason=args.reason,
                )
            except MemoryNotFound as exc:
                print(f"memstream: {exc}", file=sys.stderr)
                return 1
            print(rollback_id, flush=True)
            if not args.wait:
                return 0
            try:
                result = await client.wait_for_rollback(args.user, rollback_id, args.timeout)
            except TimeoutError as exc:
                print(f"memstream: {exc}", file=sys.stderr)
                return 1
            print(json.dumps(result, indent=2, default=str))
            return 1 if result["refused"] else 0

    return asyncio.run(run())
