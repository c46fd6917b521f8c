"""Taxonomic extraction: the terms and categories the people in a conversation use.

One memory per term:

* ``subject`` — the canonical term itself (whitespace collapsed, surrounding quotes and
  punctuation removed, case as written), so that two different terms never reconcile with
  each other and one term's later mentions reinforce it; ``owner`` is always ``user``: a term
  is the vocabulary of the people in the user's conversations, whoever of them defined it (a
  named human included, never ``agent``);
* ``text`` — "<term>: <definition>.", or "<term> is a kind of <parent>: <definition>." when a
  parent category is known ("<term> is a kind of <parent>." without a definition); Chinese
  conversations get "<term>是一种<parent>" and full-width punctuation;
* ``category`` — the parent category, or None;
* ``attributes`` — ``term``, ``parent`` (or None), ``definition``, ``aliases`` and
  ``examples`` (lists; aliases only as they appear in the conversation, the term itself left
  out).

Only a person's vocabulary is kept: what the user or another named human defines, names or
sorts into a category ("a P0 is an outage that hits every customer"). General knowledge the
assistant explains when asked ("What is a Roth IRA?") is not a memory, as in semantic
extraction: a definition must rest on what the people said, and the term must appear in the
conversation. A participant ("the user", "assistant", a speaker's name) is never a term. A
definition in the first person ("our definition of done: …") is kept as written: it describes
the term, not a person, and refusing it made the 1.5B model fail whole snapshots.

A snapshot is only asked when a person in it defines, names or sorts something in so many words
(`names_a_term`: a quoted word, "means", "we call", "short for", "counts as", "叫", "是指" …):
the prompt keeps nothing else, and without the gate every snapshot paid the call
(docs/architecture.md, "Stages").
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from events.memories import MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.attribution import ASSISTANT_ALIASES, USER_ALIASES, rests_on
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.drafts import one_line, validated
from handlers.extraction.json_answer import items_under
from handlers.extraction.pleasantries import only_pleasantries
from handlers.extraction.transcript import Transcript, conversation_prompt, transcript_of
from handlers.rendering import Language

_KEY = "terms"

SYSTEM_PROMPT = """\
You extract terms for a long-term memory from a conversation: the words and categories the \
people in it use, and what they mean to them.

Speakers: [user] is the current user. [assistant] is the AI assistant. Any other label, such as \
[Person A], is another real person taking part in the conversation.

Return one JSON object: {"terms": [ ... ]}. Each term is an object with:
- "term": the word or name exactly as the people use it.
- "parent": the broader category it belongs to, or null.
- "definition": what it means to them, one short phrase in your own words. Never write "I", \
"my" or "me".
- "aliases": other names they use for the same thing, or [].
- "examples": examples of it from the conversation, or [].

Rules:
- Only terms a person in the conversation defines, names or sorts into a category: their own \
jargon, abbreviations, nicknames, project names, and how they group things.
- Not general knowledge: a word the assistant explains because it was asked is not a term to \
remember. Facts about people, greetings and small talk are not terms.
- If there is none, return {"terms": []}.

Example conversation:
[user]: At work a "P0" is an outage that hits every customer; we also call it a sev-zero. \
For my budget, groceries and rent count as fixed costs.
[Person A]: And in my notes "FC" is short for fixed costs.
[assistant]: Got it!
Example answer:
{"terms": [{"term": "P0", "parent": "incident", "definition": "an outage that affects every \
customer", "aliases": ["sev-zero"], "examples": []}, {"term": "fixed costs", "parent": \
"budget category", "definition": "costs counted as fixed in the budget", "aliases": ["FC"], \
"examples": ["groceries", "rent"]}]}

Example conversation:
[user]: hi, how are you?
[assistant]: Fine, thanks! How can I help?
Example answer:
{"terms": []}

Example conversation:
[user]: What is a Roth IRA?
[assistant]: A retirement account in the US that you fund with money that was already taxed.
Example answer:
{"terms": []}
"""

LANGUAGE_INSTRUCTIONS = {
    "en": "Write the definitions in English.",
    "zh": "The conversation is in Chinese: write the parent, the definitions and the examples "
    "in Chinese, and each term as it appears in the conversation.",
}


class TermDraft(BaseModel):
    """One term as the LLM wrote it (before grounding and rendering)."""

    model_config = ConfigDict(extra="ignore")

    term: str = Field(min_length=1, max_length=100)
    parent: str | None = Field(default=None, max_length=100)
    definition: str | None = Field(default=None, max_length=1_000)
    aliases: list[str] = Field(default_factory=list, max_length=20)
    examples: list[str] = Field(default_factory=list, max_length=20)


class TaxonomicExtractor:
    """Extracts terms (term, parent, definition, aliases, examples) from a snapshot."""

    memory_type: MemoryType = "taxonomic"
    prompt_version = "taxonomic-2"

    def worth_asking(self, snapshot: SnapshotPromoted) -> bool:
        """Only a conversation in which a person defines, names or sorts something in so many
        words (`names_a_term`), and says more than pleasantries (`only_pleasantries`)."""
        transcript = transcript_of(snapshot)
        return names_a_term(transcript) and not only_pleasantries(transcript)

    def prompt(self, snapshot: SnapshotPromoted) -> list[dict[str, str]]:
        return conversation_prompt(SYSTEM_PROMPT, LANGUAGE_INSTRUCTIONS, snapshot)

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        transcript = transcript_of(snapshot)
        drafts = [
            validated(TermDraft, item, _KEY, index)
            for index, item in enumerate(items_under(answer, _KEY))
        ]
        if not names_a_term(transcript):
            return []  # nobody defined, named or sorted anything: a term would be invented
        memories: dict[str, MemoryContent] = {}
        for index, draft in enumerate(drafts):
            memory = _memory_from(draft, transcript, index)
            if memory is not None:
                memories.setdefault(memory.subject.casefold(), memory)
        return list(memories.values())


_NAMING_PHRASES = (
    r"means|meant|meaning|mean by|stands? for|short for|abbreviat\w*|acronyms?",
    r"(we|i|they|you|people|everyone|everybody|he|she) (call|calls|called)",
    r"call (it|them|this|that|these|those|him|her)|called|named|nicknamed?|nicknames|dubbed",
    r"(say|says|said) [\w-]+( [\w-]+)? (for|instead of)",
    r"known as|aka|a\.k\.a|goes by|go by|refers? to|referred to",
    r"(is|are|was|were) (a|an|one|our|my) (kind|type|sort|form|category|class) of",
    r"(kinds|types|sorts|categories|classes) of|counts? as|counted as|categori[sz]\w*|classif\w*",
    r"(group|groups|grouped|sort|sorts|sorted|split|splits|divide|divides|divided) "
    r"\w+( \w+){0,3} into|falls? under|files? under|filed under",
    r"defin(e|es|ed|ing|ition|itions)|(?<!in )terms?|jargon|slang|lingo|code ?names?|i\.e\.",
)
_QUOTED = (
    r"\"[^\"\n]{1,60}\"",
    r"(?<![\w'])'[^'\n]{1,40}'(?![\w'])",
    r"\u201c[^\u201d\n]{1,60}\u201d",
    r"\u2018[^'\n]{1,40}'(?!\w)",
    r"[\u300c\u300e][^\u300d\u300f\n]{1,30}[\u300d\u300f]",
)
_NAMING_ZH = (
    "叫做|叫作|叫|称为|称作|称之为|简称|缩写|全称|是指|指的是|意思|代表|算是|算作|归为|归类|"
    "分为|分成|属于|一种|一类|分类|类别|定义|术语|黑话|行话|所谓|外号|绰号|昵称|也就是|就是指"
)
_NAMING = re.compile(
    r"\b(" + "|".join(_NAMING_PHRASES) + r")(?=\W|$)|" + "|".join(_QUOTED) + "|" + _NAMING_ZH,
    re.IGNORECASE,
)
"""What a person says when they define, name or sort something: a word in quotes ("P0",
'fuel', 「内卷」), or a naming or defining phrase in English or Chinese."""


def names_a_term(transcript: Transcript) -> bool:
    """Whether a person in the conversation defines, names or sorts something in so many words
    (`_NAMING`): "a 'spike' is …", "DoD means …", "we call it a sev-zero", "short for", "counts
    as", "I sort my books into …", "我们把夜班叫大夜", "拉通是指 …".

    The prompt keeps only such terms (their own jargon, abbreviations, nicknames, project
    names, categories); every labelled conversation with a term has one of these words, and
    asking the others cost a call on every snapshot. A pure function of the snapshot, so a
    replay decides the same."""
    return any(_NAMING.search(text.replace("\u2019", "'")) for text in transcript.humans_said)


_QUOTES = " \t\r\n\"'`.,;:!?()[]{}<>\u201c\u201d\u2018\u2019\u300c\u300d\u300e\u300f\u300a\u300b"
"""Quotes, brackets and punctuation around a term ("P0", 「内卷」, 《三体》 …), ASCII and CJK."""


def canonical_term(raw: str) -> str:
    """The term as a subject: whitespace collapsed, surrounding quotes and punctuation removed,
    case kept as written ("P0" and "OKR" stay as they are)."""
    return one_line(raw).strip(_QUOTES)


def _memory_from(draft: TermDraft, transcript: Transcript, index: int) -> MemoryContent | None:
    term = canonical_term(draft.term)
    if not term:
        raise InvalidExtraction(f'"{_KEY}"[{index}].term: must not be blank')
    definition = one_line(draft.definition or "").rstrip(".\u3002")
    parent = canonical_term(draft.parent or "") or None
    if parent is not None and (
        parent.casefold() in {"null", "none", "无"}
        or definition.casefold().startswith(parent.casefold())
    ):
        parent = None  # no parent, or the definition copied into it ("检查清单是一种检查清单")
    if not definition and parent is None:
        raise InvalidExtraction(
            f'"{_KEY}"[{index}].definition: give a definition or a parent category for {term!r}'
        )
    if _is_participant(term, transcript):
        return None  # a person, not a term
    aliases = _aliases(draft.aliases, term, transcript)
    if not _appears(term, transcript) and not aliases:
        return None  # not in this conversation: invented, or an example's term
    if not rests_on(
        " ".join(filter(None, [definition, parent])),
        transcript.humans_said,
        names=transcript.names,
    ):
        return None  # general knowledge from the assistant, not the people's own vocabulary
    examples = [
        e for e in _examples(draft.examples, transcript) if not _is_participant(e, transcript)
    ]
    return MemoryContent(
        subject=term,
        owner="user",
        text=render(term, parent, definition, transcript.language),
        category=parent,
        attributes={
            "term": term,
            "parent": parent,
            "definition": definition,
            "aliases": aliases,
            "examples": examples,
        },
    )


def render(term: str, parent: str | None, definition: str, language: Language) -> str:
    """ "<term>: <definition>." or "<term> is a kind of <parent>: <definition>."."""
    if language == "zh":
        head = f"{term}是一种{parent}" if parent else term
        return f"{head}\uff1a{definition}\u3002" if definition else f"{head}\u3002"
    head = f"{term} is a kind of {parent}" if parent else term
    return f"{head}: {definition}." if definition else f"{head}."


def _is_participant(term: str, transcript: Transcript) -> bool:
    key = term.casefold()
    return (
        key in USER_ALIASES
        or key in ASSISTANT_ALIASES
        or any(key == name.casefold() for name in transcript.names)
    )


def _appears(text: str, transcript: Transcript) -> bool:
    return text.casefold() in transcript.text.casefold()


def _aliases(raw: list[str], term: str, transcript: Transcript) -> list[str]:
    """Aliases as they appear in the conversation, without the term itself or repeats."""
    found: list[str] = []
    seen = {term.casefold()}
    for alias in raw:
        cleaned = canonical_term(alias)
        if cleaned and cleaned.casefold() not in seen and _appears(cleaned, transcript):
            seen.add(cleaned.casefold())
            found.append(cleaned)
    return found


def _examples(raw: list[str], transcript: Transcript) -> list[str]:
    """Examples resting on the conversation's words, without repeats."""
    found: list[str] = []
    everything = [m.content for m in transcript.messages]
    for example in raw:
        cleaned = one_line(example).strip(_QUOTES)
        if (
            cleaned
            and cleaned.casefold() not in {e.casefold() for e in found}
            and rests_on(cleaned, everything, names=transcript.names)
        ):
            found.append(cleaned)
    return found
