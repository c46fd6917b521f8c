"""How the answer model reads `build_context`'s layout: a run's contexts asked again with their
dates, sections or past messages laid out otherwise (no pipeline: the contexts of a run's
private report, so every layout is asked about the same memories and messages).

    python -m bench.locomo.context_dates --data locomo10.zip --local large \
        --report runs/locomo-conv30.json --report runs/locomo-conv41.json \
        [--layouts as_built,said_after,...] \
        --out bench/results/locomo-context-dates-YYYY-MM-DD.json

A memory opens with the day it was said (``- [20 January 2023] The user lost his job on
19 January 2023.``): asked "When did he lose his job?", a small model may answer with the
bracket's day. Each question of the reports (their `memstream` way, `build_context`) is asked
again, with the same answer prompt and model, in each layout chosen with `--layouts` (the
first three by default):

* `as_built`: the context as the report holds it;
* `said_after`: each memory's day after its text, ``- text (said on 20 January 2023)``; past
  messages keep theirs in front, as a transcript's session heading does;
* `said_bracket`: ``- [said on 20 January 2023] text`` on every dated line;
* `past_first`: the past messages' section right after the profile, before the memories
  (as built, it comes last, nearest the question);
* `reply_to`: a past message said in answer to a question shows that question before it,
  ``- [25 May 2023] (Melanie: Any fun plans for the summer?) Caroline: Researching …``: the
  recall matches a message by the one before it, but shows the answer alone;
* `rebuilt`: the context made again by `handlers.context.context_block` within the run's
  `max_chars`, from the report's memories of the built-in types (5 of each at most, as
  `build_context` asks) and the `PAST_MESSAGES` (6) past messages `handlers.recall.recalled`
  finds in the conversation's sessions the run fed (keywords: with the run's rerank off, the
  same as `as_built`);
* `fewer_memories`: the same with 3 memories of each type and 8 past messages, so the past
  messages get more of the budget. Only the memories the report shows can be offered, so a
  layout given more room for memories than the run had cannot show more of them;
* `named`: `rebuilt` with the user's name (from the profile) written where a memory says
  "the user" (``The user's job`` → ``Jon's job``; "用户" likewise): in a conversation between
  two named people, is a memory misread as the other's?
* `past_only`: the profile and up to `PAST_ONLY_MESSAGES` (20) past messages, no memories, as
  the runner's `past_only` way asks: what the memories add over the user's own messages,
  recalled the same way, within the same budget.

conv-26 is refused (it is the conversation the LoCoMo figures report: nothing is chosen on it)
unless `--measure-reported` says the layouts were chosen on the others already.
The JSON holds scores only (LoCoMo's licence forbids redistributing its text).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from bench.locomo.answering import CountingChat, Endpoint, answer_messages, first_line
from bench.locomo.dataset import QA, Sample, first_sessions, load
from bench.locomo.harness import local_model
from bench.locomo.pipeline import PAST_ONLY_MESSAGES
from bench.locomo.recall_eval import past_messages
from bench.locomo.scoring import locomo_f1
from handlers.context import LABELS, ContextMemory, context_block
from handlers.extraction.dates import chinese_day, english_day
from handlers.recall import PAST_MESSAGES, recalled
from handlers.rendering import Language

REPORTED = "conv-26"
_DATED = re.compile(r"^- \[([^\]]+)\] (.*)$")
_PAST_HEADINGS = ("## From earlier conversations", "## 以往对话摘录")
_PROFILE_HEADINGS = ("## About the user", "## 关于用户")

Layout = Callable[[Sequence[str]], list[str]]
Rebuild = Callable[[Sequence[str], str], list[str]]
"""A layout that also reads the question (to recall past messages for it)."""


def as_built(lines: Sequence[str]) -> list[str]:
    return list(lines)


def _with_section(lines: Sequence[str]) -> Iterator[tuple[str, bool]]:
    """Each line, and whether it lies in the past messages' section."""
    past = False
    for line in lines:
        if line.startswith("## "):
            past = line.startswith(_PAST_HEADINGS)
        yield line, past


def said_after(lines: Sequence[str]) -> list[str]:
    """Each memory's day after its text; past messages and undated lines as they are."""
    laid_out: list[str] = []
    for line, past in _with_section(lines):
        dated = _DATED.match(line)
        laid_out.append(f"- {dated[2]} (said on {dated[1]})" if dated and not past else line)
    return laid_out


def said_bracket(lines: Sequence[str]) -> list[str]:
    """``said on`` inside every dated line's bracket."""
    laid_out: list[str] = []
    for line in lines:
        dated = _DATED.match(line)
        laid_out.append(f"- [said on {dated[1]}] {dated[2]}" if dated else line)
    return laid_out


def past_first(lines: Sequence[str]) -> list[str]:
    """The past messages' section moved to just after the profile's (first, if no profile)."""
    sections: list[list[str]] = []
    for line in lines:
        if line.startswith("## ") or not sections:
            sections.append([])
        sections[-1].append(line)
    past = [section for section in sections if section[0].startswith(_PAST_HEADINGS)]
    rest = [section for section in sections if not section[0].startswith(_PAST_HEADINGS)]
    at = 1 if rest and rest[0][0].startswith(_PROFILE_HEADINGS) else 0
    return [line for section in [*rest[:at], *past, *rest[at:]] for line in section]


_PAST_LINE = re.compile(r"^- (\[[^\]]+\] )?([^:]+): (.*)$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")  # noqa: RUF001 (Chinese punctuation)
QUESTION_CHARS = 150
"""A question shown before a reply is cut to this many characters (from its end)."""


def message_key(speaker: str, text: str) -> tuple[str, str]:
    """How a past message's line is found in the data: its speaker and its first 60 characters
    on one line (a shown message may be cut after them)."""
    return speaker, " ".join(text.split())[:60]


def questions_before(sample: Sample) -> dict[tuple[str, str], str]:
    """For each message of `sample` said in answer to another speaker's question, that question
    as ``Asker: last sentence`` — the last sentence of the message before, when it ends with a
    question mark."""
    found: dict[tuple[str, str], str] = {}
    for session in sample.sessions:
        for earlier, turn in itertools.pairwise(session.turns):
            sentences = [part for part in _SENTENCE_END.split(earlier.text.strip()) if part]
            last = sentences[-1] if sentences else ""
            if earlier.speaker != turn.speaker and last.endswith(("?", "？")):  # noqa: RUF001
                question = last[-QUESTION_CHARS:]
                found[message_key(turn.speaker, turn.content)] = f"{earlier.speaker}: {question}"
    return found


def reply_to(questions: Mapping[tuple[str, str], str]) -> Layout:
    """Each past message found in `questions` with its question in parentheses before it."""

    def layout(lines: Sequence[str]) -> list[str]:
        laid_out: list[str] = []
        for line, past in _with_section(lines):
            message = _PAST_LINE.match(line) if past else None
            asked = questions.get(message_key(message[2], message[3])) if message else None
            if message and asked:
                laid_out.append(f"- {message[1] or ''}({asked}) {message[2]}: {message[3]}")
            else:
                laid_out.append(line)
        return laid_out

    return layout


def day_of(shown: str) -> date | None:
    """The date a context line's bracket shows, if it is one: what `english_day` or
    `chinese_day` wrote (``4 April 2022``, ``2022年4月4日``), read back and written again the
    same."""
    for pattern, written in (("%d %B %Y", english_day), ("%Y年%m月%d日", chinese_day)):
        try:
            day = datetime.strptime(shown, pattern).date()
        except ValueError:
            continue
        if written(day) == shown:
            return day
    return None


def memories_shown(lines: Sequence[str]) -> tuple[Language, dict[str, str], list[ContextMemory]]:
    """What a built context shows of the user: its language (by its labels), the profile's
    lines (as fields; the name as ``name``) and its memories of the built-in types, each type's
    in the order shown (a custom type's heading is not known here: its lines are left out)."""
    language: Language = "zh" if any(line in LABELS["zh"].values() for line in lines) else "en"
    types = {label: key for key, label in LABELS[language].items()}
    profile: dict[str, str] = {}
    memories: list[ContextMemory] = []
    section = ""
    for line in lines:
        if line.startswith("## "):
            section = types.get(line, "")
            continue
        text = line.removeprefix("- ")
        if section == "profile":
            name = re.fullmatch(r"The user's name is (.+)\.|用户名叫(.+)", text)
            profile["name" if name else f"~{len(profile)}"] = (name[1] or name[2]) if name else text
        elif section and section not in ("past", "history"):
            dated = _DATED.match(line)
            day = day_of(dated[1]) if dated else None
            shown = dated[2] if dated and day else text
            memories.append(ContextMemory(section, shown, day))
    return language, profile, memories


_USER = re.compile(r"\b[Tt]he user(?P<own>'s?)?(?!\w)|用户")


def _naming(name: str) -> Callable[[re.Match[str]], str]:
    return lambda found: name + ("'s" if found["own"] else "")


def rebuilt(
    sample: Sample,
    per_type: int,
    past: int,
    max_chars: int,
    *,
    named: bool = False,
) -> Rebuild:
    """The context made again from its memories (`per_type` of each type at most) and the
    `past` messages of `sample` recalled for the question, within `max_chars`."""
    messages = [turned.message for turned in past_messages(sample)]

    def layout(lines: Sequence[str], question: str) -> list[str]:
        language, profile, memories = memories_shown(lines)
        if named and "name" in profile:
            memories = [
                ContextMemory(m.memory_type, _USER.sub(_naming(profile["name"]), m.text), m.said_on)
                for m in memories
            ]
        kept: list[ContextMemory] = []
        for memory in memories:
            if sum(1 for k in kept if k.memory_type == memory.memory_type) < per_type:
                kept.append(memory)
        block = context_block(
            profile=profile,
            memories=kept,
            history="",
            language=language,
            max_chars=max_chars,
            past_messages=recalled(question, messages, past),
        )
        return [line for line in block.splitlines() if line]

    return layout


def _lines_only(layout: Layout) -> Rebuild:
    return lambda lines, _question: layout(lines)


def layouts_for(sample: Sample, max_chars: int = 4_000) -> dict[str, Rebuild]:
    """Every layout, those that read the data bound to `sample` (its sessions the run fed) and
    to the run's `max_chars`."""
    return {
        "as_built": _lines_only(as_built),
        "said_after": _lines_only(said_after),
        "said_bracket": _lines_only(said_bracket),
        "past_first": _lines_only(past_first),
        "reply_to": _lines_only(reply_to(questions_before(sample))),
        "rebuilt": rebuilt(sample, 5, PAST_MESSAGES, max_chars),
        "fewer_memories": rebuilt(sample, 3, 8, max_chars),
        "past_only": rebuilt(sample, 0, PAST_ONLY_MESSAGES, max_chars),
        "named": rebuilt(sample, 5, PAST_MESSAGES, max_chars, named=True),
    }


LAYOUTS = (
    "as_built",
    "said_after",
    "said_bracket",
    "past_first",
    "reply_to",
    "rebuilt",
    "fewer_memories",
    "named",
    "past_only",
)


def questions_of(
    report: dict[str, Any], *, reported: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """(conversation, question) of every question the report answered from `build_context`;
    the reported conversation only when `reported` (to measure a layout once it is chosen)."""
    found = []
    for sample in report["samples"]:
        if sample["sample_id"] == REPORTED and not reported:
            raise SystemExit(f"{REPORTED} is the reported conversation: nothing is chosen on it")
        for question in sample["questions"]:
            if "memstream" in question and question["memstream"].get("context"):
                found.append((sample["sample_id"], question))
    return found


def summary(rows: Sequence[dict[str, Any]], layout: str) -> dict[str, Any]:
    by_category: dict[str, list[float]] = {}
    for row in rows:
        by_category.setdefault(str(row["category"]), []).append(row[layout])
    return {
        "questions": len(rows),
        "f1": round(statistics.fmean(row[layout] for row in rows), 4),
        "f1_by_category": {
            category: {"questions": len(f1s), "f1": round(statistics.fmean(f1s), 4)}
            for category, f1s in sorted(by_category.items())
        },
    }


async def asked_again(
    chat: CountingChat,
    samples: dict[str, Sample],
    reports: Sequence[dict[str, Any]],
    layouts: Sequence[str] = LAYOUTS,
    *,
    reported: bool = False,
) -> list[dict[str, Any]]:
    rows = []
    bound: dict[str, dict[str, Rebuild]] = {}
    for report in reports:
        fed = {
            s["sample_id"]: count
            for s, count in zip(report["samples"], report["sessions_per_conversation"], strict=True)
        }
        for sample_id, question in questions_of(report, reported=reported):
            sample = samples[sample_id]
            qa: QA = next(q for q in sample.qa if q.question == question["question"])
            row: dict[str, Any] = {"conversation": sample_id, "category": question["category"]}
            if sample_id not in bound:  # what the layouts read of the data: once per conversation
                max_chars = int(report["options"]["max_chars"])
                bound[sample_id] = layouts_for(first_sessions(sample, fed[sample_id]), max_chars)
            for name in layouts:
                lines = question["memstream"]["context"]
                context = "\n".join(bound[sample_id][name](lines, qa.question))
                messages = answer_messages(sample.speaker_a, sample.speaker_b, context, qa.question)
                row[name] = locomo_f1(first_line(await chat.complete(messages)), qa)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _layouts(value: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    if chosen and set(chosen) <= set(LAYOUTS):
        return chosen
    raise argparse.ArgumentTypeError(f"a comma list of {', '.join(LAYOUTS)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--report", type=Path, action="append", required=True)
    parser.add_argument("--local", choices=["small", "large"], default="large")
    parser.add_argument(
        "--layouts",
        type=_layouts,
        default=LAYOUTS[:3],
        help=f"a comma list of {', '.join(LAYOUTS)} (default: the first three)",
    )
    parser.add_argument(
        "--measure-reported",
        action="store_true",
        help=f"also ask about {REPORTED}: only to measure layouts already chosen on the others",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.report]
    samples = {sample.sample_id: sample for sample in load(args.data)}

    async def run(env: dict[str, str]) -> list[dict[str, Any]]:
        endpoint = Endpoint(env["OPENAI_BASE_URL"], env["MEMSTREAM_LLM_MODEL"], "local")
        chat = CountingChat(endpoint, max_tokens=64)
        try:
            return await asked_again(
                chat, samples, reports, args.layouts, reported=args.measure_reported
            )
        finally:
            await chat.close()

    with local_model(args.local, Path("/tmp/memstream-context-dates")) as env:
        rows = asyncio.run(run(env))
    layouts = {name: summary(rows, name) for name in args.layouts}
    result = {
        "command": " ".join(["python -m bench.locomo.context_dates", *(argv or sys.argv[1:])]),
        "conversations": sorted({row["conversation"] for row in rows}),
        "layouts": layouts,
        "questions": rows,
    }
    for name, value in layouts.items():
        print(f"{name:>13}: F1 {value['f1']:.3f} over {value['questions']} questions")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
