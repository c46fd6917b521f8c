"""The answer LLM and the judge LLM: any OpenAI-compatible endpoint, every call counted.

The answer prompt gives the context (the retrieved memories, `build_context`'s block, or the
whole transcript for the full-context baseline) and the question and asks for a short answer, in
the spirit of the prompts the memory papers use (mem0's asks for "less than 5-6 words" and to
turn relative times into dates from the memories' timestamps). The judge prompt follows the
shape of mem0's J metric (`evaluation/metrics/llm_judge.py`): the question, the gold answer and
the generated answer; be generous about length and date formats; answer ``{"label": "CORRECT"}``
or ``{"label": "WRONG"}``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

import openai

ANSWER_SYSTEM = """\
You answer questions about two people, {speaker_a} and {speaker_b}, using only what you are \
given from their past conversations: memories taken from them, or the conversations \
themselves. "The user" is {speaker_a}. A date in brackets says when a memory was said or when \
a conversation took place: use it to turn relative times ("yesterday", "last week", "next \
month") into dates, and answer a "when" question with a date, month or year. Answer in as few \
words as possible (at most 6 words), with no explanation and no full sentence. If the context \
does not tell, give your best short guess."""

ANSWER_USER = """\
Context:
{context}

Question: {question}
Answer:"""
"""One prompt for every context (memstream's memories, `build_context`'s block, the whole
transcript), so a run's figures differ only by what the answerer was shown. The context comes
before the question: with llama.cpp's prompt cache, a whole transcript shown for every question
is read once."""

JUDGE_PROMPT = """\
Label a generated answer to a question as CORRECT or WRONG.

You get (1) a question one person asks about what another person told them in earlier \
conversations, (2) the gold answer, short, naming what the question is about, and (3) the \
generated answer.

Be generous: the generated answer may be much longer than the gold answer; it is CORRECT as \
long as it is about the same thing as the gold answer. For a question about time, the gold \
answer is a date, month or year; the generated answer is CORRECT if it refers to the same date \
or period, in whatever format ("7 May" and "May 7th" are the same date) or as a relative time \
that resolves to it.

Question: {question}
Gold answer: {gold}
Generated answer: {generated}

Reply with JSON only, the label under the key "label": {{"label": "CORRECT"}} or \
{{"label": "WRONG"}}."""


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible chat endpoint."""

    base_url: str
    model: str
    api_key: str = "not-needed"
    timeout: float = 300.0

    def describe(self) -> dict[str, str]:
        return {"base_url": self.base_url, "model": self.model}


@dataclass
class CountingChat:
    """Chat completions against one endpoint, counting calls, tokens and seconds."""

    endpoint: Endpoint
    max_tokens: int = 64
    calls: int = 0
    prompt_tokens: int = 0
    last_prompt_tokens: int = 0
    """The prompt tokens of the latest call (0 when the endpoint reports no usage)."""
    completion_tokens: int = 0
    seconds: float = 0.0
    _client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._client = openai.AsyncOpenAI(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.api_key or "not-needed",
            timeout=self.endpoint.timeout,
            max_retries=2,
        )

    async def complete(self, messages: list[dict[str, str]], *, json_object: bool = False) -> str:
        started = time.perf_counter()
        options: dict[str, Any] = (
            {"response_format": {"type": "json_object"}} if json_object else {}
        )
        response = await self._client.chat.completions.create(
            model=self.endpoint.model,
            messages=cast(Any, messages),
            temperature=0,
            max_tokens=self.max_tokens,
            **options,
        )
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.last_prompt_tokens = 0
        if response.usage is not None:
            self.last_prompt_tokens = response.usage.prompt_tokens
            self.prompt_tokens += response.usage.prompt_tokens
            self.completion_tokens += response.usage.completion_tokens
        return (response.choices[0].message.content or "").strip()

    def usage(self) -> dict[str, Any]:
        return {
            **self.endpoint.describe(),
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 2),
        }

    async def close(self) -> None:
        await self._client.close()


def answer_messages(
    speaker_a: str, speaker_b: str, context: str, question: str
) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": ANSWER_SYSTEM.format(speaker_a=speaker_a, speaker_b=speaker_b),
        },
        {
            "role": "user",
            "content": ANSWER_USER.format(context=context or "(none)", question=question),
        },
    ]


def judge_messages(question: str, gold: str, generated: str) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": JUDGE_PROMPT.format(question=question, gold=gold, generated=generated),
        }
    ]


def first_line(answer: str) -> str:
    """The answer's first non-empty line (small models sometimes add an explanation below)."""
    for line in answer.splitlines():
        if line.strip():
            return line.strip().removeprefix("Answer:").strip()
    return ""
