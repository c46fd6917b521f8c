"""The LoCoMo runner end to end on a real pipeline with the scripted LLM: the synthetic
conversation's sessions go through the window and extraction with their own dates, every
non-adversarial question is answered from search and scored, and the judge is asked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench.locomo.answering import CountingChat, Endpoint
from bench.locomo.dataset import SYNTHETIC, load
from bench.locomo.evaluate import Options, evaluate, public_report
from bench.locomo.harness import pipeline_on
from bench.locomo.pipeline import PAST_ONLY_MESSAGES, ContextMode, retrieve, turn_time
from bench.locomo.scripted import script
from handlers.recall import PAST_MESSAGES
from memstream.config import load_settings
from tests.support.brokers import only_on_the_first_broker
from tests.support.scripted_llm import ScriptedLLM


def test_synthetic_conversation_is_answered_from_the_pipeline_and_scored(
    broker: Any, mongo: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    only_on_the_first_broker(
        request.config, broker.flavour, "the benchmark's code is the same on every broker"
    )
    samples = load(SYNTHETIC)
    with ScriptedLLM(default={"facts": []}) as llm:
        script(llm, samples)
        environment = {
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "MEMSTREAM_LLM_MODEL": llm.model,
            "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
            "MEMSTREAM_EMBEDDING_MODEL": llm.embedding_model,
        }
        endpoint = Endpoint(llm.base_url, llm.model, "test", 60.0)
        with pipeline_on(
            bootstrap_servers=broker.bootstrap_servers,
            flavour=broker.flavour,
            mongo_uri=mongo.uri,
            llm_environment=environment,
            memory_types="semantic",
            log_dir=tmp_path,
        ) as settings:

            async def go() -> dict[str, Any]:
                answerer, judge = CountingChat(endpoint), CountingChat(endpoint)
                try:
                    return await evaluate(
                        settings,
                        samples,
                        answerer,
                        judge,
                        Options(catch_up_timeout=90, context="search", also=("build_context",)),
                    )
                finally:
                    await answerer.close()
                    await judge.close()

            report = asyncio.run(go())

    (sample,) = report["samples"]
    progress = sample["extraction"]["progress"]
    # One snapshot per LoCoMo session, promoted by its flush, every turn in one.
    assert progress["snapshots"] == 3 and progress["turns_in_snapshots"] == sample["turns"] == 18
    assert progress["failures"] == 0 and sample["memories"] > 0
    assert sample["questions_excluded_adversarial"] == 2
    assert len(sample["questions"]) == 9
    # Every question answered three times (memstream's search results and its build_context
    # block from the same memories, the whole transcript), every answer judged.
    assert report["ways"] == ["memstream", "memstream:build_context", "full_context"]
    for way in report["ways"]:
        assert report["answer_llm"][way]["calls"] == 9
    assert report["judge_llm"]["calls"] == 27
    assert set(report["comparison_by_way"]) == {"memstream", "memstream:build_context"}
    assert report["comparison_by_way"]["memstream"] == report["comparison"]
    block = sample["questions"][0]["memstream:build_context"]["context"]
    assert block != sample["questions"][0]["memstream"]["context"]
    assert report["extraction"]["calls"] == 3  # one semantic extraction per session
    # The memories carry the date their session took place, and the answerer sees it.
    marathon = next(q for q in sample["questions"] if "marathon" in q["question"])
    assert any(line.startswith("[2 April 2024] ") for line in marathon["memstream"]["context"])
    assert marathon["memstream"]["f1"] == 1.0
    assert marathon["memstream"]["gold_in_context"] == 1.0
    scores = report["scores"]
    assert scores["single-hop"]["f1"] == 1.0
    assert scores["multi-hop"]["f1"] == 1.0
    # The scripted answerer finds no "yes" in the context of the open-domain question.
    assert scores["open-domain"]["f1"] == 0.0
    assert scores["overall"]["questions"] == 9
    assert scores["overall"]["judged"] == 9
    assert scores["overall"]["j"] == scores["overall"]["f1"] == 8 / 9
    # The baseline of the same run: the whole transcript holds more words than the memories.
    full = report["scores_by_way"]["full_context"]["overall"]
    assert full["questions"] == 9 and full["judged"] == 9
    assert full["prompt_tokens_per_question"] > scores["overall"]["prompt_tokens_per_question"]
    overall = next(row for row in report["comparison"] if row["category"] == "overall")
    assert overall["memstream_f1"] == 8 / 9 and overall["full_context_f1"] == full["f1"]
    assert overall["prompt_tokens_ratio"] < 1
    # What may be committed keeps the scores and none of the data set's text.
    public = json.dumps(public_report(report))
    assert marathon["question"] not in public and marathon["gold"] not in public
    assert public_report(report)["scores"] == report["scores"]


def test_full_context_only_needs_no_pipeline() -> None:
    samples = load(SYNTHETIC)
    with ScriptedLLM(default={"facts": []}) as llm:
        script(llm, samples)
        endpoint = Endpoint(llm.base_url, llm.model, "test", 60.0)

        async def go() -> dict[str, Any]:
            answerer = CountingChat(endpoint)
            try:
                return await evaluate(
                    load_settings(environ={}), samples, answerer, None, Options(context="full")
                )
            finally:
                await answerer.close()

        report = asyncio.run(go())
    assert report["ways"] == ["full_context"] and report["comparison"] == []
    assert report["answer_llm"]["full_context"]["calls"] == 9
    (sample,) = report["samples"]
    assert "memories" not in sample
    # Every gold answer of the synthetic sample is in its transcript, so the script answers it.
    assert all(q["full_context"]["gold_in_context"] == 1.0 for q in sample["questions"])


class _ContextRecorder:
    """A client whose `build_context` records what it was asked for."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def build_context(self, user_id: str, query: str, **options: Any) -> str:
        self.asked.append(options)
        return "## About the user\n- The user's name is Jon."


@pytest.mark.parametrize(
    ("mode", "per_type", "past"),
    [
        ("build_context", 5, PAST_MESSAGES),
        ("memories_only", 5, 0),
        ("past_only", 0, PAST_ONLY_MESSAGES),
    ],
)
def test_each_way_asks_build_context_for_its_memories_and_past_messages(
    mode: ContextMode, per_type: int, past: int
) -> None:
    client = _ContextRecorder()
    asyncio.run(retrieve(client, "jon", "Job?", mode=mode, top_k=20, max_chars=2_400))  # type: ignore[arg-type]
    assert client.asked == [{"max_chars": 2_400, "per_type": per_type, "past_messages": past}]


def test_a_sessions_turns_are_recorded_a_millisecond_apart_on_its_day() -> None:
    session = load(SYNTHETIC)[0].sessions[0]
    times = [turn_time(session, index) for index in range(len(session.turns))]
    assert times[0] == session.at
    assert times == sorted(set(times))
    assert {time.date() for time in times} == {session.at.date()}
