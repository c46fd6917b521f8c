"""A seeded workload whose memories are known in advance (docs/architecture.md, "Fault injection").

Users speak in sessions. Some user turns state a fact the scripted LLM will extract
(`Workload.statements`: turn content -> the fact's statement):

* a **liking** ("I really like chess.") stated in one or more sessions of a user: one memory,
  ADDed by whichever snapshot comes first and REINFORCEd by the others (identical texts, so the
  rule decides, whatever the order);
* a **chain** ("I live in Lisbon." then "I moved to Porto." ...) stated within one session, in
  order: one memory UPDATEd to version 2, 3 ... A session's snapshots reach its user's extractor
  in order whatever the window boundaries, so the chain's order is the order of its turns.

A *garbled* session holds a marker the scripted LLM answers with garbage every time: its
snapshots are dead-lettered (invalid LLM output) and teach nothing. Everything else is filler.
The generator checks, with the scripted embedder, that reconciliation can only decide as the
oracle expects (`check_reconcilable`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from handlers.vectors import cosine
from tests.support.scripted_llm import embed_text

REINFORCE_THRESHOLD = 0.995
ASK_THRESHOLD = 0.6
MAX_OPTIONS = 3
"""The reconcile settings the harness runs with (`reconcile_environment`)."""

GARBLE_MARKER = "zzgarble"
"""A word in every turn of a garbled session: the scripted LLM answers it with garbage."""

THINGS = (
    "chess", "jazz", "sushi", "hiking", "tennis", "poetry", "origami", "kayaking", "opera",
    "pottery", "gardening", "climbing", "baking", "cycling", "sailing", "painting", "karaoke",
    "birdwatching", "fencing", "surfing", "knitting", "archery", "juggling", "rowing",
    "skating", "falafel", "ramen", "tapas", "curling", "bowling", "snooker", "darts",
    "astronomy", "geology", "calligraphy", "woodwork", "mandolin", "harmonica", "crosswords",
    "sudoku",
)  # fmt: skip
CITIES = (
    "Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Dublin", "Vienna", "Prague", "Warsaw",
    "Athens", "Helsinki", "Zagreb", "Seville", "Lyon", "Turin", "Krakow",
)  # fmt: skip
COMPANIES = (
    "Stripe", "Siemens", "Nokia", "Airbus", "Philips", "Ericsson", "Spotify", "Zalando",
    "Adyen", "Bosch", "Lego", "Maersk", "Novartis", "Heineken",
)  # fmt: skip
FILLER_USER = ("ok", "thanks", "hmm, let me think", "sounds good", "right", "fine by me")
FILLER_ASSISTANT = ("Noted.", "Sure.", "Happy to help.", "Got it.", "Tell me more.")


@dataclass(frozen=True)
class Turn:
    turn_id: str
    role: str
    content: str


@dataclass(frozen=True)
class Session:
    user_id: str
    session_id: str
    turns: tuple[Turn, ...]
    flushed: bool
    """Ended by a flush; otherwise left for the idle timer to promote."""
    garbled: bool = False

    @property
    def key(self) -> bytes:
        return f"{self.user_id}|{self.session_id}".encode()


@dataclass(frozen=True)
class ExpectedMemory:
    """One memory the oracle expects: its versions' texts, oldest first, and reinforcements."""

    user_id: str
    versions: tuple[str, ...]
    reinforcements: int


@dataclass(frozen=True)
class Workload:
    seed: int
    sessions: tuple[Session, ...]
    statements: dict[str, str] = field(default_factory=dict)
    """What the scripted LLM extracts: turn content -> statement."""
    chains: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(user, the statements of one chain in order): each step UPDATEs the one before."""

    @property
    def links(self) -> frozenset[tuple[str, str]]:
        """Every (statement, the statement that UPDATEs it) of any user's chain."""
        return frozenset(
            (steps[i], steps[i + 1]) for _, steps in self.chains for i in range(len(steps) - 1)
        )

    @property
    def turns(self) -> Iterator[tuple[Session, Turn]]:
        for session in self.sessions:
            for turn in session.turns:
                yield session, turn

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    @property
    def users(self) -> list[str]:
        return sorted({s.user_id for s in self.sessions})


def expected_memories(workload: Workload) -> list[ExpectedMemory]:
    """The oracle's memories: a pure function of the workload, whatever the window boundaries,
    the order of sessions, or the faults (every session is extracted once, garbled ones fail)."""
    in_chains = {statement for _, steps in workload.chains for statement in steps}
    stated: dict[tuple[str, str], int] = {}  # (user, liking) -> how many sessions state it
    for session in workload.sessions:
        if session.garbled:
            continue
        for turn in session.turns:
            statement = workload.statements.get(turn.content)
            if statement is not None and statement not in in_chains:
                key = (session.user_id, statement)
                stated[key] = stated.get(key, 0) + 1
    likings = [ExpectedMemory(user, (text,), count - 1) for (user, text), count in stated.items()]
    chains = [ExpectedMemory(user, steps, 0) for user, steps in workload.chains]
    return sorted([*likings, *chains], key=lambda m: (m.user_id, m.versions))


def generate(
    seed: int,
    *,
    users: int,
    sessions_per_user: int,
    turns_per_session: tuple[int, int] = (3, 7),
    garbled_sessions: int = 1,
    idle_share: float = 0.2,
) -> Workload:
    """A seeded workload: the same seed gives the same turns, ids and expected memories."""
    rng = random.Random(seed)
    statements: dict[str, str] = {}
    chains: list[tuple[str, tuple[str, ...]]] = []
    sessions: list[Session] = []
    garbled = set(rng.sample(range(users * sessions_per_user), garbled_sessions))
    for u in range(users):
        user_id = f"user{u:04d}"
        plan, said, steps = _user_plan(rng, sessions_per_user)
        statements.update(said)
        chains.extend(
            (user_id, chain)
            for s, chain in steps
            if u * sessions_per_user + s not in garbled  # a garbled session states nothing
        )
        for s in range(sessions_per_user):
            session_id = f"s{s:03d}"
            index = u * sessions_per_user + s
            facts = [] if index in garbled else plan[s]
            contents = _session_contents(rng, facts, turns_per_session, index in garbled)
            turns = tuple(
                Turn(f"t{seed}-{user_id}-{session_id}-{i:03d}", role, content)
                for i, (role, content) in enumerate(contents)
            )
            flushed = rng.random() >= idle_share
            sessions.append(Session(user_id, session_id, turns, flushed, index in garbled))
    workload = Workload(seed, tuple(sessions), statements, tuple(chains))
    check_reconcilable(workload)
    return workload


def _user_plan(
    rng: random.Random, session_count: int
) -> tuple[list[list[str]], dict[str, str], list[tuple[int, tuple[str, ...]]]]:
    """A user's fact-bearing contents per session (in order), what they state, and their
    chains with the session stating each."""
    for _ in range(100):  # a draw whose texts the embedder might confuse is drawn again
        plan: list[list[str]] = [[] for _ in range(session_count)]
        said: dict[str, str] = {}
        chains: list[tuple[int, tuple[str, ...]]] = []
        for thing in rng.sample(THINGS, rng.randint(2, 5)):
            content = f"I really like {thing}."
            said[content] = f"The user likes {thing}."
            for s in rng.sample(range(session_count), rng.randint(1, min(3, session_count))):
                plan[s].append(content)
        for kind, names in (("city", CITIES), ("company", COMPANIES)):
            if rng.random() < 0.6:
                where = rng.randrange(session_count)
                chain: list[str] = []
                for step, name in enumerate(rng.sample(names, rng.randint(1, 3))):
                    content, statement = _chain_step(kind, name, step)
                    said[content] = statement
                    plan[where].append(content)
                    chain.append(statement)
                chains.append((where, tuple(chain)))
        links = [(c[i], c[i + 1]) for _, c in chains for i in range(len(c) - 1)]
        if _distinguishable(sorted(set(said.values())), links):
            return plan, said, chains
    raise ValueError("no distinguishable draw of facts in 100 tries")


def _chain_step(kind: str, name: str, step: int) -> tuple[str, str]:
    if kind == "city":
        said = f"I live in {name}." if step == 0 else f"I moved to {name}."
        return said, f"The user lives in {name}."
    said = f"I work at {name}." if step == 0 else f"I now work at {name}."
    return said, f"The user works at {name}."


def _session_contents(
    rng: random.Random, facts: list[str], turns: tuple[int, int], garbled: bool
) -> list[tuple[str, str]]:
    contents: list[tuple[str, str]] = []
    if garbled:
        return [("user", f"{GARBLE_MARKER} {i} {rng.choice(FILLER_USER)}") for i in range(4)]
    fillers = max(0, rng.randint(*turns) - len(facts))
    items: list[tuple[str, str]] = [("user", fact) for fact in facts]
    for _ in range(fillers):  # fillers go anywhere; facts keep their order
        filler = ("assistant", rng.choice(FILLER_ASSISTANT))
        if rng.random() < 0.5:
            filler = ("user", rng.choice(FILLER_USER))
        items.insert(rng.randint(0, len(items)), filler)
    contents.extend(items)
    return contents or [("user", rng.choice(FILLER_USER))]


def _distinguishable(statements: list[str], links: list[tuple[str, str]]) -> bool:
    """Whether reconciliation with the scripted embedder decides as the oracle says: no two
    different statements close enough to REINFORCE, and each chain step's predecessor among the
    options the LLM is shown for it."""
    vectors = {s: embed_text(s) for s in statements}
    for a in statements:
        for b in statements:
            if a != b and cosine(vectors[a], vectors[b]) >= REINFORCE_THRESHOLD:
                return False
    for previous, new in links:
        similarity = cosine(vectors[previous], vectors[new])
        if similarity < ASK_THRESHOLD:
            return False
        closer = [
            s for s in statements if s not in (previous, new)
            and cosine(vectors[s], vectors[new]) >= similarity
        ]  # fmt: skip
        if len(closer) >= MAX_OPTIONS:
            return False
    return True


def check_reconcilable(workload: Workload) -> None:
    """Refuse a workload the oracle could not predict (see `_distinguishable`)."""
    by_user: dict[str, set[str]] = {}
    for session, turn in workload.turns:
        if turn.content in workload.statements:
            by_user.setdefault(session.user_id, set()).add(workload.statements[turn.content])
    for user, said in by_user.items():
        links = [(a, b) for a, b in workload.links if a in said and b in said]
        if not _distinguishable(sorted(said), links):
            raise ValueError(f"seed {workload.seed}: {user}'s facts are too alike to predict")


def reconcile_environment() -> dict[str, str]:
    return {
        "MEMSTREAM_REINFORCE_THRESHOLD": str(REINFORCE_THRESHOLD),
        "MEMSTREAM_ASK_THRESHOLD": str(ASK_THRESHOLD),
    }
