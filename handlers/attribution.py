"""Who a fact is about, enforced after extraction (docs/architecture.md, "Speakers").

The extraction prompt asks the LLM for these rules; this module makes them hold whatever the LLM
wrote in a fact's ``subject``:

* the current user → subject ``the user``, owner ``user`` (accepts ``user``, ``User``, ``用户``,
  ``我``, ``I`` ... and the user's own name when the user is named);
* another named human (a ``[John]`` speaker or any other name) → that name, owner ``user`` —
  never ``agent``, even though such a human speaks with ``role=assistant``;
* the AI assistant (``assistant``, ``AI``, ``助手`` ...) → subject ``assistant``, owner ``agent``.

Only the current user's facts may feed the L0 profile. The caller decides who the current user
is: the user's name wins over a speaker of the same name, and nothing is guessed from names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from events.memories import ASSISTANT_SUBJECT, USER_SUBJECT, Owner
from handlers.rendering import CJK_IDEOGRAPHS

SubjectKind = Literal["current_user", "third_party", "assistant"]
USER_ALIASES = frozenset(
    {"user", "the user", "current user", "the current user", "i", "me", "myself"}
    | {"用户", "该用户", "当前用户", "我"}
)
ASSISTANT_ALIASES = frozenset(
    {"assistant", "the assistant", "ai", "the ai", "ai assistant", "the ai assistant"}
    | {"agent", "the agent", "助手", "ai助手", "ai 助手", "智能助手", "人工智能"}
)
_SURROUNDING = " \t\r\n.,;!?\"'`()\u3002\uff0c\uff1b\uff01\uff1f\u201c\u201d\u2018\u2019"
"""Whitespace and punctuation an LLM may leave around a subject (ASCII and full-width)."""


@dataclass(frozen=True)
class Attribution:
    """The canonical subject of a fact, whose memory it is (``owner``) and what kind it is."""

    subject: str
    owner: Owner
    kind: SubjectKind


CURRENT_USER = Attribution(subject=USER_SUBJECT, owner="user", kind="current_user")
ASSISTANT = Attribution(subject=ASSISTANT_SUBJECT, owner="agent", kind="assistant")


def canonical_subject(
    raw_subject: str, *, user_name: str | None, speaker_names: Iterable[str]
) -> Attribution:
    """Canonical subject and owner of a fact whose extracted subject is ``raw_subject``.

    Checked in order: the current user (aliases or ``user_name``), a named speaker (returned in
    the speaker's own spelling), the AI assistant, otherwise a third party named as written.
    Matching ignores case and surrounding whitespace/punctuation. Raises ``ValueError`` on an
    empty subject (invalid LLM output, to be retried or dead-lettered).
    """
    cleaned = raw_subject.strip(_SURROUNDING)
    key = _key(cleaned)
    if not key:
        raise ValueError(f"empty fact subject: {raw_subject!r}")
    if key in USER_ALIASES or (user_name is not None and key == _key(user_name)):
        return CURRENT_USER
    speaker = next((name for name in speaker_names if _key(name) == key), None)
    if speaker is not None:
        return Attribution(subject=speaker.strip(), owner="user", kind="third_party")
    if key in ASSISTANT_ALIASES:
        return ASSISTANT
    return Attribution(subject=cleaned, owner="user", kind="third_party")


def is_profile_eligible(attribution: Attribution) -> bool:
    """Only facts about the current user may feed the L0 profile — never another person's."""
    return attribution.kind == "current_user"


def _key(subject: str) -> str:
    return " ".join(subject.strip(_SURROUNDING).casefold().split())


_STATEMENT_USER_OPENINGS = ("the user", "user", "用户", "該用户", "该用户")
_USER_OPENINGS_LONGEST_FIRST = sorted(_STATEMENT_USER_OPENINGS, key=len, reverse=True)
_STATEMENT_ASSISTANT_OPENINGS = ("the assistant", "the ai assistant", "assistant", "助手", "ai助手")


def subject_in_statement(
    statement: str, *, user_name: str | None, speaker_names: Iterable[str]
) -> str | None:
    """The participant a statement opens with ("The user …", "John …", "用户…"), if any.

    The statement is what is stored and read back, so when it plainly opens with a participant
    that participant is the fact's subject, whatever the LLM put in its `subject` field. Names
    must end at a word boundary ("Johnny" is not "John"); Chinese openings need none.
    """
    text = statement.strip().casefold()
    names = [*speaker_names, *([user_name] if user_name else [])]
    for candidate in sorted(names, key=len, reverse=True):
        if _opens_with(text, candidate.casefold()):
            return candidate
    if any(_opens_with(text, opening) for opening in _STATEMENT_USER_OPENINGS):
        return USER_SUBJECT
    if any(_opens_with(text, opening) for opening in _STATEMENT_ASSISTANT_OPENINGS):
        return ASSISTANT_SUBJECT
    return None


def _opens_with(text: str, opening: str) -> bool:
    if not text.startswith(opening):
        return False
    rest = text[len(opening) :]
    continues_word = rest[:1].isascii() and (rest[:1].isalnum() or rest[:1] in ("_", "-"))
    return not opening.isascii() or not continues_word


def opens_with(text: str, opening: str) -> bool:
    """Whether `text` opens with `opening`, case aside: a Latin opening as a whole word ("John"
    opens "John's dog …", not "Johnny …" nor "John-Paul …"); a Chinese one as written, which
    has no spaces."""
    return _opens_with(text.casefold(), opening.casefold())


def user_opening_length(statement: str) -> int:
    """How many characters at the start of `statement` name the current user ("The user",
    "user", "用户", "该用户"), as `subject_in_statement` reads them; 0 when it does not open
    with the user."""
    text = statement.casefold()
    for opening in _USER_OPENINGS_LONGEST_FIRST:
        if _opens_with(text, opening):
            return len(opening)
    return 0


def mentions(text: str, name: str) -> bool:
    """Whether `text` names `name` anywhere: a Latin name as a whole word, case aside ("Sam",
    not "same" nor "Sam-Ann"); a Chinese name as written."""
    if _CJK_RUN.search(name):
        return name in text
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE) is not None


def with_user_as_subject(statement: str, user_name: str | None) -> str:
    """Write a current-user fact with "The user"/"用户" as subject instead of the user's name:
    "用户" when the rest of the sentence is Chinese (its first letter is a CJK ideograph),
    "The user" otherwise ("Tim's dog …", "Ana, John's friend, …")."""
    if not user_name or not _opens_with(statement.casefold(), user_name.casefold()):
        return statement
    rest = statement[len(user_name) :]
    first_letter = next((char for char in rest if char.isalpha()), "")
    return ("用户" if _CJK_RUN.match(first_letter) else "The user") + rest


_WORD = re.compile(r"[^\W\d_]{3,}|\d+", re.UNICODE)
_CJK_RUN = re.compile(f"[{CJK_IDEOGRAPHS}]+")
_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "have",
        "has",
        "had",
        "are",
        "was",
        "were",
        "will",
        "would",
        "can",
        "could",
        "his",
        "her",
        "their",
        "them",
        "they",
        "she",
        "him",
        "who",
        "whom",
        "what",
        "when",
        "where",
        "which",
        "also",
        "very",
        "just",
        "now",
        "user",
        "assistant",
        "is",
        "am",
        "be",
        "been",
        "being",
        "does",
        "did",
        "not",
    ]
)


def evidence_terms(text: str, *, ignore: Iterable[str] = ()) -> set[str]:
    """Content terms of a text, for checking that a fact rests on what someone said.

    Latin words of 3+ letters (cut to 5 letters, a crude stem: "teaches"/"teacher" → "teach"),
    numbers, and character pairs of Chinese runs; stopwords and the names in `ignore` left out.
    """
    skipped = {name.casefold() for name in ignore}
    terms: set[str] = set()
    for word in _WORD.findall(text.casefold()):
        if _CJK_RUN.fullmatch(word):
            continue
        if word not in _STOPWORDS and word not in skipped:
            terms.add(word[:5])
    for run in _CJK_RUN.findall(text):
        for name in skipped:
            run = run.replace(name, " ")
        terms.update(run[i : i + 2] for i in range(len(run) - 1) if " " not in run[i : i + 2])
    terms.discard("用户")
    terms.discard("助手")
    return terms


EVIDENCE_SHARE = 0.25
"""The share of a statement's content terms that must appear in the messages it rests on."""


def rests_on(statement: str, evidence: Iterable[str], *, names: Iterable[str]) -> bool:
    """Whether enough of a statement's content terms appear in the messages it should rest on.

    A quarter is enough for a paraphrase ("The user is a maths teacher." / "I teach maths") and
    too much for a common word alone ("工作" in someone else's question). A statement with no
    content terms of its own cannot be judged and counts as resting; nor can a translation (an
    English statement about a Chinese conversation, which small models often write): words
    cannot be matched across scripts.
    """
    names = list(names)
    claimed = evidence_terms(statement, ignore=names)
    if not claimed:
        return True
    said: set[str] = set()
    for text in evidence:
        said |= evidence_terms(text, ignore=names)
    if main_script(claimed) != main_script(said):
        return True
    return len(claimed & said) >= EVIDENCE_SHARE * len(claimed)


def main_script(terms: set[str]) -> str | None:
    """The script most terms are written in, "cjk" or "latin" (numbers count for neither)."""
    cjk = sum(1 for term in terms if _CJK_RUN.search(term))
    latin = sum(1 for term in terms if not term.isdigit() and not _CJK_RUN.search(term))
    if cjk == latin == 0:
        return None
    return "cjk" if cjk > latin else "latin"
