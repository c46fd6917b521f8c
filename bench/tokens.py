"""Counting tokens as the packaged local model would: Qwen2.5's tokenizer and chat template.

`QwenTokens` loads only the vocabulary of the packaged GGUF file (``llama_cpp.Llama(...,
vocab_only=True)``, half a second, no weights) and renders a chat request with the model's own
Jinja chat template, exactly what llama.cpp's server tokenizes: system prompt, role markers and
the assistant's opening included. Completion tokens are the answer's text tokenized (the end
token the model emits after it is not counted). Both local models (0.5B, 1.5B) share the
tokenizer. When llama-cpp-python or the model is missing, `load_token_counter` falls back to
`WordTokens`, a documented approximation (words and CJK characters), and says so.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

log = logging.getLogger(__name__)


class TokenCounter(Protocol):
    name: str

    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int: ...

    def completion_tokens(self, text: str) -> int: ...


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


class QwenTokens:
    """Token counts of the packaged Qwen2.5 GGUF model's tokenizer (thread-safe)."""

    def __init__(self, model_path: str) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._llama = Llama(model_path=model_path, vocab_only=True, verbose=False)
        template = str(self._llama.metadata["tokenizer.chat_template"])
        self._format = Jinja2ChatFormatter(template, eos_token="<|im_end|>", bos_token="")
        self._lock = threading.Lock()
        self.name = f"Qwen2.5 tokenizer and chat template ({model_path.rsplit('/', 1)[-1]})"

    def tokens(self, text: str, *, special: bool = False) -> int:
        with self._lock:
            return len(self._llama.tokenize(text.encode(), add_bos=False, special=special))

    def render(self, messages: Sequence[Mapping[str, Any]]) -> str:
        plain = [
            {"role": m.get("role", "user"), "content": _text(m.get("content"))} for m in messages
        ]
        return str(self._format(messages=cast(Any, plain)).prompt)

    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return self.tokens(self.render(messages), special=True)

    def completion_tokens(self, text: str) -> int:
        return self.tokens(text)


_WORDISH = re.compile(r"[\u3400-\u9fff]|[^\W\d_]+|\d+|[^\w\s]", re.UNICODE)


class WordTokens:
    """Approximation: one token per word, number, punctuation mark or CJK character, plus four
    per message for the role markers. Used only when the real tokenizer cannot be loaded."""

    name = "approximation: words, numbers, punctuation and CJK characters"

    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return sum(4 + self.completion_tokens(_text(m.get("content"))) for m in messages) + 3

    def completion_tokens(self, text: str) -> int:
        return len(_WORDISH.findall(text))


def load_token_counter() -> TokenCounter:
    """`QwenTokens` over the packaged small (else large) model; `WordTokens` if neither can be
    had offline."""
    try:
        from memstream.runtime.local.llm import llama_cpp_available
        from memstream.runtime.local.weights import LARGE_MODEL, SMALL_MODEL, resolve_model

        if not llama_cpp_available():
            raise RuntimeError("llama-cpp-python is not installed")
        errors = []
        for spec in (SMALL_MODEL, LARGE_MODEL):
            try:
                path, _ = resolve_model(spec)
                return QwenTokens(str(path))
            except Exception as error:  # a missing extra: try the other model
                errors.append(str(error))
        raise RuntimeError("; ".join(errors))
    except Exception as error:
        log.warning("counting tokens approximately: %s", error)
        return WordTokens()
