"""A fact told in another speaker's own words: whose fact it is (docs/architecture.md, "Speakers").

In a conversation between two people, small models often write what one of them said about
themselves as the other's fact: "The user played drums for a month now, it was tough but fun."
when John said "I've been playing for a month now, it's been tough but fun." and the user never
played. The fact's words are someone else's account of themselves.

A fact about a participant (the current user or a named speaker) is **borrowed** from another
human participant when the messages of theirs that speak in the first person — their questions
left out, since "Are you planning to stay in Japan long?" is said about the listener — hold
together at least `BORROWED_SHARE` of the fact's content terms (it needs `MIN_TERMS` of them),
and at least `MARGIN` more of them than the subject's own messages hold (their questions left
out too). "The user has a favorite type of bird, eagles." rests on the user's question "Do you
have a favorite type of bird?" only; Andrew answered "Eagles have always mesmerized me" and
told of birds before.

Only a fact that opens with its subject is judged. A borrowed one is moved to its owner when
it names its owner nowhere else ("The user found a hobby …" → "Sam found a hobby …");
otherwise ("The user went to a car show with Dave.", where Dave went) it cannot be rewritten
cleanly and is dropped. The AI assistant is never an owner: its messages restate and advise,
they do not tell its own life. Terms are compared as `handlers.attribution.evidence_terms`
makes them, dates written by the extractor left out, so Chinese works by character pairs; a
fact in another script than the messages is not judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from events.memories import USER_SUBJECT
from handlers.attribution import (
    CURRENT_USER,
    Attribution,
    canonical_subject,
    evidence_terms,
    mentions,
    subject_in_statement,
    user_opening_length,
)
from handlers.extraction.dates import without_dates
from handlers.extraction.drafts import in_first_person, support
from handlers.extraction.transcript import Transcript
from handlers.rendering import CJK_IDEOGRAPHS

BORROWED_SHARE = 0.5
"""The share of a fact's content terms another person's first-person messages must hold."""
MARGIN = 0.25
"""How much more of them they must hold than the subject's own messages."""
MIN_TERMS = 3
"""Fewer content terms say too little to tell whose account they copy: "Nate is a friend of the
user." has one, "friend", which either of two friends may say."""

_SENTENCE = re.compile(r"[^.!?\u3002\uff01\uff1f]+[.!?\u3002\uff01\uff1f]*")
_QUESTION_MARKS = ("?", "\uff1f")
_CJK = re.compile(f"[{CJK_IDEOGRAPHS}]")


@dataclass(frozen=True)
class Borrowed:
    """A fact whose words are `owner`'s own account of themselves."""

    owner: Attribution
    moved: str | None
    """The fact rewritten about its owner, or None when it cannot be (then it is dropped)."""


def borrowed_from(
    statement: str, attribution: Attribution, transcript: Transcript
) -> Borrowed | None:
    """Whether `statement`, a fact about `attribution`, copies another person's own account
    (module doc); None when it does not, or cannot be judged."""
    opening = _opening(statement, attribution, transcript)
    subject_said = _own_accounts(transcript, attribution, first_person_only=False)
    if opening is None or subject_said is None:
        return None
    names, judged = transcript.names, without_dates(statement)
    if len(evidence_terms(judged, ignore=names)) < MIN_TERMS:
        return None
    own = _share(judged, subject_said, names)
    best: tuple[float, Attribution] | None = None
    for person in _other_humans(transcript, attribution):
        accounts = _own_accounts(transcript, person, first_person_only=True) or []
        share = _share(judged, accounts, names)
        if best is None or share > best[0]:
            best = (share, person)
    if best is None or best[0] < BORROWED_SHARE or best[0] < own + MARGIN:
        return None
    owner = best[1]
    return Borrowed(owner=owner, moved=_moved(statement, opening, owner, transcript))


def _share(statement: str, messages: list[str], names: list[str]) -> float:
    """The share of the statement's terms the messages hold together (0 in another script)."""
    return (support(statement, messages, names=names) or 0.0) if messages else 0.0


def _own_accounts(
    transcript: Transcript, person: Attribution, *, first_person_only: bool
) -> list[str] | None:
    """A human participant's messages without their questions (and, when `first_person_only`,
    only those speaking of themselves); None for anyone who is not a human participant."""
    if person.kind == "assistant":
        return None
    if person.kind == "third_party" and person.subject not in transcript.speaker_names:
        return None
    accounts = []
    for message in transcript.said_by(person):
        statements = " ".join(
            sentence.strip()
            for sentence in _SENTENCE.findall(message)
            if not sentence.strip().endswith(_QUESTION_MARKS)
        )
        if statements and (not first_person_only or in_first_person(statements)):
            accounts.append(statements)
    return accounts


def _other_humans(transcript: Transcript, attribution: Attribution) -> list[Attribution]:
    people = [CURRENT_USER] if attribution.kind != "current_user" else []
    people += [
        Attribution(subject=name, owner="user", kind="third_party")
        for name in sorted(transcript.speaker_names)
        if name != attribution.subject and name != transcript.user_name
    ]
    return people


def _opening(statement: str, subject: Attribution, transcript: Transcript) -> str | None:
    """The words `statement` opens with when they name its subject ("The user", the user's
    name, a speaker's name); None otherwise (such a statement is not judged)."""
    user_name, speakers = transcript.user_name, transcript.speaker_names
    opening = subject_in_statement(statement, user_name=user_name, speaker_names=speakers)
    if opening is None:
        return None
    opened_by = canonical_subject(opening, user_name=user_name, speaker_names=speakers)
    return opening if opened_by == subject else None


def _moved(statement: str, opening: str, owner: Attribution, transcript: Transcript) -> str | None:
    """`statement` opening with `owner` instead of its subject, or None when it names the owner
    again after the opening."""
    length = _opening_length(statement, opening)
    rest = statement[length:]
    if any(mentions(rest, name) for name in _names_of(owner, transcript)):
        return None
    if owner.kind == "current_user":
        chinese = _CJK.match(rest.lstrip()) is not None
        return ("用户" if chinese else "The user") + rest
    return owner.subject + rest


def _opening_length(statement: str, opening: str) -> int:
    indent = len(statement) - len(statement.lstrip())
    if opening == USER_SUBJECT:
        return indent + user_opening_length(statement.lstrip())
    return indent + len(opening)


def _names_of(person: Attribution, transcript: Transcript) -> list[str]:
    """How a statement may name `person` after its opening."""
    if person.kind == "current_user":
        names = ["the user", "用户"]
        return names + ([transcript.user_name] if transcript.user_name else [])
    return [person.subject]
