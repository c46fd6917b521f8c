"""LoCoMo: memory quality, per question category, with the models named.

    python -m bench locomo [--quick] [--local-model small|large|none] [--locomo locomo10.json]

- always: the synthetic conversation (`bench/locomo/synthetic.json`, LoCoMo's format) through
  the running pipeline with the scripted LLM (`bench.locomo.scripted`: extraction answers are
  the sample's own observation facts, the answerer gives the gold answer only when the
  retrieved context holds it): the whole path — turns, window, extraction, projection, search,
  answering, judging, scoring — checked end to end. Its F1 measures the pipeline's plumbing,
  not a model.
- full profile with a local model: the synthetic conversation with the packaged model as
  extractor and answerer (no judge: a 1.5B model judging itself would say little), under the
  machine's model lock.
- with `--locomo PATH`: the real data set, extracted and answered by the configured endpoint
  (`OPENAI_BASE_URL`, `MEMSTREAM_LLM_MODEL`) or else the local model (never in CI; slow).

Figures are F1 per category and overall, baseline None (quality). Everything else — every
question, answer, retrieved memory, LLM calls, tokens and seconds — is in `raw`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.core import Aim, BenchContext, BrokerKind, Figure, SuiteResult
from bench.locomo.answering import CountingChat, Endpoint
from bench.locomo.dataset import SYNTHETIC, Sample, load
from bench.locomo.evaluate import Options, evaluate
from bench.locomo.harness import local_model, pipeline_on
from bench.locomo.scripted import script
from tests.support.scripted_llm import ScriptedLLM

LOCAL_CATCH_UP = 1_800.0
"""Seconds the local model gets to extract the three synthetic sessions: about 2 minutes on two
idle cores (1.5B model), many times that when the machine is shared."""


def _broker(context: BenchContext) -> BrokerKind:
    """One broker is enough for a quality figure: Tansu (quicker to start) when the run has it."""
    return "tansu" if "tansu" in context.brokers else context.brokers[0]


def _evaluate(
    context: BenchContext,
    samples: list[Sample],
    llm_environment: Mapping[str, str],
    answer: Endpoint,
    judge: Endpoint | None,
    name: str,
    timeout: float,
) -> dict[str, Any]:
    kind = _broker(context)
    with pipeline_on(
        bootstrap_servers=context.broker(kind).bootstrap_servers,
        flavour=kind,
        mongo_uri=context.mongo().uri,
        llm_environment=llm_environment,
        memory_types="semantic",
        log_dir=context.workdir / f"locomo-{name}",
    ) as settings:

        async def go() -> dict[str, Any]:
            answerer = CountingChat(answer)
            judging = CountingChat(judge, max_tokens=128) if judge else None
            try:
                return await evaluate(
                    settings, samples, answerer, judging, Options(catch_up_timeout=timeout)
                )
            finally:
                await answerer.close()
                if judging is not None:
                    await judging.close()

        report = asyncio.run(go())
    report["broker"] = kind
    return report


@contextmanager
def _scripted(samples: list[Sample]) -> Iterator[tuple[dict[str, str], Endpoint]]:
    with ScriptedLLM(default={"facts": []}) as llm:
        script(llm, samples)
        yield (
            {
                "OPENAI_BASE_URL": llm.base_url,
                "OPENAI_API_KEY": "test",
                "MEMSTREAM_LLM_MODEL": llm.model,
                "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
                "MEMSTREAM_EMBEDDING_MODEL": llm.embedding_model,
            },
            Endpoint(llm.base_url, llm.model, "test", 60.0),
        )


def figures(report: dict[str, Any], setting: str, note: str) -> list[Figure]:
    """F1 per category and overall, and prompt tokens per question, each beside the same
    model's figure from the whole transcript in the same run (when it was answered)."""
    full = report.get("scores_by_way", {}).get("full_context")
    rows = []
    for category, block in report["scores"].items():
        if block["f1"] is None:
            continue
        baseline = full.get(category) if full else None
        rows.append(
            Figure(
                "locomo",
                f"{setting}: {category} ({block['questions']} q)",
                "F1",
                round(block["f1"], 4),
                baseline=round(baseline["f1"], 4) if baseline else None,
                baseline_name="full context" if baseline else "",
                note=note,
            )
        )
    overall = report["scores"]["overall"]
    if full and overall.get("prompt_tokens_per_question"):
        rows.append(
            Figure(
                "locomo",
                f"{setting}: overall",
                "prompt tokens per question",
                round(overall["prompt_tokens_per_question"], 1),
                baseline=round(full["overall"]["prompt_tokens_per_question"], 1),
                baseline_name="full context",
                aim=Aim("<=", 0.25),
                note=note,
            )
        )
    if overall["j"] is not None:
        rows.append(Figure("locomo", f"{setting}: overall", "J", round(overall["j"], 4), note=note))
    return rows


def run(context: BenchContext) -> SuiteResult:
    synthetic = load(SYNTHETIC)
    raw: dict[str, Any] = {}
    result: list[Figure] = []

    with _scripted(synthetic) as (environment, endpoint):
        report = _evaluate(context, synthetic, environment, endpoint, endpoint, "scripted", 60)
    raw["synthetic_scripted"] = report
    result += figures(report, "synthetic, scripted LLM", "pipeline check, not a model's quality")

    size = context.options.get("local_model", "none")
    if not context.quick and size != "none":
        try:
            with local_model(size, context.workdir / "locomo-local-llm") as environment:
                answer = Endpoint(
                    environment["OPENAI_BASE_URL"], environment["MEMSTREAM_LLM_MODEL"], "local", 900
                )
                report = _evaluate(
                    context, synthetic, environment, answer, None, "local", LOCAL_CATCH_UP
                )
        except TimeoutError as error:  # the scripted figures stand; the JSON says what failed
            print(f"locomo: the local-model run did not finish: {error}", file=sys.stderr)
            raw["synthetic_local"] = {"model_size": size, "error": str(error)}
        else:
            raw["synthetic_local"] = report
            model = answer.model
            result += figures(report, f"synthetic, {model}", f"extractor and answerer: {model}")

    data = context.options.get("locomo")
    if data:
        samples = load(Path(data))
        if os.environ.get("OPENAI_BASE_URL") and os.environ.get("MEMSTREAM_LLM_MODEL"):
            environment = {
                name: os.environ[name]
                for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "MEMSTREAM_LLM_MODEL")
                if name in os.environ
            }
            answer = Endpoint(
                environment["OPENAI_BASE_URL"],
                environment["MEMSTREAM_LLM_MODEL"],
                environment.get("OPENAI_API_KEY", "not-needed"),
                900,
            )
            report = _evaluate(context, samples, environment, answer, None, "data", 3600)
        else:
            with local_model(
                size if size != "none" else "large", context.workdir / "locomo-data-llm"
            ) as environment:
                answer = Endpoint(
                    environment["OPENAI_BASE_URL"], environment["MEMSTREAM_LLM_MODEL"], "local", 900
                )
                report = _evaluate(context, samples, environment, answer, None, "data", 3600)
        raw["locomo10"] = report
        result += figures(
            report, f"LoCoMo, {answer.model}", f"extractor and answerer: {answer.model}"
        )
    return SuiteResult(result, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["locomo", *sys.argv[1:]]))
