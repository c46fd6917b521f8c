"""Recalling a user's past messages for a query: the earlier turns an answer may need verbatim.

Pure (docs/architecture.md, "Past messages"). Extraction keeps what a snapshot's extractor saw
fit to keep; a later question often asks about a detail it left out (the book's title, the day
of the race). `build_context` therefore also shows a few of the user's messages from earlier
sessions that share the most words with the question, each with the day it was said. The
ranking:

* BM25 (`handlers.search.KeywordIndex`, the memories' keyword scoring) over each message's
  speaker and text, so a question that names a person finds what that person said, and over
  the message said just before it in its conversation (`PastMessage.before`, matched but not
  shown): an answer ("Yes, the one by the lake!") often shares no word with the question
  that the message it answers holds;
* the query's English stop words ("what", "did", "the": Snowball's list) left out, so that
  short messages full of them do not outrank the one naming the thing asked about;
* Latin-script words reduced to their English stems first (Snowball), so "paint" finds
  "painted"; CJK text is matched as the memories' search matches it (characters and bigrams);
* only messages that share at least one token with the query; best score first, ties by the
  later message first, then by the order given (`keyword_candidates`, `recalled`);
* when the deployment asks for it, the best `RERANK_POOL` of those reranked by meaning
  (`reranked`): keyword score and similarity to the query together, the similarity the
  caller's, from the embedding of each candidate's `meaning_text` (`memstream.sdk.meaning`).

Whose messages these are, and how many are read, is the caller's (`memstream.sdk.read_model`:
the user's latest turns outside the current session, a bounded number of them, so a query's
cost does not grow with the user's whole history).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache

import numpy as np
import snowballstemmer

from handlers.search import KeywordIndex, relative_fused_scores

PAST_MESSAGES = 6
"""How many past messages `build_context` shows unless told otherwise."""
MESSAGE_CHARS = 400
"""A past message is shown up to this many characters (cut at a word, with an ellipsis)."""
BEFORE_CHARS = 1_000
"""Of the message said before a past message, its last this many characters are matched: where
a long reply's question to the speaker usually is, and a bound on the text a call ranks."""

RERANK_POOL = 20
"""How many of the best keyword matches are reranked by meaning (`reranked`)."""
MEANING_WEIGHT = 2.0
"""How much a candidate's similarity of meaning to the query counts against its keyword score,
both scaled to [0, 1] among the candidates."""
MEANING_BEFORE_CHARS = 300
"""Of the message said before a candidate, its last this many characters are embedded with it."""

_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
_ENGLISH = snowballstemmer.stemmer("english")
_STOP_WORDS = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom this
    that these those am is are was were be been being have has had having do does did doing
    would should could ought a an the and but if or because as until while of at by for with
    about against between into through during before after above below to from up down in out
    on off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very cannot
    s t d ll m re ve isn aren wasn weren hasn haven hadn doesn don didn won wouldn shan shouldn
    can couldn mustn let"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
"""Snowball's English stop words, and the pieces its contractions ("didn't") split into: left
out of a recall query."""


@dataclass(frozen=True)
class PastMessage:
    """One earlier message of the user's conversations, as a context shows it."""

    speaker: str
    """Who said it: the speaker's name, or their role ("User", "Assistant")."""
    text: str
    said_on: date | None = None
    before: str = ""
    """What was said just before it in its conversation, when known: matched, never shown."""

    @property
    def searchable(self) -> str:
        return f"{self.speaker}: {self.text} {self.before}".rstrip()


def speaker_of(role: str, name: str | None) -> str:
    """A turn's speaker as shown: its name when it has one, else its role, capitalised."""
    return name if name else role.capitalize()


def recalled(
    query: str,
    messages: Sequence[PastMessage],
    limit: int,
    *,
    stop_words: frozenset[str] = STOP_WORDS,
) -> list[PastMessage]:
    """The at most `limit` messages that best match `query` by keywords alone (see the module
    doc), the query's `stop_words` left out."""
    return [
        candidate.message
        for candidate in keyword_candidates(query, messages, limit, stop_words=stop_words)
    ]


@dataclass(frozen=True)
class Candidate:
    """A past message that shares a word with the query, and its keyword (BM25) score."""

    message: PastMessage
    keyword_score: float


def keyword_candidates(
    query: str,
    messages: Sequence[PastMessage],
    limit: int,
    *,
    stop_words: frozenset[str] = STOP_WORDS,
) -> list[Candidate]:
    """The at most `limit` messages sharing a word with `query`, best keyword score first (ties:
    the later message first, then the order given)."""
    if limit <= 0 or not messages:
        return []
    index = KeywordIndex.built([stemmed(message.searchable) for message in messages])
    scores = index.scores(stemmed(query, stop_words), np.ones(len(messages), dtype=np.bool_))
    order = sorted(
        (position for position in range(len(messages)) if scores[position] > 0),
        key=lambda position: (
            -scores[position],
            -_ordinal(messages[position].said_on),
            position,
        ),
    )
    return [Candidate(messages[position], float(scores[position])) for position in order[:limit]]


def meaning_text(message: PastMessage) -> str:
    """What is embedded of a candidate to compare its meaning with the query's: the speaker and
    the text as shown, and the tail of the message before it (the question it answers)."""
    said = f"{message.speaker}: {shown_text(message.text)}"
    before = " ".join(message.before[-MEANING_BEFORE_CHARS:].split())
    return f"{said} (after: {before})" if before else said


def reranked(
    candidates: Sequence[Candidate], similarities: Sequence[float], limit: int
) -> list[PastMessage]:
    """The best `limit` of `candidates` (in `keyword_candidates`' order) by keywords and meaning
    together, as the memories' search fuses them (`handlers.search.relative_fused_scores`):
    each one's keyword score over the best one's, and its similarity to the query
    (`similarities`, one per candidate) scaled to [0, 1] between the least and the most
    similar candidate, the similarity weighted `MEANING_WEIGHT` times the keywords. Ties keep
    the keyword order."""
    if len(similarities) != len(candidates):
        raise ValueError(f"{len(similarities)} similarities for {len(candidates)} candidates")
    if limit <= 0 or not candidates:
        return []
    fused, _ = relative_fused_scores(
        np.array(similarities, dtype=np.float64),
        np.ones(len(candidates), dtype=np.bool_),
        np.array([c.keyword_score for c in candidates], dtype=np.float64),
        MEANING_WEIGHT / (1 + MEANING_WEIGHT),
    )
    order = sorted(range(len(candidates)), key=lambda position: (-fused[position], position))
    return [candidates[position].message for position in order[:limit]]


def stemmed(text: str, leaving_out: frozenset[str] = frozenset()) -> str:
    """`text` with each word of Latin letters lower-cased and replaced by its English stem, and
    the words in `leaving_out` (lower-case, before stemming) left out."""

    def stem(word: re.Match[str]) -> str:
        folded = word.group(0).casefold()
        return "" if folded in leaving_out else _stem(folded)

    return _LATIN_WORD.sub(stem, text)


@dataclass(frozen=True)
class PromotedRun:
    """Where a promoted snapshot's turns stand in their session, as its read model stores it."""

    session_id: str
    seq: int
    """The snapshot's number in its session's window (`SnapshotPromoted.seq`): consecutive
    within one window's lifetime, from 0 again when a session's window was retired and
    reopened."""
    first_turn_at: datetime
    turn_ids: Sequence[str]


def conversation_runs(snapshots: Sequence[PromotedRun]) -> list[list[str]]:
    """The turn ids of `snapshots` as runs said one after the other, for `preceding`: the
    snapshots of one session in the order their turns were said (first turn's time, then
    number), each joined to the one before when it is the next of the same window (numbered
    one more). A snapshot whose predecessor is not among `snapshots` starts a run of its own,
    so two turns are not paired across a missing snapshot — except in the one case the numbers
    cannot tell: a reopened window (numbered from 0 again) whose first snapshot is missing
    while its second and the old window's first are both given. The pairing only adds words
    to match a message by, so such a pair costs a spurious match, never a wrong message."""
    sessions: dict[str, list[PromotedRun]] = {}
    for snapshot in snapshots:
        sessions.setdefault(snapshot.session_id, []).append(snapshot)
    runs: list[list[str]] = []
    for session_id in sorted(sessions):
        ordered = sorted(sessions[session_id], key=lambda s: (s.first_turn_at, s.seq))
        previous: PromotedRun | None = None
        for snapshot in ordered:
            if previous is not None and snapshot.seq == previous.seq + 1:
                runs[-1].extend(snapshot.turn_ids)
            else:
                runs.append(list(snapshot.turn_ids))
            previous = snapshot
    return runs


def preceding(conversations: Sequence[Sequence[str]], texts: Mapping[str, str]) -> dict[str, str]:
    """For each turn id of `texts`, the text of the turn just before it in its conversation
    (its last `BEFORE_CHARS` characters), when that turn is in `texts` too. `conversations` are
    runs of turn ids in the order they were said (`conversation_runs`)."""
    found: dict[str, str] = {}
    for run in conversations:
        for earlier, turn_id in itertools.pairwise(run):
            if turn_id in texts and earlier in texts:
                found[turn_id] = texts[earlier][-BEFORE_CHARS:]
    return found


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
