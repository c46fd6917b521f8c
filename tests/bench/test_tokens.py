"""Token counting for the LLM-cost benchmark: the Qwen2.5 tokenizer with its chat template, and
the approximation used without it."""

from __future__ import annotations

import pytest

from bench.tokens import QwenTokens, WordTokens, load_token_counter
from tests.support.scripted_llm import ScriptedLLM


def test_word_tokens_counts_words_punctuation_and_each_chinese_character() -> None:
    counter = WordTokens()

    assert counter.completion_tokens("The user lives in Oslo.") == 6
    assert counter.completion_tokens("用户住在奥斯陆") == 7
    assert counter.prompt_tokens([{"role": "user", "content": "hi"}]) == 4 + 1 + 3


@pytest.fixture(scope="module")
def qwen() -> QwenTokens:
    counter = load_token_counter()
    if not isinstance(counter, QwenTokens):
        pytest.skip("the packaged model or llama-cpp-python is not installed")
    return counter


def test_qwen_prompt_is_rendered_with_the_models_chat_template(qwen: QwenTokens) -> None:
    rendered = qwen.render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])

    assert rendered == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_qwen_prompt_without_system_message_gets_the_templates_default_one(
    qwen: QwenTokens,
) -> None:
    rendered = qwen.render([{"role": "user", "content": "U"}])

    assert rendered.startswith("<|im_start|>system\nYou are Qwen")


def test_qwen_counts_role_markers_as_single_special_tokens(qwen: QwenTokens) -> None:
    one = qwen.prompt_tokens([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])

    # <|im_start|> system \n S <|im_end|> \n <|im_start|> user \n U <|im_end|> \n <|im_start|>
    # assistant \n: markers are one token each, not spelled out
    assert one < 20
    assert qwen.completion_tokens('{"facts": []}') < len('{"facts": []}')


def test_scripted_server_reports_and_keeps_the_counters_usage(qwen: QwenTokens) -> None:
    import openai

    with ScriptedLLM(default='{"facts": []}', token_counter=qwen) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="t", max_retries=0)
        messages = [{"role": "user", "content": "我住在奥斯陆"}]
        answer = client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]

        assert answer.usage is not None
        assert answer.usage.prompt_tokens == qwen.prompt_tokens(messages)
        assert answer.usage.completion_tokens == qwen.completion_tokens('{"facts": []}')
        assert [usage for _, usage in llm.chat_usage] == [
            answer.usage.model_dump(exclude_none=True)
        ]
