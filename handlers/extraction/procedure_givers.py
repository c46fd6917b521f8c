"""Whose procedure it is: who gave a procedure's steps, and steps copied from a person's
message (docs/architecture.md, "Speakers"; used by `handlers.extraction.procedural`).

Who gave a procedure is not taken from the LLM alone. Small models credit the assistant with a
rule it merely acknowledged ("Got it: short answers from now on"), and credit the user with
steps the assistant wrote because the user asked. So the LLM's ``given_by`` is checked
(`who_gave`): a rule credited to the assistant is a person's; steps resting mostly on a person's
own messages are that person's, and steps resting more on the assistant's messages than on the
person who only asked are the assistant's.

Small models also copy people's messages as steps, often two people's rules in one procedure
(`copied_messages`): each copy goes to the person whose own messages hold it, rewritten about
them (`about`), and a first-person trigger copied from the giver's message likewise
(`trigger_of`).
"""

from __future__ import annotations

import re

from handlers.attribution import ASSISTANT, CURRENT_USER, Attribution
from handlers.extraction.drafts import in_first_person, support
from handlers.extraction.transcript import Transcript


def copied_messages(
    steps: list[str], transcript: Transcript
) -> tuple[list[str], list[tuple[Attribution, list[str]]]]:
    """The steps in the LLM's own words, and the steps copied from a person's message, grouped
    by that person and rewritten in the third person.

    Small models copy people's messages as steps ("When you schedule meetings for me, never
    book anything before 10am."), often two people's rules in one procedure. A copy is
    attributed by its words, not by the LLM: to the person whose own messages hold at least
    `OWN_SHARE` of it (best first), and rewritten about them (`about`): "for me" → "for
    John", "我的话" → "用户的话". A first-person step that rests on no single person's
    messages, or that cannot be rewritten safely ("I", "we", "我们" left), is dropped.
    """
    names = transcript.names
    people = people_who_spoke(transcript)
    own: list[str] = []
    copied: dict[str, tuple[Attribution, list[str]]] = {}
    for step in steps:
        if not in_first_person(step):
            own.append(step)
            continue
        shares = [(support(step, transcript.said_by(p), names=names) or 0.0, p) for p in people]
        share, person = max(shares, key=lambda pair: pair[0])
        rewritten = about(step, person) if share >= OWN_SHARE else None
        if rewritten is not None:
            copied.setdefault(person.subject, (person, []))[1].append(rewritten)
    return own, list(copied.values())


_OBJECT_PRONOUNS = re.compile(r"\b(me|my|mine|myself)\b", re.IGNORECASE)


def about(text: str, person: Attribution) -> str | None:
    """A copied message rewritten about its speaker, or None when that cannot be done safely.

    Only forms without verb agreement are replaced: "me", "my", "mine", "myself" (English) and
    我 (Chinese, not 我们); a text still in the first person afterwards ("I", "we") is None.
    """
    english = "the user" if person.kind == "current_user" else person.subject
    chinese = "用户" if person.kind == "current_user" else person.subject

    def replace(match: re.Match[str]) -> str:
        word = match.group(1).casefold()
        name = f"{english}'s" if word in ("my", "mine") else english
        return name[0].upper() + name[1:] if match.start() == 0 else name

    rewritten = _CHINESE_I.sub(chinese, _OBJECT_PRONOUNS.sub(replace, text))
    return None if in_first_person(rewritten) else rewritten


_CHINESE_I = re.compile(r"我(?!们)")


def trigger_of(raw: str, source: Attribution, transcript: Transcript) -> str:
    """The trigger; one copied in the first person from the message of the person who gave the
    procedure is rewritten about them, any other first-person trigger means "always"."""
    if not in_first_person(raw):
        return raw
    if source.kind != "assistant":
        share = support(raw, transcript.said_by(source), names=transcript.names)
        if share is not None and share >= OWN_SHARE:
            return about(raw, source) or "always"
    return "always"


OWN_SHARE = 0.5
"""How much of a workflow's steps must rest on a person's own messages for it to be theirs
when the assistant's messages support it too: half, more than the quarter that grounds a fact,
because a person's question shares the task's words with the assistant's answer ("How do I
export the monthly sales report?" holds 4 of the 10 terms of the assistant's four steps), while
steps a person really gave are mostly their own words."""


def who_gave(
    given_by: Attribution, kind: str, steps: str, transcript: Transcript
) -> Attribution | None:
    """Who gave the procedure, checked against the words of the steps (see the module
    docstring), the LLM having said `given_by`.

    * Steps of which at least `OWN_SHARE` rests on one person's own messages are that
      person's (the best supported), whoever the LLM credited: the assistant only restated
      them, or the LLM credited the wrong person.
    * Otherwise, a standing ``rule`` credited to the assistant is no procedure at all (None):
      the assistant does not set rules for itself, and these are its own replies
      ("Understood!", "Home-grown tomatoes are the best"); when the words cannot tell (another
      script), it is the current user's. A workflow or instruction credited to the assistant
      is the assistant's.
    * Steps credited to a person that rest more on the assistant's messages than on that
      person's are the assistant's (the person only asked; small models then often call the
      assistant's answer a "rule", which becomes a workflow or an instruction).
    """
    names = transcript.names
    shares = [
        (support(steps, transcript.said_by(p), names=names), p)
        for p in people_who_spoke(transcript)
    ]
    best_share, best = max(shares, key=lambda pair: pair[0] or 0.0)
    if best_share is not None and best_share >= OWN_SHARE:
        return best
    if given_by.kind == "assistant":
        if kind == "rule":
            return CURRENT_USER if best_share is None else None
        return ASSISTANT
    own = support(steps, transcript.said_by(given_by), names=names)
    assistant = support(steps, transcript.said_by(ASSISTANT), names=names)
    if own is not None and assistant is not None and assistant > own:
        return ASSISTANT
    return given_by


def people_who_spoke(transcript: Transcript) -> list[Attribution]:
    """The people who spoke: the current user first, then the named speakers."""
    return [CURRENT_USER] + [
        Attribution(subject=name, owner="user", kind="third_party")
        for name in sorted(transcript.speaker_names)
    ]
