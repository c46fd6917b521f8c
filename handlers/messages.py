"""Normalising chat messages from OpenAI- and Anthropic-style input (docs/architecture.md, "Turns").

Pure: no I/O. The SDK calls :func:`normalize_messages` before anything is sent, so a bad
message is refused with :class:`InvalidMessageError` naming its index and the reason.

Decisions this module makes:

* Surrounding whitespace is not content: every content is stripped; whitespace-only is empty.
* Text parts / text blocks of one message are joined with ``"\\n"``.
* An assistant's tool calls (OpenAI ``tool_calls``, Anthropic ``tool_use`` blocks) are kept as
  text lines ``called tool <name> with <arguments>`` after the message's own text, so an
  assistant message holding only tool calls is neither refused nor lost.
* Anthropic ``tool_result`` blocks become separate ``role="tool"`` messages placed before the
  rest of their message: a tool's output is never the user's speech. Their tool name is looked
  up from the ``tool_use`` / ``tool_calls`` id seen earlier in the same batch.
* Non-text blocks (images, documents, thinking, ...) are skipped; a message left with no text at
  all is refused.
* A ``role="tool"`` message's ``name`` is the tool's name: it goes to ``tool_name``, never to
  ``name`` (a speaker).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from events.turns import (
    MAX_CONTENT_CHARS,
    MAX_TOOL_NAME_CHARS,
    ROLES,
    Role,
    speaker_name_problem,
)


class InvalidMessageError(ValueError):
    """A message the SDK refuses; the text names the message index and the reason."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"message {index}: {reason}")
        self.index = index
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class ChatMessage:
    """One normalised message.

    ``name`` is a speaker's name (the current user's on ``role="user"``, another human's on
    ``role="assistant"``); ``tool_name`` is only for ``role="tool"`` and is never a speaker.
    """

    role: Role
    content: str
    name: str | None = None
    tool_name: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; allowed roles: {', '.join(ROLES)}")
        if self.role == "tool" and self.name is not None:
            raise ValueError("a tool message's name is the tool's name: use tool_name")
        if self.role != "tool" and self.tool_name is not None:
            raise ValueError("tool_name is only for role='tool' messages")
        if self.name is not None and (problem := speaker_name_problem(self.name)):
            raise ValueError(problem)


@dataclass
class _Extracted:
    """What one message's content yields: its own text parts, tool results, skipped kinds."""

    texts: list[str] = field(default_factory=list)
    tool_results: list[ChatMessage] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def normalize_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_content_chars: int = MAX_CONTENT_CHARS,
) -> list[ChatMessage]:
    """Normalise OpenAI- or Anthropic-style messages, refusing malformed ones.

    Raises :class:`InvalidMessageError` (a ``ValueError``) for: a message that is not a mapping,
    an unknown role, missing content, a name or content of the wrong type, a bad speaker name
    (see :func:`speaker_name_problem`), content that is empty after joining, content with no
    text at all (only images ...), or content longer than ``max_content_chars``.
    One input message may yield several messages (Anthropic tool results, see module doc).
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
    tool_names: dict[str, str] = {}
    normalised: list[ChatMessage] = []
    for index, raw in enumerate(messages):
        for message in _normalize_one(index, raw, tool_names):
            _check_length(index, message, max_content_chars)
            _check_encodable(index, message)
            normalised.append(message)
    return normalised


def _normalize_one(index: int, raw: object, tool_names: dict[str, str]) -> list[ChatMessage]:
    if not isinstance(raw, Mapping):
        raise InvalidMessageError(
            index, f"expected a mapping with 'role' and 'content', got {type(raw).__name__}"
        )
    role = _role(index, raw)
    name = _optional_str(index, raw, "name")
    speaker = None if role == "tool" else _speaker_name(index, name)
    extracted = _extract_content(index, raw, tool_names)
    _extract_tool_calls(index, raw, extracted, tool_names)
    text = "\n".join(extracted.texts).strip()
    if not text and not extracted.tool_results:
        raise InvalidMessageError(index, _empty_reason(raw, extracted))
    if not text:
        return extracted.tool_results
    if role == "tool":
        tool_name = name.strip() if name and name.strip() else _tool_name_by_id(raw, tool_names)
        _check_tool_name(index, tool_name)
        own = ChatMessage(role="tool", content=text, tool_name=tool_name)
    else:
        own = ChatMessage(role=role, content=text, name=speaker)
    return [*extracted.tool_results, own]


def _role(index: int, message: Mapping[str, Any]) -> Role:
    role = message.get("role")
    if role is None:
        raise InvalidMessageError(index, f"missing 'role'; allowed roles: {', '.join(ROLES)}")
    for allowed in ROLES:
        if role == allowed:
            return allowed
    raise InvalidMessageError(index, f"unknown role {role!r}; allowed roles: {', '.join(ROLES)}")


def _optional_str(index: int, message: Mapping[str, Any], key: str) -> str | None:
    value = message.get(key)
    if value is None or isinstance(value, str):
        return value
    raise InvalidMessageError(index, f"'{key}' must be a string, got {type(value).__name__}")


def _speaker_name(index: int, name: str | None) -> str | None:
    """A speaker's name, stripped; ``None`` when absent. Refuses names that break rendering."""
    if name is None:
        return None
    if problem := speaker_name_problem(name):
        raise InvalidMessageError(index, problem)
    return name.strip()


def _extract_content(
    index: int, message: Mapping[str, Any], tool_names: dict[str, str]
) -> _Extracted:
    content = message.get("content")
    if content is None:
        return _Extracted()
    if isinstance(content, str):
        return _Extracted(texts=[content])
    if isinstance(content, list):
        return _extract_blocks(index, content, tool_names)
    raise InvalidMessageError(
        index,
        f"'content' must be a string or a list of content blocks, got {type(content).__name__}",
    )


def _extract_blocks(index: int, blocks: list[Any], tool_names: dict[str, str]) -> _Extracted:
    extracted = _Extracted()
    for position, block in enumerate(blocks):
        kind = _block_type(index, position, block)
        if kind == "text":
            extracted.texts.append(_block_text(index, position, block))
        elif kind == "tool_use":
            extracted.texts.append(_tool_use_text(index, position, block, tool_names))
        elif kind == "tool_result":
            result = _tool_result_message(index, position, block, tool_names)
            if result is not None:
                extracted.tool_results.append(result)
        else:
            extracted.skipped.append(kind)
    return extracted


def _block_type(index: int, position: int, block: object) -> str:
    if not isinstance(block, Mapping):
        raise InvalidMessageError(
            index, f"content block {position} must be a mapping, got {type(block).__name__}"
        )
    kind = block.get("type")
    if not isinstance(kind, str):
        raise InvalidMessageError(index, f"content block {position} has no string 'type'")
    return kind


def _block_text(index: int, position: int, block: Mapping[str, Any]) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise InvalidMessageError(index, f"text block {position} has no string 'text'")
    return text


def _tool_call_text(tool: str, arguments: str) -> str:
    """How a tool call reads in the conversation: ``called tool <name> with <arguments>``."""
    return f"called tool {tool} with {arguments or '{}'}"


def _arguments_text(index: int, arguments: object) -> str:
    if isinstance(arguments, str):
        return arguments.strip()
    try:
        return json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:  # not JSON-able, or keys of mixed types
        raise InvalidMessageError(index, f"tool call arguments are not JSON ({exc})") from exc


def _tool_use_text(
    index: int, position: int, block: Mapping[str, Any], tool_names: dict[str, str]
) -> str:
    tool = block.get("name")
    if not isinstance(tool, str) or not tool.strip():
        raise InvalidMessageError(index, f"tool_use block {position} has no tool 'name'")
    _remember_tool(block.get("id"), tool, tool_names)
    return _tool_call_text(tool, _arguments_text(index, block.get("input", {})))


def _tool_result_message(
    index: int, position: int, block: Mapping[str, Any], tool_names: dict[str, str]
) -> ChatMessage | None:
    """A ``tool_result`` block as a ``role="tool"`` message; ``None`` when it has no text."""
    content = block.get("content")
    if content is None or isinstance(content, str):
        text = (content or "").strip()
    elif isinstance(content, list):
        text = "\n".join(_extract_blocks(index, content, tool_names).texts).strip()
    else:
        raise InvalidMessageError(
            index, f"tool_result block {position} content must be a string or a list"
        )
    if not text:
        return None
    if block.get("is_error") is True:
        text = f"error: {text}"
    tool_use_id = block.get("tool_use_id")
    tool_name = tool_names.get(tool_use_id) if isinstance(tool_use_id, str) else None
    _check_tool_name(index, tool_name)
    return ChatMessage(role="tool", content=text, tool_name=tool_name)


def _extract_tool_calls(
    index: int, message: Mapping[str, Any], extracted: _Extracted, tool_names: dict[str, str]
) -> None:
    """Append an OpenAI assistant message's ``tool_calls`` as ``called tool ...`` lines."""
    calls = message.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise InvalidMessageError(index, "'tool_calls' must be a list")
    for position, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        tool = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(tool, str) or not tool.strip():
            raise InvalidMessageError(index, f"tool_calls[{position}] has no function name")
        _remember_tool(call.get("id"), tool, tool_names)
        arguments = _arguments_text(index, function.get("arguments"))
        extracted.texts.append(_tool_call_text(tool, arguments))


def _remember_tool(call_id: object, tool: str, tool_names: dict[str, str]) -> None:
    if isinstance(call_id, str):
        tool_names[call_id] = tool.strip()


def _tool_name_by_id(message: Mapping[str, Any], tool_names: dict[str, str]) -> str | None:
    call_id = message.get("tool_call_id")
    return tool_names.get(call_id) if isinstance(call_id, str) else None


def _empty_reason(message: Mapping[str, Any], extracted: _Extracted) -> str:
    if extracted.skipped:
        return f"content has no text (only {', '.join(sorted(set(extracted.skipped)))} blocks)"
    if message.get("content") is None:
        return "missing 'content'"
    return "content is empty"


def _check_length(index: int, message: ChatMessage, max_content_chars: int) -> None:
    if len(message.content) > max_content_chars:
        raise InvalidMessageError(
            index,
            f"content is {len(message.content)} characters, over the limit of {max_content_chars}",
        )


def _check_tool_name(index: int, tool_name: str | None) -> None:
    if tool_name is not None and len(tool_name) > MAX_TOOL_NAME_CHARS:
        raise InvalidMessageError(
            index,
            f"tool name is {len(tool_name)} characters, over the limit of {MAX_TOOL_NAME_CHARS}",
        )


def _check_encodable(index: int, message: ChatMessage) -> None:
    """Refuse text no UTF-8 record can carry (a lone surrogate, e.g. from a cut emoji)."""
    texts = (("content", message.content), ("name", message.name), ("tool", message.tool_name))
    for what, text in texts:
        try:
            (text or "").encode()
        except UnicodeEncodeError as exc:
            raise InvalidMessageError(index, f"{what} is not valid Unicode text ({exc})") from exc
