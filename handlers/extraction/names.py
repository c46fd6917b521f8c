"""Names a memory should not hold: one nobody in the conversation used, and the user's own
name for someone else (`names_the_user_as_another`).

Small models fill a gap with a plausible name: "The user moved to France in 2019." from "I've
known these friends for 4 years, since I moved from my home country" (the home country, said
elsewhere, was Sweden); "Jolene is a woman who lives in Paris, France." from "I bought it a
year ago in Paris." A memory like that is worse than none: the answer it gives is confidently
wrong (docs/architecture.md, "Speakers").

A name here is a capitalised word of an English statement that does not open a sentence,
three letters or more, not a month or a weekday (the extractor is told the conversation's date,
and relative times are written as dates), nor "User" or "Assistant". It is invented when
neither the conversation's messages nor its speakers' names contain it, case aside (a
possessive "'s" left off). Statements in Chinese, and statements about a conversation in
Chinese (an English memory of a Chinese chat, which small models write as a translation), are
not judged: their names cannot be matched across scripts. Which texts are Chinese is the
project's one rule for it (`handlers.rendering.detect_language`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from handlers.attribution import mentions, opens_with, user_opening_length
from handlers.rendering import detect_language

_APOSTROPHES = "'\u2019"
_NAME = re.compile(
    rf"(?<![.!?]\s)(?<!^)(?<![\w{_APOSTROPHES}-])([A-Z][A-Za-z{_APOSTROPHES}+-]{{2,}})"
)
"""A capitalised word, not the statement's first nor the first after a full stop."""

_CALENDAR = frozenset(
    {
        *("january", "february", "march", "april", "may", "june", "july", "august"),
        *("september", "october", "november", "december", "monday", "tuesday", "wednesday"),
        *("thursday", "friday", "saturday", "sunday"),
    }
)
_PARTIES = frozenset({"user", "assistant"})
"""How memories name the participants ("Assistant suggests …"), whatever the messages say."""
_POSSESSIVE = re.compile(rf"[{_APOSTROPHES}]s?$")


def invented_names(
    statement: str, messages: Iterable[str], *, names: Iterable[str] = ()
) -> list[str]:
    """The names in `statement` that none of `messages` and `names` (the speakers') contains
    (module doc); empty when the statement or the messages are in Chinese."""
    said = " ".join(messages)
    if detect_language([statement]) != "en" or detect_language([said]) != "en":
        return []
    said = " ".join([said, *names]).casefold()
    invented = []
    for word in _NAME.findall(statement.strip()):
        name = _POSSESSIVE.sub("", word).casefold()
        if len(name) >= 3 and name not in _CALENDAR | _PARTIES and name not in said:
            invented.append(word)
    return invented


def names_the_user_as_another(statement: str, user_name: str | None) -> bool:
    """Whether a fact about the current user, opening with them ("The user", "用户" or their
    name), names the user again by their own name, as someone else: "The user is a collaborator
    of Calvin's." when the user is Calvin, "The user has dogs named Audrey and Andrew." when the
    user is Audrey. Small models write such a fact when they lose track of who is who; it is
    wrong whichever way it is read (docs/architecture.md, "Speakers"). "The user's name is
    Calvin." goes too: the profile takes the name from the messages. The name set beside the
    opening ("The user, Calvin, …", "用户王芳…") is not counted, nor a fact that does not open
    with the user ("Pepper chewed Maya's boots."). A Chinese name is matched as written, a Latin
    one as a whole word, case aside."""
    if not user_name or not user_name.strip():
        return False
    name = user_name.strip()
    text = statement.strip()
    opening = user_opening_length(text)
    if opening:
        text = text[opening:]
        text = re.sub(rf"^[\s,\uff0c(\uff08]*{re.escape(name)}[\s,\uff0c)\uff09]*", " ", text)
    elif opens_with(text, name):
        text = text[len(name) :]
    else:
        return False  # "Pepper chewed Maya's boots.": the user named once, as themselves
    return mentions(text, name)
