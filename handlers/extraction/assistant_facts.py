"""What the AI assistant provided: the one kind of fact about the assistant a memory keeps
(docs/architecture.md, "Speakers"; used by `handlers.extraction.semantic`).

Small models turn the assistant's replies into memories ("The assistant recommended coffee all
day." after "Long day today.", "Assistant noted that the user is vegan."). `assistant_provided`
keeps an assistant fact only when it records something the assistant provided because it was
asked: a recommendation, a plan or a list the user may refer to later.
"""

from __future__ import annotations

import re

from handlers.attribution import ASSISTANT, evidence_terms
from handlers.extraction.drafts import support
from handlers.extraction.transcript import Transcript

_PROVIDING = re.compile(
    r"^(the\s+)?(ai\s+)?assistant\s+(has\s+|had\s+|also\s+)?"
    r"(recommend|suggest|propos|provid|gave|give|creat|wrote|writ|draft|prepar|plann|plan|"
    r"made|make|shar|list|outlin|compil|design|buil|calculat|found|select|chose|picked|"
    r"book|schedul|translat|summari[sz]|generat|put together|came up with|pointed)"
    r"|^(the\s+)?(ai\s+)?assistant['\u2019]s\s+(\w+\s+)?"
    r"(recommend|suggest|advice|plan|list|propos|itinerar|recipe|schedul|draft|pick|choice)"
    r"|^(ai\s*)?助手(还|也|已经|已)?(推荐|建议|提供|给出|给了|制定|列出|列了|写了|编写|起草|安排|规划|"
    r"设计|整理|准备|提出|计算|翻译|总结|预订|预定|挑选|选了|选择|找到)",
    re.IGNORECASE,
)
"""How a statement about something the assistant provided opens: "The assistant recommended …",
"The assistant's suggested itinerary …", "助手推荐了…". Anything else the assistant "did" in a
conversation (noted, said, agreed, understood, joked, wished …) describes a reply, not a memory."""

_GENERIC_ANSWER = re.compile(
    r"^(the\s+)?(ai\s+)?assistant\s+(has\s+|had\s+|also\s+)?(provid|gave|give|shar)\w*\s+"
    r"(the user\s+(with\s+)?)?(some\s+|general\s+|more\s+|useful\s+|helpful\s+)*"
    r"(information|info|details|an? explanation|explanations|an? overview|an? answer|answers|"
    r"facts|data|insights?)\b"
    r"|^(ai\s*)?助手(提供|给出|介绍|解释)了?(一些|相关)?(信息|资料|解释|说明|答案|介绍)",
    re.IGNORECASE,
)
"""An answer to a general question ("The assistant provided information about the weather in
Reykjavik …"): general knowledge, which the prompt already excludes, not something provided for
the user to come back to."""

_PROVIDING_TERMS = frozenset(
    evidence_terms(
        "recommended suggested proposed provided gave created wrote drafted prepared planned "
        "made shared listed outlined compiled designed built calculated found selected chose "
        "picked booked scheduled translated summarised summarized generated advice 推荐建议提供"
    )
)

_REQUEST = re.compile(
    r"[?\uff1f]|\b(recommend|suggest|advice|advise|ideas?|tips?|help|need|want|looking for|"
    r"should i|can you|could you|would you|will you|please|pls|give me|tell me|show me|"
    r"find|book|make|write|plan|create|draft|list|compare|pick|choose)\b"
    r"|推荐|建议|帮|需要|想要|请|怎么|哪|什么|吗|能不能|可不可以|给我",
    re.IGNORECASE,
)
"""A question or a request in a person's message: what makes the assistant's answer something
it *provided* rather than a reply to small talk."""


def assistant_provided(statement: str, transcript: Transcript) -> bool:
    """Whether an assistant statement records something the AI assistant provided.

    The reported failure: small models turn the assistant's replies into memories ("The
    assistant recommended coffee all day." after "Long day today.", "Assistant noted that the
    user is vegan."). An `agent` memory is kept only when all three hold, in this order:

    1. it opens with a providing verb (`_PROVIDING`): recommended, suggested, planned, listed …;
       never noted, said, agreed, understood, which describe a reply; nor "provided
       information / an explanation" (`_GENERIC_ANSWER`), an answer to a general question;
    2. someone in the conversation asked for something (`_REQUEST`: a question mark or a
       request word), so the assistant answered a need instead of making small talk;
    3. it carries content the assistant said and the people did not (a term of the assistant's
       messages absent from every person's messages, besides the providing verb): restating
       the user's own fact ("The assistant recommended a vegan diet" to a vegan) adds nothing.
       A statement in another script than the conversation cannot be compared word by word
       and passes this step.
    """
    if _PROVIDING.match(statement) is None or _GENERIC_ANSWER.match(statement):
        return False
    if not any(_REQUEST.search(text) for text in transcript.humans_said):
        return False
    names = transcript.names
    claimed = evidence_terms(statement, ignore=names) - _PROVIDING_TERMS
    novel = claimed - _terms(transcript.humans_said, names)
    assistant_said = transcript.said_by(ASSISTANT)
    if support(statement, assistant_said, names=names) is None:
        return True  # another script: words cannot be compared
    return bool(novel & _terms(assistant_said, names))


def _terms(texts: list[str], names: list[str]) -> set[str]:
    terms: set[str] = set()
    for text in texts:
        terms |= evidence_terms(text, ignore=names)
    return terms
