"""Restatement by wording: a new memory whose words open a known one, or the other way round.

Small models write one fact several times within a conversation, each time a little longer:
"Sam is a friend of Evan's." / "Sam is a friend of Evan's who is also a teacher." The
embedder's cosine between two such texts often falls in the band where reconciliation asks
the LLM, or below it, where it ADDs; the packaged 1.5B model then keeps both, and the
near-duplicates take a context window's room (docs/architecture.md, "Reconciliation").

When one text is word for word the opening of the other, no LLM is needed to decide:

- the new memory **restates** a known one when its words are the known one's opening (or all
  of it): nothing new, a REINFORCE — unless what the known memory adds after them turns the
  opening around ("The user is vegetarian" / "The user is vegetarian no longer"), which is
  left to the other rules;
- the new memory **extends** a known one when the known one's words are its own opening and it
  says more: the longer text replaces it, an UPDATE.

Words are compared case and punctuation aside; Chinese, written without spaces, is compared
character by character. The opening must be at least `MIN_WORDS` words, so two memories that
share only "The user" never count.
"""

from __future__ import annotations

import re

MIN_WORDS = 4
"""The fewest words an opening may have ("Sam is a friend" / "用户喜欢" in characters)."""

_WORD = re.compile(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+")
"""A word: one Chinese character, or a run of other letters and digits."""

_TURNING = frozenset(
    {
        *("not", "no", "never", "longer", "anymore", "stopped", "quit", "former", "formerly"),
        *("used", "but", "except", "until", "不", "没", "别", "再", "曾", "但"),
    }
)
"""Words after an opening that may turn it around ("… no longer", "… but quit in 2020")."""


def words(text: str) -> list[str]:
    """The words of a text, case and punctuation aside."""
    return _WORD.findall(text.casefold())


def restates(new: str, known: str) -> bool:
    """Whether `new` says nothing `known` does not: its words open `known` (or are all of it),
    and what `known` adds after them does not turn them around."""
    opening, whole = words(new), words(known)
    return _opens(opening, whole) and not _TURNING.intersection(whole[len(opening) :])


def extends(new: str, known: str) -> bool:
    """Whether `new` opens with all of `known`'s words and says more."""
    opening, whole = words(known), words(new)
    return _opens(opening, whole) and len(whole) > len(opening)


def one_opens_the_other(one: str, other: str) -> bool:
    """Whether either text's words are the opening of the other's (or all of it): the two may
    become each other's restatement or extension once one of them is decided."""
    shorter, longer = sorted((words(one), words(other)), key=len)
    return _opens(shorter, longer)


def _opens(opening: list[str], whole: list[str]) -> bool:
    """Whether `opening`, at least `MIN_WORDS` words, is the start of `whole` (or all of it)."""
    return len(opening) >= MIN_WORDS and whole[: len(opening)] == opening
