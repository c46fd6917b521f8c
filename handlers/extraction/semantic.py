"""Semantic extraction: facts about the people in a conversation (and what the AI provided).

The prompt speaks of "the user" (named few-shot examples leak their names into small models'
output), shows an explicit empty result, and asks for one JSON object. What comes back is
validated, filtered and re-attributed by `handlers.attribution`, never trusted as is.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from events.memories import USER_SUBJECT, MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.attribution import (
    Attribution,
    canonical_subject,
    rests_on,
    subject_in_statement,
    with_user_as_subject,
)
from handlers.extraction.assistant_facts import assistant_provided
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.borrowed_words import borrowed_from
from handlers.extraction.dates import dated_turns, ground_relative_times, without_dates
from handlers.extraction.drafts import in_first_person, one_line, support, validated
from handlers.extraction.json_answer import items_under
from handlers.extraction.names import invented_names, names_the_user_as_another
from handlers.extraction.narration import only_narration
from handlers.extraction.pleasantries import only_pleasantries
from handlers.extraction.transcript import Transcript, conversation_prompt, transcript_of

ProfileField = Literal["name", "age", "gender", "location", "occupation", "employer", "language"]
PROFILE_FIELDS: tuple[str, ...] = get_args(ProfileField)
CATEGORIES = ("basic_info", "preference", "relationship", "work", "health", "plan", "other")

SYSTEM_PROMPT = """\
You extract facts for a long-term memory from a conversation.

Speakers: [user] is the current user. [assistant] is the AI assistant. Any other label, such as \
[Person A], is another real person taking part in the conversation.

Return one JSON object: {"facts": [ ... ]}. Each fact is an object with:
- "subject": who the fact is about: "the user" for the current user; the person's name for \
another named person; "assistant" only for something concrete the AI assistant provided because \
it was asked: a recommendation, a plan or a list the user may refer to later.
- "statement": one short sentence in the third person that starts with the subject, in your \
own words, e.g. "The user works at a bank." Never copy a message. Never write "I", "my" or "me".
- "owner": "agent" only when the subject is the assistant, otherwise "user".
- "category": one of basic_info, preference, relationship, work, health, plan, other.
- "profile_field": only for the current user's basic information, one of name, age, gender, \
location, occupation, employer, language; otherwise null.

Rules:
- Only lasting facts about the people that are worth remembering later: who they are, what they \
do, like, own, plan or need; their family, friends and pets; places they have been; what they \
did and how they felt about it, with its date.
- A fact said in passing counts as much as the main topic: a child, a gift, a hobby, a place \
named on the way.
- Each person's facts under their own name: what another person says about themselves is about \
that person, never about the user.
- Do not describe the conversation (who asked, greeted, thanked or answered what). No greetings, \
no small talk, no questions, no guesses, no general knowledge from the assistant's answers, no \
passing moods or states of the moment (tired, hungry, busy today).
- The assistant's replies are not facts: never write what the assistant said, noted, \
understood, agreed, joked or wished, and never repeat the user's fact as something the \
assistant noted. A fact about the user is about "the user".
- If there is nothing worth remembering, return {"facts": []}.

Example conversation (it took place on 4 March 2024):
[user]: I moved to Lisbon last year and I teach maths. Any tips for getting around?
[Person A]: I'm a nurse, I work nights. Yesterday my daughter and I went to a fado concert.
[assistant]: Nice to meet you both! For Lisbon I recommend the 28 tram.
Example answer:
{"facts": [{"subject": "the user", "statement": "The user moved to Lisbon in 2023.", "owner": \
"user", "category": "basic_info", "profile_field": "location"}, {"subject": "the user", \
"statement": "The user is a maths teacher.", "owner": "user", "category": "basic_info", \
"profile_field": "occupation"}, {"subject": "Person A", "statement": "Person A is a nurse who \
works nights.", "owner": "user", "category": "work", "profile_field": null}, {"subject": \
"Person A", "statement": "Person A has a daughter.", "owner": "user", "category": \
"relationship", "profile_field": null}, {"subject": "Person A", "statement": "Person A went to \
a fado concert with her daughter on 3 March 2024.", "owner": "user", "category": "other", \
"profile_field": null}, {"subject": "assistant", \
"statement": "The assistant recommended the 28 tram in Lisbon.", "owner": "agent", "category": \
"other", "profile_field": null}]}

Example conversation:
[user]: I'm vegan, so no meat for me. Long day today.
[assistant]: Noted, you're vegan! Sounds like you need coffee, lots of coffee. Hang in there!
Example answer:
{"facts": [{"subject": "the user", "statement": "The user is vegan.", "owner": "user", \
"category": "preference", "profile_field": null}]}

Example conversation:
[user]: hi, how are you?
[assistant]: Fine, thanks! How can I help?
Example answer:
{"facts": []}

Example conversation:
[user]: How do I reverse a list in Python?
[assistant]: Use reversed(items) or items[::-1].
Example answer:
{"facts": []}
"""

LANGUAGE_INSTRUCTIONS = {
    "en": "Write the statements in English.",
    "zh": "The conversation is in Chinese: write the statements in Chinese, starting with 用户 "
    "for the current user.",
}


class FactDraft(BaseModel):
    """One fact as the LLM wrote it (before attribution is enforced)."""

    model_config = ConfigDict(extra="ignore")

    subject: str = Field(default="", max_length=200)
    statement: str = Field(min_length=1, max_length=1_000)
    owner: str | None = None
    category: str | None = None
    profile_field: str | None = None


class SemanticExtractor:
    """Extracts semantic facts (subject, statement, owner, category) from a snapshot."""

    memory_type: MemoryType = "semantic"
    prompt_version = "semantic-5"

    def worth_asking(self, snapshot: SnapshotPromoted) -> bool:
        """Not a conversation of pleasantries only (`only_pleasantries`)."""
        return not only_pleasantries(transcript_of(snapshot))

    def prompt(self, snapshot: SnapshotPromoted) -> list[dict[str, str]]:
        return conversation_prompt(SYSTEM_PROMPT, LANGUAGE_INSTRUCTIONS, snapshot, dated=True)

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        transcript = transcript_of(snapshot)
        turns = dated_turns(snapshot)
        memories: dict[tuple[str, str], MemoryContent] = {}
        for index, item in enumerate(items_under(answer, "facts")):
            draft = validated(FactDraft, item, "facts", index)
            memory = _memory_from(draft, transcript, index, turns)
            if memory is not None:
                memories.setdefault((memory.subject.casefold(), memory.text.casefold()), memory)
        return list(memories.values())


def _memory_from(
    draft: FactDraft, transcript: Transcript, index: int, turns: list[tuple[date, str]]
) -> MemoryContent | None:
    statement = _chinese_copy_in_third_person(one_line(draft.statement), draft.subject, transcript)
    if not statement or in_first_person(statement):
        return None  # a quoted message, not a fact: whose "I" it is cannot be known for sure
    if _narrates_the_conversation(statement, transcript.names):
        return None  # "The user asked about …", "…?": what was said, not what is true
    if _without_content(statement) or _only_a_name(statement, transcript):
        return None  # "The user shared a photo.", "Melanie is Melanie.": nothing to remember
    statement = ground_relative_times(statement, turns).text
    if _invents_a_name(statement, transcript):
        return None  # "The user moved to France" when no one said France
    attribution = _attribution(draft.subject, statement, transcript, index)
    if attribution.kind == "current_user" and names_the_user_as_another(
        statement, transcript.user_name
    ):
        return None  # "The user is a collaborator of Calvin's." when the user is Calvin
    borrowed = borrowed_from(statement, attribution, transcript)
    if borrowed is not None:
        if borrowed.moved is None:
            return None  # "The user went to a car show with Dave." when Dave went
        statement, attribution = borrowed.moved, borrowed.owner
    if not _grounded(attribution, without_dates(statement), transcript):
        return None
    if attribution.kind == "assistant" and not assistant_provided(statement, transcript):
        return None
    if attribution.kind == "current_user":
        statement = with_user_as_subject(statement, transcript.user_name)
    category = draft.category if draft.category in CATEGORIES else "other"
    profile_field = draft.profile_field if attribution.subject == USER_SUBJECT else None
    attributes = {"profile_field": profile_field} if profile_field in PROFILE_FIELDS else {}
    return MemoryContent(
        subject=attribution.subject,
        owner=attribution.owner,
        text=statement,
        category=category,
        attributes=attributes,
    )


_COPIED_I = re.compile(r"我(?!们)")


def _chinese_copy_in_third_person(statement: str, subject: str, transcript: Transcript) -> str:
    """A Chinese message copied as a fact ("我吃纯素。"), rewritten about its speaker ("用户吃纯
    素。") when it is plainly theirs: it opens with 我, the LLM gave it a person as subject, and
    at least half of it rests on that person's own messages. Chinese has no verb agreement, so
    replacing 我 is safe; an English "I am" is not rewritten (and is dropped). Anything else in
    the first person is left for the first-person filter to drop.
    """
    if not statement.startswith("我") or statement.startswith("我们"):
        return statement
    try:
        person = canonical_subject(
            subject, user_name=transcript.user_name, speaker_names=transcript.speaker_names
        )
    except ValueError:
        return statement
    if person.kind == "assistant" or (
        person.kind == "third_party" and person.subject not in transcript.speaker_names
    ):
        return statement
    names = transcript.names
    share = support(statement, transcript.said_by(person), names=names)
    if share is None or share < 0.5:
        return statement
    return _COPIED_I.sub("用户" if person.kind == "current_user" else person.subject, statement)


def _attribution(subject: str, statement: str, transcript: Transcript, index: int) -> Attribution:
    """Whose fact this is: the participant the statement opens with wins over the LLM's field."""
    user_name, speakers = transcript.user_name, transcript.speaker_names
    raw = subject_in_statement(statement, user_name=user_name, speaker_names=speakers) or subject
    try:
        return canonical_subject(raw, user_name=user_name, speaker_names=speakers)
    except ValueError as exc:
        raise InvalidExtraction(f'"facts"[{index}].subject: {exc}') from exc


_NOT_A_LASTING_FACT = re.compile(
    r"^(the user|user)\s+(should|ought to|might want to|could try|is advised to)\b"
    r"|^(the user|user)\s+(is|feels|felt|was|seems)\s+(so\s+|very\s+|really\s+|a bit\s+)?"
    r"(tired|exhausted|sleepy|hungry|bored|sad|happy|excited|stressed)\b(?!.*\b(often|always|usually))"
    r"|^用户(应该|最好|可以考虑)"
    r"|^用户(今天|现在|此刻)?.{0,6}(好累|很累|累了|好困|很困|好饿|很饿|无聊|开心|难过)",
    re.IGNORECASE,
)
"""Advice the assistant gave, restated as the user's ("The user should pack light layers."),
and a passing mood or state ("The user is tired.", "用户今天上班好累啊。"): neither is a lasting
fact about the user. A habit ("The user is often tired in the mornings") is one."""


_WITHOUT_CONTENT = re.compile(
    r"^\S+(\s+\S+)?\s+(has\s+|had\s+)?(shared|shares|sent|sends|showed|shows|posted|posts)\s+"
    r"(a|an|some|the|his|her|their)?\s*(photo|picture|pic|image|video|link|file)s?\s*"
    r"(with\s+\S+(\s+\S+)?)?\s*\.?$"
    r"|^\S+(\s+\S+)?\s+(is|was)\s+(happy|glad|excited)\s+to\s+(see|hear|chat|talk)\b.{0,40}$"
    r"|^(用户|\S{1,6})(分享|发)了(一张|一些)?(照片|图片|视频|链接)。?$",
    re.IGNORECASE,
)
"""A statement with nothing in it to remember: a photo shared without what it shows, the
pleasure of a chat ("Melanie is happy to hear from the user.")."""


def _without_content(statement: str) -> bool:
    return _WITHOUT_CONTENT.match(statement) is not None


_NAMING = re.compile(
    r"^(?P<who>.{1,40}?)\s+(is|was)\s+(called\s+|named\s+)?(?P<name>[^\s.,;]{1,40})\s*\.?$"
    r"|^(?P<zh_who>\S{1,10}?)(是|叫)(?P<zh_name>[^\s。\uff0c]{1,10})。?$",
    re.IGNORECASE,
)


def _only_a_name(statement: str, transcript: Transcript) -> bool:
    """A statement that says only who someone is by a name the conversation already gives:
    "Melanie is Melanie.", or "The user is Caroline." when Caroline is the user's name (the
    profile takes it from the messages). "The user is Caroline." from a user without a name
    stays: then it is news."""
    found = _NAMING.match(statement)
    if found is None:
        return False
    who = (found["who"] or found["zh_who"] or "").strip().casefold()
    name = (found["name"] or found["zh_name"] or "").strip().casefold()
    known = {n.casefold() for n in transcript.speaker_names}
    if transcript.user_name:
        known.add(transcript.user_name.casefold())
    return name == who or name in known


_ABOUT_THE_CONVERSATION = re.compile(
    r"^(the|this|our|their)\s+(conversation|chat|discussion|talk)\s+"
    r"(took place|takes place|is taking place|happened|happens|was held|is held|occurred"
    r"|was on|is on)\b"
    r"|^(the\s+)?date of (the|this) (conversation|chat)\b"
    r"|^(这次|本次|此次)?(对话|聊天|谈话)(发生|进行)?(在|于|是在)"
    r"|^(这次|本次|此次)?(对话|聊天)日期",
    re.IGNORECASE,
)
"""A sentence about when the conversation itself took place, often the prompt's own date
sentence copied back ("The conversation took place on Wednesday, 1 February 2023."): every
memory already carries the date it was said on."""


def _narrates_the_conversation(statement: str, names: list[str]) -> bool:
    """A question, or a sentence about the conversation itself rather than about a person:
    what was said, when it took place, advice given in it, or a passing mood."""
    return (
        statement.endswith(("?", "\uff1f"))
        or only_narration(statement, names)
        or _ABOUT_THE_CONVERSATION.match(statement) is not None
        or _NOT_A_LASTING_FACT.match(statement) is not None
    )


def _invents_a_name(statement: str, transcript: Transcript) -> bool:
    said = [m.content for m in transcript.messages]
    return bool(invented_names(without_dates(statement), said, names=transcript.names))


def _grounded(attribution: Attribution, statement: str, transcript: Transcript) -> bool:
    """Whether the fact can stand: a person it names takes part in or is named in the
    conversation (an example's placeholder or an invented name does not), what it says rests on
    that person's own messages (the user's allergy is not John's because it came right after
    John spoke), and an assistant fact says what the assistant did ("The assistant recommended
    …") instead of copying its reply."""
    if attribution.kind == "third_party" and (
        attribution.subject.casefold() not in transcript.text.casefold()
    ):
        return False
    names = [attribution.subject, *transcript.speaker_names]
    if transcript.user_name:
        names.append(transcript.user_name)
    evidence = transcript.evidence_for(attribution.subject, attribution.kind)
    if not rests_on(statement, evidence, names=names):
        return False
    if attribution.kind == "assistant":
        opening = subject_in_statement(
            statement, user_name=transcript.user_name, speaker_names=transcript.speaker_names
        )
        return opening == "assistant"
    return True
