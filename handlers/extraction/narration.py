"""Narration: sentences that tell what the people in a conversation said to each other.

Small models write the conversation's exchanges as memories: "John told the user that books
can inspire us.", "John congratulated the user on the new job! He asked how it happened.",
"The user thanked John for the encouragement.", "The user expressed gratitude to John for
offering to help." None of them says what is true of anyone beyond the exchange itself, and
the fact an exchange carries ("the user writes about fantasy novels") is extracted as a fact
of its own. In a context window they take the room of what a question asks about
(docs/architecture.md, "Speakers").

A sentence narrates when it opens with someone in the conversation — "the user", "the
assistant", a speaker's name, or a pronoun standing for one — followed by a verb of talking
to someone or a social courtesy: said, replied, greeted, expressed gratitude …; asked,
thanked, congratulated, praised, encouraged, wished, reassured … someone in the conversation
(or asked about / what …); told someone in the conversation that / how / what … ("用户问",
"约翰感谢用户", "她祝贺用户" in Chinese). "asked her boss for a raise" is not an exchange of
the conversation, and verbs that carry an event or a thing ("shared his surfing story",
"discussed the fan project", "told the user about her trip") do not narrate: "told … about"
is left out on purpose, since what it is about is often the event worth keeping.

A fact or an episode is dropped only when every one of its sentences narrates (`only_narration`):
a later sentence may still say what is true or what happened ("The user asked John about his
new job. John works at a bank now." stays).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SAYING = (
    r"(says?|said|saying|greets?|greeted|greeting|answers?|answered|answering|"
    r"repl(y|ies|ied)|replying|respond(s|ed)?|responding|(agree[sd]?|agreeing) with|"
    r"wants to know|wanted to know|provides tips|understands|"
    r"(express(es|ed)?|show(s|ed)?|convey(s|ed)?) (his |her |their |its )?"
    r"(gratitude|thanks|appreciation)|"
    r"(learn(s|ed|t)?|found out|finds out|was told|got told) (how|that|about|what|why))\b"
)
"""Verbs that tell what was said whoever it was said to."""
_ADDRESSING = (
    r"(asks?|asked|asking|thanks?|thanked|thanking|congratulat(es?|ed|ing)|compliment(s|ed)?|"
    r"prais(es?|ed)|encourag(es?|ed)|wish(es|ed)|reassur(es?|ed)|apologi[sz](es?|ed) to|"
    r"welcom(es?|ed))\s+(by\s+)?"
)
"""Verbs of an exchange when what follows is someone in the conversation or what was asked
("asked the user …", "asked about …", "asked for …", "thanked John"); "asked her boss for a
raise" is not."""
_TELLING = r"(told|tells)\s+"
"""Told someone in the conversation that, how, what …; "told the user about her trip" is left."""
_AFTER_HER = r"\s(about|what|how|why|when|where|whether|if|that|to|for|on)\b"
""""her" as the one addressed ("thanked her for …"), not a possessive ("asked her boss")."""
_ASKED_WHAT = r"(about|for|what|how|why|when|where|whether|if|which|who)\b"
"""What may follow an exchange's verb instead of the one addressed: "asked for a packing list"."""
_CLAUSE_WORD = r"(that|how|what|why|when|where|whether|if)\b"
# Chinese drops a clause's subject when it is the previous one's ("并询问如何找到的"), and
# thanks or congratulates "towards" someone ("刘洋对王芳的好消息表示祝贺").
_ZH_SPEECH = (
    r"(询问|问了|问|打招呼|感谢|谢谢|祝贺|恭喜|称赞|夸|鼓励|安慰|回答|回复|了解到|学会了怎么|得知)"
)

_PRONOUN = r"he|she|they"
_ZH_PRONOUN = r"他们|她们|他|她"
_PARTY = r"the user|user|the assistant|assistant|the ai assistant"
_ZH_PARTY = r"用户|助手"

_CLAUSE = re.compile(r"(?<=[.!?;])\s+|(?<=[\u3002\uff01\uff1f\uff0c\uff1b])")
"""Where a sentence ends, and where a Chinese clause does: Chinese chains its statements with
full-width commas (U+FF0C), English with full stops."""


def _opening(names: Iterable[str]) -> re.Pattern[str]:
    named = "|".join(
        re.escape(name) for name in sorted({n for n in names if n.strip()}, key=len, reverse=True)
    )
    people = f"{_PARTY}|{_PRONOUN}" + (f"|{named}" if named else "")
    zh_people = f"{_ZH_PARTY}|{_ZH_PRONOUN}" + (f"|{named}" if named else "")
    addressed = rf"({people}|him|them|each other|her(?=\s*([.,!?;]|$|{_AFTER_HER})))\b"
    return re.compile(
        rf"^({people})\s+(is\s+|was\s+|also\s+|then\s+|has\s+|had\s+)?"
        rf"({_SAYING}|{_ADDRESSING}({addressed}|{_ASKED_WHAT})|{_TELLING}{addressed}\s+"
        rf"{_CLAUSE_WORD})"
        rf"|^({zh_people})?(也|还|又|先|并|并且|然后)?{_ZH_SPEECH}"
        rf"|^({zh_people})(对|向|跟|和).{{1,15}}?表示(了)?(祝贺|感谢|谢意|恭喜|关心|鼓励)",
        re.IGNORECASE,
    )


def narrates(sentence: str, names: Iterable[str] = ()) -> bool:
    """Whether the sentence opens by telling what a participant (`names`: the conversation's
    speakers and the user's name, besides "the user" and "the assistant") said to someone."""
    return _opening(names).match(sentence.strip()) is not None


def only_narration(text: str, names: Iterable[str] = ()) -> bool:
    """Whether every sentence of the text (every clause, in Chinese) narrates the conversation
    (`narrates`): "John congratulated the user! He asked how it happened." does; "张伟恭喜李娜"
    followed by a comma and "李娜的女儿在学钢琴" does not."""
    opening = _opening(names)
    parts = [part.strip() for part in _CLAUSE.split(text) if part.strip()]
    return bool(parts) and all(opening.match(part) for part in parts)
