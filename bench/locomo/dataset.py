"""Reading the LoCoMo data set format (`locomo10.json`, Maharana et al., ACL 2024).

The file is a list of samples::

    {"sample_id": "conv-26",
     "conversation": {"speaker_a": "Caroline", "speaker_b": "Melanie",
                      "session_1_date_time": "1:56 pm on 8 May, 2023",
                      "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "...",
                                     "img_url": [...], "blip_caption": "..."}, ...], ...},
     "qa": [{"question": "...", "answer": "...", "evidence": ["D1:3"], "category": 2}, ...],
     "observation": {...}, "session_summary": {...}, "event_summary": {...}}

Category 5 (adversarial) questions carry `adversarial_answer` instead of `answer`; they are
kept here (`QA.adversarial`) and left out by the scoring, as the papers do. The numeric
categories follow the LoCoMo evaluation code (`task_eval/evaluation.py`, whose category 1 is the
one scored by splitting sub-answers, i.e. multi-hop) and the question counts of the paper:
1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial. mem0's evaluation
labelled 1 as single-hop and 3 as multi-hop (mem0ai/mem0 issue #2609); BENCHMARKS.md says how
to compare.

Two layouts of the public data are read (`load`): that list in one JSON file (`locomo10.json`,
as the papers used it), and the archive its repository ships today (`data/locomo10.zip`: one
JSON per conversation, ``26.json`` …, each the ``conversation`` object itself with ``qa``,
``session_N_summary``, ``session_N_observation`` and ``events_session_N`` beside the sessions,
and no ``sample_id``: the file name gives it, ``conv-26``). A directory of such files, or a
single one, is read too.

`first_sessions` keeps a conversation's first N sessions and only the questions whose evidence
lies in them, so a CPU run can take a slice that fits in an hour.

The data set's licence is non-commercial: it is read from a path the user gives, never
downloaded and never committed. `bench/locomo/synthetic.json` is a small conversation in the
same format written for the tests.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL = 5
SCORED_CATEGORIES = (1, 2, 3, 4)

_MONTHS = {
    name: index
    for index, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
_DATE_TIME = re.compile(
    r"^\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<half>am|pm)\s+on\s+"
    r"(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]+),?\s+(?P<year>\d{4})\s*$",
    re.IGNORECASE,
)
_SESSION_KEY = re.compile(r"^session_(?P<number>\d+)$")
_FLAT_EXTRA = re.compile(r"^(session_\d+_(summary|observation)|events_session_\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")


class LocomoFormatError(ValueError):
    """The file does not follow the LoCoMo format; the message says where."""


@dataclass(frozen=True)
class Turn:
    speaker: str
    dia_id: str
    text: str
    blip_caption: str | None = None

    @property
    def content(self) -> str:
        """What was said, with a shared photo described by its caption (as the LoCoMo
        baselines show it to their models)."""
        if self.blip_caption:
            return f"{self.text} [shares {self.blip_caption}]".strip()
        return self.text


@dataclass(frozen=True)
class Session:
    number: int
    date_time: str
    at: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class QA:
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...] = ()
    adversarial_answer: str | None = None

    @property
    def adversarial(self) -> bool:
        return self.category == ADVERSARIAL

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, f"category {self.category}")


@dataclass(frozen=True)
class Sample:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    qa: tuple[QA, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """observation, session_summary, event_summary: kept as they are (not used for answers)."""

    @property
    def turn_count(self) -> int:
        return sum(len(session.turns) for session in self.sessions)

    def session_of(self, dia_id: str) -> Session | None:
        for session in self.sessions:
            if any(turn.dia_id == dia_id for turn in session.turns):
                return session
        return None


def parse_date_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as a UTC datetime (the data set names no time zone)."""
    match = _DATE_TIME.match(text)
    if match is None:
        raise LocomoFormatError(f"unreadable session date {text!r}")
    month = _MONTHS.get(match["month"].lower())
    if month is None:
        raise LocomoFormatError(f"unknown month in session date {text!r}")
    hour = int(match["hour"]) % 12 + (12 if match["half"].lower() == "pm" else 0)
    return datetime(
        int(match["year"]), month, int(match["day"]), hour, int(match["minute"]), tzinfo=UTC
    )


def _text(value: Any) -> str:
    if isinstance(value, list):  # a few answers are lists in derived versions of the file
        return ", ".join(str(item) for item in value)
    return "" if value is None else str(value)


def _qa(item: Any, where: str) -> QA:
    if not isinstance(item, dict) or "question" not in item or "category" not in item:
        raise LocomoFormatError(f"{where}: a QA needs 'question' and 'category'")
    category = int(item["category"])
    if category != ADVERSARIAL and "answer" not in item:
        raise LocomoFormatError(f"{where}: a category {category} QA needs 'answer'")
    return QA(
        question=str(item["question"]),
        answer=_text(item.get("answer")),
        category=category,
        evidence=tuple(str(e) for e in item.get("evidence") or ()),
        adversarial_answer=(
            _text(item["adversarial_answer"]) if "adversarial_answer" in item else None
        ),
    )


def _turn(item: Any, where: str, speakers: tuple[str, str]) -> Turn:
    if not isinstance(item, dict) or not {"speaker", "dia_id", "text"} <= item.keys():
        raise LocomoFormatError(f"{where}: a turn needs 'speaker', 'dia_id' and 'text'")
    if item["speaker"] not in speakers:
        raise LocomoFormatError(
            f"{where}: speaker {item['speaker']!r} is neither {speakers[0]!r} nor {speakers[1]!r}"
        )
    caption = item.get("blip_caption")
    return Turn(
        speaker=str(item["speaker"]),
        dia_id=str(item["dia_id"]),
        text=str(item["text"]),
        blip_caption=str(caption) if caption else None,
    )


def parse_sample(data: Any, *, sample_id: str | None = None) -> Sample:
    """One sample, in either layout (module doc); `LocomoFormatError` names what is missing.

    A flat conversation (the archive's layout) has no ``sample_id``: `sample_id` names it."""
    if isinstance(data, dict) and "conversation" not in data and "speaker_a" in data:
        data = _nested(data, sample_id)
    if not isinstance(data, dict) or "conversation" not in data:
        raise LocomoFormatError("a sample needs 'conversation' (or 'speaker_a' and sessions)")
    sample_id = str(data.get("sample_id") or sample_id or "")
    if not sample_id:
        raise LocomoFormatError("a sample needs 'sample_id'")
    conversation = data["conversation"]
    try:
        speakers = (str(conversation["speaker_a"]), str(conversation["speaker_b"]))
    except KeyError as missing:
        raise LocomoFormatError(f"{sample_id}: conversation without {missing}") from None
    sessions = []
    for key, turns in conversation.items():
        match = _SESSION_KEY.match(key)
        if match is None:
            continue
        number = int(match["number"])
        date_key = f"{key}_date_time"
        if date_key not in conversation:
            raise LocomoFormatError(f"{sample_id}: {key} without {date_key}")
        date_time = str(conversation[date_key])
        sessions.append(
            Session(
                number=number,
                date_time=date_time,
                at=parse_date_time(date_time),
                turns=tuple(
                    _turn(turn, f"{sample_id} {key}[{index}]", speakers)
                    for index, turn in enumerate(turns)
                ),
            )
        )
    if not sessions:
        raise LocomoFormatError(f"{sample_id}: no session_N in the conversation")
    sessions.sort(key=lambda session: session.number)
    dia_ids = [turn.dia_id for session in sessions for turn in session.turns]
    if len(set(dia_ids)) != len(dia_ids):
        raise LocomoFormatError(f"{sample_id}: a dia_id appears twice")
    qa = tuple(
        _qa(item, f"{sample_id} qa[{index}]") for index, item in enumerate(data.get("qa", []))
    )
    extra = {k: data[k] for k in ("observation", "session_summary", "event_summary") if k in data}
    return Sample(sample_id, speakers[0], speakers[1], tuple(sessions), qa, extra)


def _nested(flat: dict[str, Any], sample_id: str | None) -> dict[str, Any]:
    """A flat conversation (the archive's layout) in the nested layout of `locomo10.json`."""
    conversation = {
        key: value for key, value in flat.items() if key != "qa" and not _FLAT_EXTRA.match(key)
    }
    extra: dict[str, dict[str, Any]] = {
        "observation": {},
        "session_summary": {},
        "event_summary": {},
    }
    for key, value in flat.items():
        if key.endswith("_observation"):
            extra["observation"][key] = value
        elif key.endswith("_summary"):
            extra["session_summary"][key] = value
        elif key.startswith("events_session_"):
            extra["event_summary"][key] = value
    return {
        "sample_id": flat.get("sample_id") or sample_id,
        "conversation": conversation,
        "qa": flat.get("qa", []),
        **extra,
    }


def _conversation_id(name: str) -> str:
    """``data/…/26.json`` → ``conv-26``, the id `locomo10.json` gives the same conversation."""
    stem = Path(name).stem
    return f"conv-{stem}" if stem.isdigit() else stem


def _samples_in(data: Any, name: str) -> list[Sample]:
    if isinstance(data, list):
        return [parse_sample(item) for item in data]
    if isinstance(data, dict):
        return [parse_sample(data, sample_id=_conversation_id(name))]
    raise LocomoFormatError(f"{name}: expected a list of samples or one conversation")


def _by_id(samples: list[Sample]) -> list[Sample]:
    """In conversation order (``conv-26`` before ``conv-30``); an id seen twice is an error."""
    ids = [sample.sample_id for sample in samples]
    if len(set(ids)) != len(ids):
        raise LocomoFormatError("a conversation id appears twice")

    def key(sample: Sample) -> tuple[int, str]:
        number = sample.sample_id.removeprefix("conv-")
        return (int(number), "") if number.isdigit() else (1 << 30, sample.sample_id)

    return sorted(samples, key=key)


def load(path: Path) -> list[Sample]:
    """Every sample at `path`: a JSON file (a list of samples, or one conversation), the
    repository's zip archive of one JSON per conversation, or a directory of such files."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith(".json")]
            if not names:
                raise LocomoFormatError(f"{path}: no JSON file in the archive")
            return _by_id(
                [
                    sample
                    for name in names
                    for sample in _samples_in(json.loads(archive.read(name)), name)
                ]
            )
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise LocomoFormatError(f"{path}: no JSON file in the directory")
        return _by_id(
            [
                sample
                for file in files
                for sample in _samples_in(json.loads(file.read_text(encoding="utf-8")), file.name)
            ]
        )
    return _samples_in(json.loads(path.read_text(encoding="utf-8")), path.name)


def evidence_ids(qa: QA) -> set[str]:
    """The dialogue ids a question's evidence names (a few entries hold two, ``"D8:6; D9:17"``)."""
    return {found for entry in qa.evidence for found in _DIA_ID.findall(entry)}


def first_sessions(sample: Sample, count: int) -> Sample:
    """The sample cut to its first `count` sessions, with only the questions whose evidence
    (all of it, and at least one turn) lies in them. `count` 0 keeps everything."""
    if count <= 0 or count >= len(sample.sessions):
        return sample
    sessions = sample.sessions[:count]
    kept = {turn.dia_id for session in sessions for turn in session.turns}
    qa = tuple(qa for qa in sample.qa if (ids := evidence_ids(qa)) and ids <= kept)
    return replace(sample, sessions=sessions, qa=qa)


SYNTHETIC = Path(__file__).with_name("synthetic.json")
"""The synthetic conversation written for the tests (same format, no data set text)."""
