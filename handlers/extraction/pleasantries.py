"""Pleasantries: a conversation with nothing in it but greetings, thanks and goodbyes.

Small models still write memories for "hi, how are you?" / "fine, thanks!" ("The user is fine."),
so a conversation in which no person says anything but pleasantries is not sent to the LLM at
all (`only_pleasantries`): no call, no memory. A message holds more than a pleasantry when a
content word is left after its pleasantry phrases, the speakers' names and the stopwords are
taken out.
"""

from __future__ import annotations

import re

from handlers.attribution import evidence_terms
from handlers.extraction.transcript import Transcript

_PLEASANTRY = re.compile(
    r"\b(hi+|hello|hey+|hiya|howdy|yo|good (morning|afternoon|evening|night|day)|"
    r"how('s| is| are| have)? (it going|you( been| doing)?|things|everything|life|u)|"
    r"what'?s up|sup|long time no (see|talk|chat)|nice (to|2) (see|meet|hear from) you|"
    r"great to (see|hear from|chat with) you|good to (see|hear from) you|"
    r"(i'?m |i am |all )?(fine|good|great|well|ok|okay|alright|not bad)( too| thanks)?|"
    r"thanks?( you| a lot| so much)?|thank you( so much| very much)?|thx|ty|cheers|"
    r"you'?re welcome|no problem|np|bye+|goodbye|see (you|ya)( later| soon)?|take care|"
    r"talk (to you )?(later|soon)|ttyl|have a (nice|good|great) (day|one|evening|weekend)|"
    r"you too|same here|and you|how about you|you|lol|haha+|ok+|okay|sure|yes|yeah|yep|no|nope|"
    r"cool|nice|great|awesome|wow)\b"
    r"|你好|您好|嗨|哈喽|早上好|下午好|晚上好|早安|晚安|谢谢|多谢|感谢|不客气|再见|拜拜|回头见|"
    r"最近怎么样|最近好吗|你好吗|你呢|我也|挺好的|很好|还好|不错|好的|好|嗯|哈哈+|是的|没问题",
    re.IGNORECASE,
)


def is_pleasantry(text: str, names: list[str]) -> bool:
    """Whether a message says nothing but pleasantries (and names)."""
    rest = _PLEASANTRY.sub(" ", text.replace("\u2019", "'"))
    return not evidence_terms(rest, ignore=names)


def only_pleasantries(transcript: Transcript) -> bool:
    """Whether every message a person wrote in the conversation is a pleasantry (a
    conversation with no person's message counts too: there is nothing of theirs to learn)."""
    names = transcript.names
    return all(is_pleasantry(text, names) for text in transcript.humans_said)
