"""Does a request to the local LLM get the same answer whatever was asked before it?

    .venv/bin/python bench/repeatable_answers.py [--locomo /path/to/locomo10.zip --conversation
        conv-42] [--local large] [--modes cache,no-cache,repeatable] [--out FILE]

One server per mode, each started afresh with the packaged model (under the machine's llama
lock). Two prompts of the semantic extractor: P, of a conversation's first snapshot, and Q, of
its second -- with `--locomo`, the first two sessions of that LoCoMo conversation, each one
snapshot as the LoCoMo runner feeds them; without it, the first two labelled conversations of
`bench/extraction_eval/cases-semantic.json`. They are asked P, Q, P, P: on a fresh server,
then another prompt of the same kind, then P after it, then P right after itself -- at
temperature 0 in JSON mode with 1,024 tokens at most, as the stages ask.

Modes (the server's extra command line):

* ``cache``: `memstream.runtime.llm_choice.PROMPT_CACHE`, what `memstream up` runs;
* ``no-cache``: ``--logits_all false`` alone (llama-cpp-python still reuses the prefix the new
  prompt shares with the previous request's tokens);
* ``repeatable``: `memstream.runtime.llm_choice.REPEATABLE` (``llm.local_repeatable``: every
  prompt evaluated whole, from an empty context).

Reported per mode and answer: its characters, the facts it parses to (none when the token limit
cut its JSON), whether it is the first answer to P to the character, the prompt tokens llama.cpp
evaluated for it (from its log: a reused prefix is not evaluated again) and its seconds. No text
of the LoCoMo data is written (its licence forbids redistributing it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openai import OpenAI

from bench.llama_timings import LogCursor, llama_lock, parse_timings
from bench.machine import machine
from events.snapshots import SnapshotPromoted
from handlers.extraction.registry import extractor_for
from memstream.runtime.llm_choice import PROMPT_CACHE, REPEATABLE

MODES: dict[str, tuple[str, ...]] = {
    "cache": PROMPT_CACHE,
    "no-cache": ("--logits_all", "false"),
    "repeatable": REPEATABLE,
}
ORDER = ("P", "Q", "P", "P")
"""What is asked, in turn: P fresh, another prompt of its kind, P after it, P after itself."""


def snapshots(locomo: Path | None, conversation: str) -> list[SnapshotPromoted]:
    """The two snapshots P and Q are asked about."""
    if locomo is None:
        from bench.extraction_eval.run import DEFAULT_CASES, snapshot_for
        from bench.extraction_eval.scoring import parse_cases

        cases = parse_cases(json.loads(DEFAULT_CASES.read_text(encoding="utf-8")))
        return [snapshot_for(case) for case in cases[:2]]
    from bench.locomo.dataset import first_sessions, load
    from bench.locomo.extraction_probe import snapshots as session_snapshots

    found = [s for s in load(locomo) if s.sample_id == conversation]
    if not found:
        raise SystemExit(f"no conversation {conversation} in {locomo}")
    sample = first_sessions(found[0], 2)
    return [next(session_snapshots(sample, session, 0)) for session in sample.sessions]


def facts_in(answer: str) -> int | None:
    """How many facts the answer lists; None when it is not JSON (cut at the token limit)."""
    try:
        parsed = json.loads(answer)
    except ValueError:
        return None
    facts = parsed.get("facts") if isinstance(parsed, dict) else None
    return len(facts) if isinstance(facts, list) else None


def run_mode(mode: str, size: str, prompts: dict[str, Any], log_dir: Path) -> dict[str, Any]:
    """Ask `ORDER` of one fresh server started with `mode`'s command line."""
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import MODELS

    log_path = log_dir / f"llm-{mode}.log"
    with start_local_llm(MODELS[size], log_path=log_path, extra_args=MODES[mode]) as server:
        client = OpenAI(base_url=server.base_url, api_key="local", timeout=1_800)
        cursor = LogCursor(log_path)
        answers: list[dict[str, Any]] = []
        first: str | None = None
        for asked in ORDER:
            started = time.perf_counter()
            completion = client.chat.completions.create(
                model=server.model,
                messages=prompts[asked],
                temperature=0.0,
                max_tokens=1_024,
                response_format={"type": "json_object"},
            )
            seconds = time.perf_counter() - started
            text = completion.choices[0].message.content or ""
            if asked == "P" and first is None:
                first = text
            answers.append(
                {
                    "asked": asked,
                    "chars": len(text),
                    "facts": facts_in(text),
                    "same_as_first_p": text == first if asked == "P" else None,
                    "prompt_tokens": completion.usage.prompt_tokens if completion.usage else None,
                    "prompt_tokens_evaluated": parse_timings(cursor.read()).prompt_tokens,
                    "seconds": round(seconds, 2),
                }
            )
    repeats = [a["same_as_first_p"] for a in answers if a["asked"] == "P"][1:]
    return {"mode": mode, "args": list(MODES[mode]), "answers": answers, "p_repeated": all(repeats)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--locomo", type=Path, help="locomo10.zip (else the labelled cases)")
    parser.add_argument("--conversation", default="conv-42")
    parser.add_argument("--local", choices=["small", "large"], default="large")
    parser.add_argument("--modes", default="cache,no-cache,repeatable")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/memstream-repeatable"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    modes = [mode for mode in args.modes.split(",") if mode]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"--modes: unknown {', '.join(sorted(unknown))} (of {', '.join(MODES)})")
    first, second = snapshots(args.locomo, args.conversation)
    extractor = extractor_for("semantic")
    prompts = {"P": extractor.prompt(first), "Q": extractor.prompt(second)}
    args.log_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    with llama_lock():
        results = [run_mode(mode, args.local, prompts, args.log_dir) for mode in modes]
    report = {
        "command": "python bench/repeatable_answers.py " + " ".join(argv or sys.argv[1:]),
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "model": args.local,
        "prompts": "locomo " + args.conversation if args.locomo else "labelled cases 1 and 2",
        "order": list(ORDER),
        "modes": results,
    }
    for result in results:
        shown = [(a["asked"], a["facts"], a["same_as_first_p"]) for a in result["answers"]]
        print(f"{result['mode']:>10}: repeated {result['p_repeated']}; {shown}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
