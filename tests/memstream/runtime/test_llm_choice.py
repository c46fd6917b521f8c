"""What `up` tells its workers about the local LLM server it started."""

from __future__ import annotations

from memstream.runtime.llm_choice import PROMPT_CACHE, local_llm_worker_environment


def test_the_workers_keep_one_call_in_flight_to_a_local_model_and_wait_for_it() -> None:
    environment = local_llm_worker_environment("http://127.0.0.1:1234/v1", "qwen")
    assert environment == {
        "OPENAI_BASE_URL": "http://127.0.0.1:1234/v1",
        "OPENAI_API_KEY": "local",
        "MEMSTREAM_LLM_MODEL": "qwen",
        "MEMSTREAM_LLM_TIMEOUT": "900",
        "MEMSTREAM_LLM_MAX_IN_FLIGHT": "1",
    }


def test_the_local_server_computes_no_prompt_logits_and_bounds_its_cache_at_384_mib() -> None:
    arguments = dict(zip(PROMPT_CACHE[::2], PROMPT_CACHE[1::2], strict=True))
    assert arguments == {
        "--logits_all": "false",
        "--cache": "true",
        "--cache_size": str(384 * 1024 * 1024),
    }


def test_the_local_server_gives_repeatable_answers_only_when_asked() -> None:
    from memstream.config import load_settings
    from memstream.runtime.llm_choice import REPEATABLE, local_server_args

    assert local_server_args(load_settings(environ={})) == PROMPT_CACHE
    asked = load_settings(environ={"MEMSTREAM_LOCAL_LLM_REPEATABLE": "true"})
    assert asked.llm.local_repeatable
    assert local_server_args(asked) == REPEATABLE
    assert "--repeatable" in REPEATABLE and "--cache" not in REPEATABLE
