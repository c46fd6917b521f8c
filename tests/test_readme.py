"""The README's and the docs pages' examples run as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest

from memstream.runtime.worker import READY_MARKER
from tests.support.brokers import chosen_brokers
from tests.support.documentation import (
    PAGES,
    README,
    ROOT,
    documented_commands,
    documented_example,
)
from tests.support.pipeline import PipelineHarness, eventually


@pytest.mark.integration
def test_sdk_example_prints_the_memory_and_on_the_first_broker_every_documented_command_runs(
    pipeline_factory: Any, broker: Any, request: pytest.FixtureRequest
) -> None:
    """The SDK and agent examples on every broker; the pages' `memstream …` commands (the
    CLI over the SDK, the same on each broker) on the first one."""
    pipeline: PipelineHarness = pipeline_factory(every_stage=True)  # `forget … --wait`
    pipeline.llm.on(
        "Lisbon",
        {
            "facts": [
                {
                    "subject": "the user",
                    "statement": "The user lives in Lisbon.",
                    "owner": "user",
                    "category": "basic_info",
                    "profile_field": "location",
                },
            ]
        },
        scope="last_user",
    )
    result = subprocess.run(
        [sys.executable, "-c", documented_example("sdk")],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "the user | user | The user lives in Lisbon."

    agent = subprocess.run(
        [sys.executable, "-c", documented_example("agent")],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert agent.returncode == 0, agent.stderr
    first, *context = agent.stdout.splitlines()
    assert first.endswith(" The user lives in Lisbon.")
    assert context[:2] == ["## About the user", "- The user's name is Tim."]
    assert "- The user lives in Lisbon." in context
    assert sum(map(len, context)) + len(context) - 1 <= 600

    if broker.flavour != chosen_brokers(request.config)[0]:
        return
    # `replay --from-collections` needs a settled read model: the projector applies the turns and
    # snapshots topics independently, so a snapshot can be projected before its turns.
    eventually(
        lambda: unprojected_turns(pipeline),
        lambda missing: not missing,
        what="every snapshot's turns in the turns collection",
    )
    database = pipeline.settings.mongodb.database
    for line in documented_commands():
        command = shlex.split(line.split("#")[0].replace("--follow", ""))
        for flag in ("--into", "--against"):  # the test's own databases, not "rebuilt"
            if flag in command:
                at = command.index(flag) + 1
                command[at] = f"{database}_{command[at]}"
        argv = [sys.executable, "-m", "memstream", *command[1:]]
        environment = {**os.environ, **pipeline.environment}
        if command[1] == "worker":  # runs until stopped: it must get ready and stop cleanly
            assert_worker_gets_ready_and_stops(argv, environment, line)
            continue
        run = subprocess.run(argv, env=environment, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, f"{line}: {run.stdout}{run.stderr}"


@pytest.mark.integration
def test_the_rollback_example_restores_version_one_and_history_says_who_and_why(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    bees = "The user keeps bees in a small wooden hive behind the old family house."
    wasps = "The user keeps wasps in a small wooden hive behind the old family house."
    pipeline.llm.on(
        f"NEW: {wasps}", {"contradicts": 1, "action": "UPDATE", "existing": 1}, scope="last_user"
    )
    pipeline.save("tim", "semantic", bees)
    eventually(lambda: pipeline.memories(user_id="tim"), lambda m: len(m) == 1, what="v1")
    pipeline.save("tim", "semantic", wasps)
    eventually(lambda: pipeline.memories(user_id="tim"), lambda m: len(m) == 2, what="v2")
    result = subprocess.run(
        [sys.executable, "-c", documented_example("rollback")],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "restored as version 3",
        f"1 {bees} None",
        f"2 {wasps} None",
        f"3 {bees} ('ops:alice', 'the update was wrong')",
    ]


@pytest.mark.integration
def test_the_consolidation_example_merges_two_alike_memories(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        MEMSTREAM_REINFORCE_THRESHOLD="0.97",
        MEMSTREAM_ASK_THRESHOLD="0.9",
        MEMSTREAM_CONSOLIDATE_THRESHOLD="0.75",
    )
    rex, again = "The user has a dog named Rex.", "The user owns a dog named Rex."
    pipeline.llm.on("MEMORIES:", {"action": "MERGE", "keep": 1, "text": rex, "reason": "same"})
    pipeline.save("tim", "semantic", rex)
    pipeline.save("tim", "semantic", again)
    saved = eventually(lambda: pipeline.memories(user_id="tim"), lambda m: len(m) == 2, what="2")
    ids = {m["text"]: m["memory_id"] for m in saved}
    result = subprocess.run(
        [sys.executable, "-c", documented_example("consolidate")],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    first, merged, left = result.stdout.splitlines()
    assert first == "semantic 1 cluster, 1 call"
    assert merged == f"merge {ids[rex]} into {ids[again]}"  # listed newest first: 1 is again
    assert left == f"[{rex!r}]"


@pytest.mark.integration
def test_the_custom_type_example_finds_a_misconception_searches_it_and_gives_it_a_section(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        config=documented_example("custom-types-config", "yaml"),
        MEMSTREAM_ENABLED_EXTRACTIONS="semantic,episodic,misconception",
    )
    believed = {
        "text": "The user believes heavier objects fall faster.",
        "topic": "gravity",
        "correction": "Without air resistance all objects fall at the same rate.",
        "severity": "major",
    }
    pipeline.llm.on('You extract "misconception" memories', {"memories": [believed]})
    pipeline.llm.on("You extract facts", {"facts": []})
    pipeline.llm.on("You write the episodes", {"episodes": []})
    result = subprocess.run(
        [sys.executable, "-c", documented_example("custom-types")],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    found, headings = result.stdout.splitlines()
    attributes = {key: value for key, value in believed.items() if key != "text"}
    assert found == f"{believed['text']} {attributes}"
    assert headings == "['## Misconceptions']"
    (request,) = [r for r in pipeline.llm.chat_requests if "misconception" in str(r["messages"])]
    assert "The moon makes its own light" in request["messages"][0]["content"]  # the example


def assert_worker_gets_ready_and_stops(
    argv: list[str], environment: dict[str, str], line: str
) -> None:
    worker = subprocess.Popen(
        argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert worker.stderr is not None
    seen: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert worker.stderr is not None
        for text in worker.stderr:
            seen.append(text)
            if READY_MARKER in text:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(180), f"{line}: never ready: {''.join(seen)[-2000:]}"
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            code = worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            code = worker.wait()
    assert code == 0, f"{line}: exit {code} after SIGTERM: {''.join(seen)[-2000:]}"


def unprojected_turns(pipeline: PipelineHarness) -> set[str]:
    named = {t for s in pipeline.snapshots() for t in s.get("turn_ids", [])}
    projected = {t["_id"] for t in pipeline.db["turns"].find({}, {"_id": 1})}
    return named - projected


def test_the_promote_flow_output_is_what_the_committed_run_printed() -> None:
    """The README's output of `reextract`, `compare` and `promote` with the packaged models is
    copied from `bench/promote_flow.json` (`python -m bench.promote_flow`), line for line."""
    printed = {
        line
        for step in json.loads((ROOT / "bench" / "promote_flow.json").read_text())["steps"]
        for line in step["stdout"].splitlines()
    }
    shown = documented_example("promote-flow", "text").splitlines()
    assert len(shown) >= 8
    assert [line for line in shown if line != "..." and line not in printed] == []


def test_the_scripts_the_pages_name_exist() -> None:
    for page in PAGES:
        for script in re.findall(r"bash (scripts/\S+\.sh)", page.read_text(encoding="utf-8")):
            assert (ROOT / script).is_file(), f"{page.name}: {script}"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci, ".ci/run must run the README's test command"


def test_the_documented_locomo_command_is_the_runners() -> None:
    """The LoCoMo command in docs/benchmarks.md parses as written (running it needs the data set,
    which is never shipped; tests/bench/test_locomo_pipeline.py runs the same code)."""
    from bench.locomo.run import build_parser

    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    match = re.search(r"python -m bench\.locomo\.run (.*?)\n```", text, re.DOTALL)
    assert match is not None
    args = build_parser().parse_args(match[1].replace("\\\n", " ").split())
    assert (args.only, args.sessions, args.types) == ("conv-26", 4, "semantic,episodic")
    assert args.embedded and not args.no_full_context
    assert args.context == ("build_context", "memories_only", "search")
    assert args.max_chars == 2400


def test_the_readme_stays_short_and_links_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in text, f"the README does not link {page.name}"


def test_every_link_between_the_pages_leads_to_a_file_and_heading() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+\.md|[^)#\s]*\.md#[^)\s]+)\)", text):
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve()
            assert linked.is_file(), f"{page.name} links {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                slugs = {
                    re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings
                }
                assert anchor in slugs, f"{page.name} links {target}: no such heading"
