"""The labelled memory pairs and the scope each one is reconciled in (pure: vectors are passed in).

A pair (``pairs.json``) is an *existing* memory, a *new* one, and what reconciling the new one
must do: ``REINFORCE`` the existing memory (kind ``paraphrase``), ``UPDATE`` it (``update``: the
same attribute with a changed value), or ``ADD`` a memory beside it (``different-fact``: another
fact about the same subject; ``different-subject``: the same statement about someone else).
``topics`` are coarse labels ("home", "job", "pet" …) of what the pair is about; ``hard`` marks
near-identical wording with a changed value, or the same meaning in very different words.

The scope (`scope_for`) is what the reconciler knows when the new memory arrives: the pair's
existing memory plus up to N *distractors* — existing memories of other pairs about the new
memory's subject, of the same memory type and language, whose topics share none of the pair's,
most similar to the new memory first. They make the LLM pick the right number among similar
memories, as it must in a real store, and they may outrank the pair's own memory (a distractor
above `reinforce` is reinforced without asking, which counts as a wrong decision). Disjoint
topics are what keep a distractor from being a right answer itself: "The user lives in Lisbon."
is never a distractor for "The user has moved to Porto.".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from events.memories import ASSISTANT_SUBJECT, MEMORY_TYPES, MemoryContent, MemoryType
from handlers.known_memory import KnownMemory
from handlers.reconcile import Action
from handlers.subjects import same_subject
from handlers.vectors import cosine

Kind = Literal["paraphrase", "update", "different-fact", "different-subject"]
KINDS: tuple[Kind, ...] = get_args(Kind)
EXPECTED: Mapping[Kind, Action] = {
    "paraphrase": "REINFORCE",
    "update": "UPDATE",
    "different-fact": "ADD",
    "different-subject": "ADD",
}
"""The only decision each kind of pair allows."""
LANGUAGES = ("en", "zh")
DEFAULT_PAIRS_FILE = Path(__file__).with_name("pairs.json")


class PairFormatError(ValueError):
    """A labelled pair that does not follow the format; the message names the pair."""


@dataclass(frozen=True)
class Pair:
    """One labelled pair (module doc)."""

    id: str
    language: str
    memory_type: MemoryType
    kind: Kind
    topics: frozenset[str]
    hard: bool
    existing: MemoryContent
    new: MemoryContent
    note: str = ""

    @property
    def expected(self) -> Action:
        return EXPECTED[self.kind]

    @property
    def existing_id(self) -> str:
        """The memory id the pair's existing memory has in every scope."""
        return f"{self.id}/existing"


def parse_pairs(raw: object) -> list[Pair]:
    """Pairs from the decoded JSON of a pairs file (``{"pairs": [...]}``), validated."""
    items = raw.get("pairs") if isinstance(raw, Mapping) else None
    if not isinstance(items, list) or not items:
        raise PairFormatError('a pairs file holds {"pairs": [ ... ]}, a non-empty list')
    pairs = [_pair(item, index) for index, item in enumerate(items)]
    ids = [pair.id for pair in pairs]
    duplicates = sorted({pair_id for pair_id in ids if ids.count(pair_id) > 1})
    if duplicates:
        raise PairFormatError(f"duplicate pair ids: {', '.join(duplicates)}")
    return pairs


def _pair(item: object, index: int) -> Pair:
    if not isinstance(item, Mapping):
        raise PairFormatError(f"pair {index}: expected an object")
    pair_id = item.get("id")
    if not isinstance(pair_id, str) or not pair_id or "/" in pair_id:
        raise PairFormatError(f"pair {index}: 'id' must be a non-empty string without '/'")
    where = f"pair {pair_id}"
    kind, language, memory_type = item.get("kind"), item.get("language"), item.get("memory_type")
    if kind not in KINDS:
        raise PairFormatError(f"{where}: 'kind' must be one of {', '.join(KINDS)}")
    if language not in LANGUAGES:
        raise PairFormatError(f"{where}: 'language' must be one of {', '.join(LANGUAGES)}")
    if memory_type not in MEMORY_TYPES:
        raise PairFormatError(f"{where}: 'memory_type' must be one of {', '.join(MEMORY_TYPES)}")
    if item.get("expected") != EXPECTED[kind]:
        raise PairFormatError(f"{where}: a {kind} pair expects {EXPECTED[kind]}")
    topics = item.get("topics")
    if not isinstance(topics, list) or not topics or not all(isinstance(t, str) for t in topics):
        raise PairFormatError(f"{where}: 'topics' must be a non-empty list of strings")
    existing = _content(item.get("existing"), f"{where}: existing")
    new = _content(item.get("new"), f"{where}: new")
    if (kind == "different-subject") == same_subject(memory_type, existing, new):
        raise PairFormatError(
            f"{where}: only a different-subject pair has memories about different subjects"
        )
    return Pair(
        id=pair_id,
        language=language,
        memory_type=memory_type,
        kind=kind,
        topics=frozenset(topics),
        hard=bool(item.get("hard", False)),
        existing=existing,
        new=new,
        note=str(item.get("note") or ""),
    )


def _content(raw: object, where: str) -> MemoryContent:
    """A memory as the extractors write it; `owner` defaults from the subject (the assistant's
    memories are the agent's)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("text"), str):
        raise PairFormatError(f"{where}: expected an object with 'subject' and 'text'")
    subject = str(raw.get("subject") or "")
    owner = raw.get("owner") or ("agent" if subject.casefold() == ASSISTANT_SUBJECT else "user")
    try:
        return MemoryContent.model_validate({**raw, "owner": owner})
    except ValueError as exc:
        raise PairFormatError(f"{where}: {exc}") from exc


def texts(pairs: Sequence[Pair]) -> list[str]:
    """Every distinct memory text of the pairs, in a stable order (what to embed)."""
    return list(dict.fromkeys(text for p in pairs for text in (p.existing.text, p.new.text)))


def known(pair: Pair, vectors: Mapping[str, Sequence[float]], model: str) -> KnownMemory:
    """The pair's existing memory as the reconciler knows it (version 1)."""
    return KnownMemory(
        memory_id=pair.existing_id,
        version=1,
        content=pair.existing,
        embedding=tuple(vectors[pair.existing.text]),
        embedding_model=model,
    )


def distractors(
    pair: Pair, pairs: Sequence[Pair], vectors: Mapping[str, Sequence[float]], count: int
) -> list[Pair]:
    """The other pairs whose existing memory is a distractor for `pair` (module doc), most
    similar to the new memory first (ties by id)."""
    eligible = [
        other
        for other in pairs
        if other.id != pair.id
        and other.memory_type == pair.memory_type
        and other.language == pair.language
        and not other.topics & pair.topics
        and other.existing.text != pair.new.text
        and same_subject(pair.memory_type, other.existing, pair.new)
    ]
    new = vectors[pair.new.text]
    eligible.sort(key=lambda other: (-cosine(new, vectors[other.existing.text]), other.id))
    return eligible[:count]


def scope_for(
    pair: Pair,
    pairs: Sequence[Pair],
    vectors: Mapping[str, Sequence[float]],
    *,
    model: str,
    distractor_count: int,
) -> list[KnownMemory]:
    """What the reconciler knows when the pair's new memory arrives: its existing memory and
    up to `distractor_count` distractors (each under its own pair's existing id)."""
    others = distractors(pair, pairs, vectors, distractor_count)
    return [known(pair, vectors, model), *(known(other, vectors, model) for other in others)]
