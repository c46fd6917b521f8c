"""The conversation text format, for prompts and for raw history (L1_RAW).

See docs/architecture.md, "Speakers".

Pure: no I/O. The format, one message per speaker prefix::

    The user's name is Tim          (or: 用户名叫Tim — once, at the top, only if the user is named)
    [user]: I work at Stripe.
    [John]: I am a nurse in Berlin.
    [assistant]: Noted.
    second line of the assistant's message, kept as is

Labels (:func:`speaker_label`): ``role=user`` is always ``[user]`` (its name goes to the name
line); ``role=assistant`` with a name is that human, ``[John]``; without a name it is the AI,
``[assistant]``; ``system`` and ``tool`` keep their role (a tool's name is not rendered).

Reading back (:func:`parse_history`) splits only at a line that starts with a speaker prefix
``[label]: `` whose label is a role or a valid speaker name. A continuation line that would be
read as a prefix or a name line is escaped on rendering with one leading backslash (mboxrd-style:
a line that already starts with backslashes before such text gets one more), and unescaped on
parsing, so render → parse → render is exact for any content.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from events.turns import ROLES, speaker_name_problem
from handlers.messages import ChatMessage

Language = Literal["en", "zh"]
ZH_SHARE_THRESHOLD = 0.25
"""Share of CJK ideographs among CJK ideographs + Latin letters from which text counts as Chinese.

A Chinese word averages about 1.5 characters and an English word about 4.7 letters, so a text with
as many Chinese words as English words has about 24% CJK characters: at 25% the conversation is
Chinese once Chinese carries roughly half of the words. A Chinese sentence quoting an English
brand (``我在 Stripe 工作。``, 40%) is Chinese; an English one quoting a Chinese name
(``I work at 腾讯 now``, ~22%) is English.
"""
TRUNCATION_MARKER = "…"
_NAME_LINE_PREFIXES: dict[Language, str] = {"en": "The user's name is ", "zh": "用户名叫"}
_SPEAKER_PREFIX = re.compile(r"\[(?P<label>[^\[\]\n:]+)\]: ")
_NAME_LINE = re.compile(r"(?:The user's name is |用户名叫)(?P<name>.+)")


class ConflictingUserNamesError(ValueError):
    """The ``role=user`` messages carry different names: who the current user is is ambiguous."""


class HistoryFormatError(ValueError):
    """Raw history text that does not follow the rendered format."""


@dataclass(frozen=True)
class ParsedHistory:
    """Raw history read back: the current user's name (from the name line) and the messages."""

    user_name: str | None
    messages: list[ChatMessage]


def detect_language(texts: Iterable[str]) -> Language:
    """``"zh"`` when CJK ideographs are at least 25% of CJK ideographs + Latin letters, else en.

    Digits, punctuation and other scripts are not counted; text with neither is English.
    See :data:`ZH_SHARE_THRESHOLD` for why 25%.
    """
    cjk = latin = 0
    for text in texts:
        cjk += len(_CJK_IDEOGRAPH.findall(text))
        latin += len(_LATIN_LETTER.findall(text))
    return "zh" if cjk and cjk >= ZH_SHARE_THRESHOLD * (cjk + latin) else "en"


def has_chinese(text: str) -> bool:
    """Whether `text` holds at least one CJK ideograph (the characters `detect_language` counts)."""
    return _CJK_IDEOGRAPH.search(text) is not None


CJK_IDEOGRAPHS = (
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\u3400-\u4dbf"  # Extension A
    "\uf900-\ufaff"  # Compatibility Ideographs
    "\U00020000-\U0003134f"  # Extensions B-G
)
"""The CJK ideographs, as the inside of a regular expression's character class: what every
Chinese check of the handlers counts as Chinese."""
_CJK_IDEOGRAPH = re.compile(f"[{CJK_IDEOGRAPHS}]")
_LATIN_LETTER = re.compile("[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]")
"""ASCII letters, and the letters of Latin-1 Supplement and Latin Extended-A and B (U+00C0 to
U+024F but the multiplication and division signs)."""


def conversation_language(messages: Sequence[ChatMessage]) -> Language:
    """The language of the people talking: user and assistant content (system and tool text is
    machine text — prompts, JSON — and counts only when there is nothing else)."""
    spoken = [m.content for m in messages if m.role in ("user", "assistant")]
    return detect_language(spoken or [m.content for m in messages])


def current_user_name(messages: Iterable[ChatMessage]) -> str | None:
    """The name carried by the ``role=user`` messages, or ``None`` when none is named.

    Raises :class:`ConflictingUserNamesError` when they carry different names: the caller decides
    who the current user is, and two names would put one person's facts on another's profile.
    """
    names = list(dict.fromkeys(m.name for m in messages if m.role == "user" and m.name))
    if len(names) > 1:
        raise ConflictingUserNamesError(
            f"role=user messages name different users: {', '.join(names)}; "
            "one conversation has one current user"
        )
    return names[0] if names else None


def named_speakers(messages: Iterable[ChatMessage]) -> list[str]:
    """The other named humans (``role=assistant`` with a name), in order of first appearance."""
    return list(dict.fromkeys(m.name for m in messages if m.role == "assistant" and m.name))


def name_line(user_name: str, language: Language) -> str:
    """``The user's name is Tim`` (en) or ``用户名叫Tim`` (zh)."""
    return f"{_NAME_LINE_PREFIXES[language]}{user_name}"


def speaker_label(message: ChatMessage) -> str:
    """``user`` for the current user even when named; a named assistant's name (another human);
    ``assistant`` for the AI; ``system`` and ``tool`` for those roles."""
    if message.role == "assistant" and message.name:
        return message.name
    return message.role


def render_message(message: ChatMessage) -> str:
    """``[label]: first line`` followed by the continuation lines as they are (escaped only when
    they would read as a speaker prefix or a name line)."""
    first, *rest = message.content.split("\n")
    lines = [f"[{speaker_label(message)}]: {first}", *(_escape(line) for line in rest)]
    return "\n".join(lines)


def render_conversation(messages: Sequence[ChatMessage]) -> str:
    """The conversation in the rendered format, the user's name line once at the top.

    The name line's language is :func:`conversation_language`. Raises
    :class:`ConflictingUserNamesError` when user messages carry different names.
    """
    user_name = current_user_name(messages)
    lines = [render_message(m) for m in messages]
    if user_name:
        lines.insert(0, name_line(user_name, conversation_language(messages)))
    return "\n".join(lines)


def history_for_prompt(messages: Sequence[ChatMessage], *, max_chars_per_message: int) -> str:
    """History given to the LLM as context: rendered like :func:`render_conversation`, with every
    message except the current user's cut to ``max_chars_per_message`` characters (ending in
    ``…``); the user's messages are kept whole."""
    if max_chars_per_message < 1:
        raise ValueError("max_chars_per_message must be at least 1")
    shortened = [m if m.role == "user" else _truncated(m, max_chars_per_message) for m in messages]
    return render_conversation(shortened)


def _truncated(message: ChatMessage, limit: int) -> ChatMessage:
    if len(message.content) <= limit:
        return message
    kept = message.content[: limit - len(TRUNCATION_MARKER)].rstrip()
    return ChatMessage(
        role=message.role,
        content=kept + TRUNCATION_MARKER,
        name=message.name,
        tool_name=message.tool_name,
    )


def parse_history(text: str) -> ParsedHistory:
    """Read rendered history back.

    * A name line (either language) is the current user's name, wherever it stands between
      messages; repeats (concatenated histories) are de-duplicated; it is never a message.
      Different names raise :class:`ConflictingUserNamesError`.
    * A new message starts only at a line beginning ``[label]: `` with a valid label:
      ``[user]``, ``[assistant]`` (no name), ``[system]``, ``[tool]``, or ``[John]`` → role
      ``assistant`` named John. Every other line continues the current message.
    * User messages carry the user's name from the name line; a message's content is stripped
      (blank lines between concatenated histories are not content).
    * Blank lines before the first message are ignored; any other text there raises
      :class:`HistoryFormatError` naming the line — rendered history never has it.
    """
    user_names: list[str] = []
    pending: list[tuple[str, list[str]]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if (prefix := _speaker_prefix(line)) is not None:
            pending.append((prefix[0], [prefix[1]]))
        elif (user_name := _name_line(line)) is not None:
            if user_name not in user_names:
                user_names.append(user_name)
        elif pending:
            pending[-1][1].append(_unescape(line))
        elif line.strip():
            raise HistoryFormatError(f"line {number}: text before the first speaker prefix")
    if len(user_names) > 1:
        raise ConflictingUserNamesError(f"history names different users: {', '.join(user_names)}")
    user_name = user_names[0] if user_names else None
    messages = [_parsed_message(label, lines, user_name) for label, lines in pending]
    return ParsedHistory(user_name=user_name, messages=messages)


def _parsed_message(label: str, lines: list[str], user_name: str | None) -> ChatMessage:
    content = "\n".join(lines).strip()
    if label == "user":
        return ChatMessage(role="user", content=content, name=user_name)
    for role in ROLES:
        if label == role:
            return ChatMessage(role=role, content=content)
    return ChatMessage(role="assistant", content=content, name=label)


def _speaker_prefix(line: str) -> tuple[str, str] | None:
    """``(label, rest of line)`` when the line starts with a valid speaker prefix."""
    match = _SPEAKER_PREFIX.match(line)
    if match is None:
        return None
    label = match["label"]
    if label not in ROLES and speaker_name_problem(label) is not None:
        return None
    return label, line[match.end() :]


def _name_line(line: str) -> str | None:
    """The user's name when the whole line is a name line with a valid name."""
    match = _NAME_LINE.fullmatch(line)
    if match is None or speaker_name_problem(match["name"]) is not None:
        return None
    return match["name"]


def _is_structural(line: str) -> bool:
    return _speaker_prefix(line) is not None or _name_line(line) is not None


def _escape(line: str) -> str:
    """One more leading backslash on a continuation line that would read as structure."""
    return "\\" + line if _is_structural(line.lstrip("\\")) else line


def _unescape(line: str) -> str:
    """Undo :func:`_escape`: drop one leading backslash before structural text."""
    if line.startswith("\\") and _is_structural(line.lstrip("\\")):
        return line[1:]
    return line


def session_context(
    raw_histories: Sequence[str],
    pending: Sequence[ChatMessage],
    *,
    max_chars_per_message: int,
) -> str:
    """A session's history for an LLM prompt: stored raw histories (L1_RAW, oldest first) read
    back, followed by the turns not promoted yet, rendered by :func:`history_for_prompt`."""
    messages = [m for raw in raw_histories for m in parse_history(raw).messages]
    return history_for_prompt([*messages, *pending], max_chars_per_message=max_chars_per_message)
