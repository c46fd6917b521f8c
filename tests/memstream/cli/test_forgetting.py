"""`memstream forget user` asks the operator to type the user id, and never confirms by itself."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memstream.cli.forgetting import confirmation_refused, operator
from tests.memstream.cli.test_main import memstream


def never_asked(prompt: str) -> str:
    raise AssertionError(f"asked {prompt!r}")


def test_yes_confirms_without_asking() -> None:
    assert confirmation_refused("bob", assume_yes=True, interactive=False, ask=never_asked) is None


def test_a_non_interactive_stdin_without_yes_is_refused_without_reading_it() -> None:
    refused = confirmation_refused("bob", assume_yes=False, interactive=False, ask=never_asked)
    assert refused is not None and "--yes" in refused


def test_typing_the_user_id_at_the_prompt_confirms() -> None:
    prompts: list[str] = []

    def typed(prompt: str) -> str:
        prompts.append(prompt)
        return "bob\n"

    assert confirmation_refused("bob", assume_yes=False, interactive=True, ask=typed) is None
    assert len(prompts) == 1 and "'bob'" in prompts[0]


@pytest.mark.parametrize("answer", ["", "y", "yes", "Bob", "bo", "bob2"])
def test_typing_anything_but_the_user_id_refuses(answer: str) -> None:
    refused = confirmation_refused(
        "bob", assume_yes=False, interactive=True, ask=lambda prompt: answer
    )
    assert refused == "not confirmed: nothing was forgotten"


def test_end_of_input_at_the_prompt_refuses() -> None:
    def closed(prompt: str) -> str:
        raise EOFError

    assert confirmation_refused("bob", assume_yes=False, interactive=True, ask=closed) is not None


def test_the_cli_names_its_operator() -> None:
    assert operator().startswith("cli:") and len(operator()) > len("cli:")


def test_forget_user_from_a_pipe_without_yes_refuses_before_connecting_anywhere() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memstream", "forget", "user", "bob"],
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"},
        input="bob\n",  # a pipe, even one holding the right answer, never confirms
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "pass --yes" in result.stderr and result.stdout == ""


def test_forget_commands_are_listed_with_their_arguments() -> None:
    result = memstream("forget", "session", "--help")
    assert result.returncode == 0
    assert "session_id" in result.stdout and "--reason" in result.stdout
    assert "--wait" in result.stdout
