"""`memstream consolidate --user U [--types T ...] [--max-calls N] --by WHO [--reason WHY]
[--wait]`.

Writes one consolidation request to the log (through `MemoryClient`) and prints its id; `--wait`
then waits for every requested type's stage to decide it and prints what each run merged and
superseded, and what it cost (`--json`: the runs as JSON). Meant to be run by cron for a
scheduled consolidation (docs/architecture.md, "Consolidation"): the wall clock only triggers a
command written to the log, the decisions are the stages'.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Sequence
from typing import Any

from events.consolidations import DEFAULT_MAX_CALLS, MAX_MAX_CALLS
from events.forgetting import MAX_REASON_CHARS
from events.memories import MEMORY_TYPES
from memstream.cli.settings import settings_with_a_database

DEFAULT_WAIT_SECONDS = 300.0


def register(commands: Any) -> None:
    """Add `consolidate` to the `memstream` parser's subcommands."""
    consolidate = commands.add_parser(
        "consolidate", help="merge a user's duplicate memories, supersede contradicting ones"
    )
    consolidate.add_argument("--user", required=True, help="whose memories")
    consolidate.add_argument(
        "--types",
        nargs="+",
        metavar="TYPE",
        help=f"the memory types: {', '.join(MEMORY_TYPES)} or a declared custom type "
        "(default: every enabled type)",
    )
    consolidate.add_argument(
        "--max-calls",
        type=int,
        default=DEFAULT_MAX_CALLS,
        help=f"LLM calls each type's run may make (default {DEFAULT_MAX_CALLS})",
    )
    consolidate.add_argument(
        "--by", default=_operator(), help="who asks (kept; default: cli:<login name>)"
    )
    consolidate.add_argument("--reason", default="", help="why (kept)")
    consolidate.add_argument("--wait", action="store_true", help="wait for the runs, print them")
    consolidate.add_argument("--json", action="store_true", help="with --wait: print JSON")
    consolidate.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        help=f"seconds --wait waits (default {DEFAULT_WAIT_SECONDS:.0f})",
    )
    consolidate.set_defaults(run=_consolidate)


def _operator() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "cli"


def refusal(args: argparse.Namespace) -> str | None:
    """Why the arguments are refused before anything is sent (None: they are fine)."""
    if not 0 <= args.max_calls <= MAX_MAX_CALLS:
        return f"--max-calls is between 0 and {MAX_MAX_CALLS}"
    if not args.by.strip():
        return "--by names who asks"
    if len(args.reason) > MAX_REASON_CHARS:
        return f"--reason is at most {MAX_REASON_CHARS} characters"
    return None


def summary(runs: Sequence[dict[str, Any]]) -> list[str]:
    """What each run did, one line per run and per merge or supersede."""
    lines: list[str] = []
    for run in runs:
        usage = run["usage"]
        lines.append(
            f"{run['memory_type']}: {run['clusters_found']} clusters, "
            f"{run['clusters_asked']} asked, {run['clusters_skipped']} skipped for the budget; "
            f"cost {usage['calls']} LLM calls, {usage['prompt_tokens']} prompt + "
            f"{usage['completion_tokens']} completion tokens"
        )
        for retired in run["retired"]:
            verb = "merged into" if retired["action"] == "merge" else "superseded by"
            lines.append(f"  {retired['memory_id']} {verb} {retired['into']}")
        if run.get("unchanged"):
            lines.append(f"  nothing changed: {run['unchanged']}")
    return lines


def _consolidate(args: argparse.Namespace) -> int:
    from memstream.sdk.client import MemoryClient

    if (refused := refusal(args)) is not None:
        print(f"memstream: {refused}", file=sys.stderr)
        return 2
    settings = settings_with_a_database()

    async def run() -> int:
        async with MemoryClient(settings) as client:
            consolidation_id = await client.consolidate(
                args.user,
                memory_types=args.types,
                max_calls=args.max_calls,
                requested_by=args.by,
                reason=args.reason,
            )
            print(consolidation_id, flush=True)
            if not args.wait:
                return 0
            try:
                runs = await client.wait_for_consolidation(
                    args.user, consolidation_id, args.timeout
                )
            except TimeoutError as exc:
                print(f"memstream: {exc}", file=sys.stderr)
                return 1
            if args.json:
                print(json.dumps(runs, indent=2, default=str))
            else:
                print("\n".join(summary([dict(run) for run in runs])))
            return 0

    return asyncio.run(run())
