"""A candidate batched reconciliation prompt, measured before any is proposed to the handler.

`handlers.reconcile_prompt.Batch` (reconcile-batch-1) numbers the candidates of every question in
one shared list and tells each lettered new memory which numbers are its own. Here each question
is shown as the single prompt shows it, one after the other: its letter and NEW memory, then its
own EXISTING memories numbered from 1 (no shared numbering). The answer is one short decision
per letter, ``{"A": {"new_info": …, "contradicts": …, "action": …, "existing": …}, "B": …}``,
each read by `handlers.reconcile_prompt.parse` against its own question's candidates (the same
strict parser and self-contradiction rule as one question alone). An invalid decision is asked again
with the reason, as `handlers.reconcile_prompt.ask_all` does; only the decisions still missing
are taken from a retry; a question with none after the last attempt is ADDed by the caller.

The system prompt is a file (``--batch-system-prompt``, default `DEFAULT_PROMPT_FILE`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from handlers.extraction.base import DEFAULT_MAX_ANSWER_BYTES, InvalidExtraction
from handlers.extraction.json_answer import load_object
from handlers.ports import ChatAnswer, ChatModel
from handlers.reconcile import Answer, Question
from handlers.reconcile_prompt import LETTERS, parse

log = logging.getLogger(__name__)

DEFAULT_PROMPT_FILE = Path(__file__).with_name("prompt-batch-inline-1.txt")
VERSION = "reconcile-batch-inline-1"


@dataclass(frozen=True)
class InlineBatch:
    """Several questions as one call shows them, each with its own candidates under it."""

    questions: tuple[Question, ...]
    system_prompt: str

    def __post_init__(self) -> None:
        if not 1 <= len(self.questions) <= len(LETTERS):
            raise ValueError(f"a batch holds 1 to {len(LETTERS)} questions")

    def user_message(self) -> str:
        blocks = []
        for letter, question in zip(LETTERS, self.questions, strict=False):
            listed = "\n".join(
                f"{n}. {option.memory.content.text}" for n, option in enumerate(question.options, 1)
            )
            blocks.append(f"{letter}. NEW: {question.new.content.text}\nEXISTING:\n{listed}")
        return "\n\n".join(blocks) + "\nAnswer with the JSON."

    def messages(self) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.user_message()},
        ]

    def parse(self, text: str) -> dict[int, Answer | InvalidExtraction]:
        """Each question's decision in `text` (by its index), or why it has none; the whole
        answer is `InvalidExtraction` when it is not a JSON object."""
        answer = load_object(text)
        found: dict[int, Answer | InvalidExtraction] = {}
        for index, question in enumerate(self.questions):
            item = answer.get(LETTERS[index], answer.get(LETTERS[index].lower()))
            if not isinstance(item, dict):
                found[index] = InvalidExtraction("no decision was given")
                continue
            try:
                found[index] = parse(json.dumps(item), question.options)
            except InvalidExtraction as exc:
                found[index] = exc
        return found


async def ask_inline(
    llm: ChatModel,
    questions: Sequence[Question],
    *,
    attempts: int,
    system_prompt: str,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> tuple[list[Answer | None], list[ChatAnswer]]:
    """The answers to `questions` asked in one call (retried for the invalid ones), in order."""
    batch = InlineBatch(tuple(questions), system_prompt)
    messages = batch.messages()
    settled: dict[int, Answer] = {}
    answers: list[ChatAnswer] = []
    for _ in range(attempts):
        answer = await llm.complete_json(messages)
        answers.append(answer)
        size = len(answer.text.encode())
        try:
            if size > max_answer_bytes:
                raise InvalidExtraction(f"the answer is {size} bytes, over {max_answer_bytes}")
            found = batch.parse(answer.text)
        except InvalidExtraction as exc:
            problem = str(exc)
        else:
            for index, decision in found.items():
                if index not in settled and isinstance(decision, Answer):
                    settled[index] = decision
            wrong = [
                f"{LETTERS[index]}: {decision}"
                for index, decision in sorted(found.items())
                if index not in settled and isinstance(decision, InvalidExtraction)
            ]
            if not wrong:
                break
            problem = "; ".join(wrong)
        log.info("reconcile answer refused: %s", problem)
        messages = [
            *batch.messages(),
            {"role": "assistant", "content": answer.text[:4_000]},
            {
                "role": "user",
                "content": f"That answer was invalid: {problem}. Answer again with every decision.",
            },
        ]
    return [settled.get(index) for index in range(len(questions))], answers
