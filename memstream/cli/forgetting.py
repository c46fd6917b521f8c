"""The CLI's forgetting commands: `memstream forget memory|session|user` and `memstream erasures`.

Each `forget` writes one request to the log (through `MemoryClient`, as `cli:<operator>`) and
prints its id; `--wait` then waits for the receipt to be complete and prints it. Forgetting a
whole user cannot be undone and names nothing but a user id, so it asks the operator to type that
id again; `--yes` skips the question (scripts), and without `--yes` a standard input that is not
a terminal is refused rather than read, so a pipe or a CI job never confirms by accident.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memstream.config import load_settings

if TYPE_CHECKING:
    from memstream.sdk.results import ErasureReceipt

DEFAULT_WAIT_SECONDS = 120.0


def register(commands: Any) -> None:
    """Add `forget` and `erasures` to the `memstream` parser's subcommands."""
    forget = commands.add_parser("forget", help="forget a memory, a session or a whole user")
    targets = forget.add_subparsers(required=True, metavar="what")

    memory = targets.add_parser("memory", help="one memory, every version of it")
    memory.add_argument("user")
    memory.add_argument("memory_id")
    memory.set_defaults(run=_forget_memory)

    session = targets.add_parser(
        "session", help="a session's turns, snapshots and the memories it contributed to"
    )
    session.add_argument("user")
    session.add_argument("session_id")
    session.set_defaults(run=_forget_session)

    user = targets.add_parser("user", help="everything of a user (asks to confirm)")
    user.add_argument("user")
    user.add_argument("--yes", action="store_true", help="do not ask to confirm")
    user.set_defaults(run=_forget_user)

    for command in (memory, session, user):
        command.add_argument("--reason", default="", help="why (kept on the receipt)")
        command.add_argument(
            "--wait", action="store_true", help="wait for the receipt to be complete, print it"
        )
        command.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_WAIT_SECONDS,
            help=f"seconds --wait waits (default {DEFAULT_WAIT_SECONDS:.0f})",
        )

    erasures = commands.add_parser("erasures", help="a user's erasure receipts, as JSON")
    erasures.add_argument("user")
    erasures.set_defaults(run=_erasures)


def operator() -> str:
    """`requested_by` of the CLI's requests: `cli:<the operating-system user>`."""
    return f"cli:{getpass.getuser()}"


def confirmation_refused(
    user_id: str, *, assume_yes: bool, interactive: bool, ask: Callable[[str], str]
) -> str | None:
    """Why forgetting `user_id` is refused, or `None` when it is confirmed: by `--yes`, or by
    the operator typing the user id again at a terminal (`ask`)."""
    if assume_yes:
        return None
    if not interactive:
        return "standard input is not a terminal: pass --yes to forget a whole user"
    try:
        typed = ask(f"This forgets everything of user {user_id!r}. Type the user id to confirm: ")
    except EOFError:
        typed = ""
    if typed.strip() != user_id:
        return "not confirmed: nothing was forgotten"
    return None


def _forget_memory(args: argparse.Namespace) -> int:
    return _request(
        args, lambda client: client.forget(args.user, args.memory_id, reason=args.reason)
    )


def _forget_session(args: argparse.Namespace) -> int:
    return _request(
        args, lambda client: client.forget_session(args.user, args.session_id, reason=args.reason)
    )


def _forget_user(args: argparse.Namespace) -> int:
    refused = confirmation_refused(
        args.user, assume_yes=args.yes, interactive=sys.stdin.isatty(), ask=input
    )
    if refused is not None:
        print(f"memstream: {refused}", file=sys.stderr)
        return 1
    return _request(args, lambda client: client.forget_user(args.user, reason=args.reason))


def _request(args: argparse.Namespace, send: Callable[[Any], Awaitable[str]]) -> int:
    """Send one forget request, print its id, and with `--wait` its complete receipt."""
    from memstream.sdk.client import MemoryClient, MemoryNotFound

    settings = load_settings()

    async def run() -> int:
        async with MemoryClient(settings, requested_by=operator()) as client:
            try:
                request_id = await send(client)
            except MemoryNotFound as exc:
                print(f"memstream: {exc}", file=sys.stderr)
                return 1
            print(request_id, flush=True)
            if not args.wait:
                return 0
            try:
                receipt = await client.wait_for_erasure(request_id, args.timeout)
            except TimeoutError as exc:
                print(f"memstream: {exc}", file=sys.stderr)
                return 1
            print(json.dumps(receipt, indent=2, default=str))
            return 0

    return asyncio.run(run())


def _erasures(args: argparse.Namespace) -> int:
    from memstream.sdk.client import MemoryClient

    settings = load_settings()

    async def receipts() -> list[ErasureReceipt]:
        client = MemoryClient(settings)  # reads only: the producer is never started
        try:
            return await client.erasures(args.user)
        finally:
            await client.close()

    print(json.dumps(asyncio.run(receipts()), indent=2, default=str))
    return 0
