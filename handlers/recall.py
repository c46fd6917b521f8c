"""Recalling a user's past messages for a query: the earlier turns an answer may need verbatim.

Pure (docs/architecture.md, "Past messages"). Extraction keeps what a snapshot's extractor saw
fit to keep; a later question often asks about a detail it left out (the book's title, the day
of the race). `build_context` therefore also shows a few of the user's messages from earlier
sessions that share the most words with the question, each with the day it was said. The
ranking:

* BM25 (`handlers.search.KeywordIndex`, the memories' keyword scoring) over each message's
  speaker and text, so a question that names a person finds what that person said;
* Latin-script words reduced to their English stems first (Snowball), so "paint" finds
  "painted"; CJK text is matched as the memories' search matches it (characters and bigrams);
* only messages that share at least one token with the query; best score first, ties by the
  later message first, then by the order given.

Whose messages these are, and how many are read, is the caller's (`memstream.sdk.read_model`:
the user's latest turns outside the current session, a bounded number of them, so a query's
cost does not grow with the user's whole history).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

import numpy as np
import snowballstemmer

from handlers.search import KeywordIndex

PAST_MESSAGES = 6
"""How many past messages `build_context` shows unless told otherwise."""
MESSAGE_CHARS = 400
"""A past message is shown up to this many characters (cut at a word, with an ellipsis)."""

_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
_ENGLISH = snowballstemmer.stemmer("english")


@dataclass(frozen=True)
class PastMessage:
    """One earlier message of the user's conversations, as a context shows it."""

    speaker: str
    """Who said it: the speaker's name, or their role ("User", "Assistant")."""
    text: str
    said_on: date | None = None

    @property
    def searchable(self) -> str:
        return f"{self.speaker}: {self.text}"


def speaker_of(role: str, name: str | None) -> str:
    """A turn's speaker as shown: its name when it has one, else its role, capitalised."""
    return name if name else role.capitalize()


def recalled(query: str, messages: Sequence[PastMessage], limit: int) -> list[PastMessage]:
    """The at most `limit` messages that best match `query` (see the module doc)."""
    if limit <= 0 or not messages:
        return []
    index = KeywordIndex.built([stemmed(message.searchable) for message in messages])
    scores = index.scores(stemmed(query), np.ones(len(messages), dtype=np.bool_))
    order = sorted(
        (position for position in range(len(messages)) if scores[position] > 0),
        key=lambda position: (
            -scores[position],
            -_ordinal(messages[position].said_on),
            position,
        ),
    )
    return [messages[position] for position in order[:limit]]


def stemmed(text: str) -> str:
    """`text` with each word of Latin letters lower-cased and replaced by its English stem."""
    return _LATIN_WORD.sub(lambda word: _stem(word.group(0).casefold()), text)


def shown_text(text: str, max_chars: int = MESSAGE_CHARS) -> str:
    """`text` on one line, cut at a word boundary to `max_chars` with an ellipsis if longer."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    cut = flat[: max_chars - 1]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return f"{cut}…"


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    return str(_ENGLISH.stemWord(word))


def _ordinal(day: date | None) -> int:
    return day.toordinal() if day is not None else 0
