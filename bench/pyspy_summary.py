"""A text summary of a py-spy profile in its `raw` (collapsed stacks) format.

Each line of `py-spy record --format raw` is one stack, root first, frames separated by `;`,
then the number of samples: ``thread (0x7f..);main (a.py:3);work (b.py:10) 42``. The summary
gives the functions where the samples were (self) and the functions they were under
(inclusive), line numbers dropped, in seconds of wall time (samples / sampling rate; with
`--idle --threads` every thread is sampled, idle or not, so a thread's seconds add up to the
run's length).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

_LINE_NUMBER = re.compile(r":\d+\)$")
_THREAD = re.compile(r"^(thread|process) \(")


def frame_name(frame: str) -> str:
    """`func (path:line)` without the line, and the path shortened to its last three parts."""
    frame = _LINE_NUMBER.sub(")", frame.strip())
    name, _, path = frame.partition(" (")
    if not path:
        return name
    parts = path.rstrip(")").split("/")
    return f"{name} ({'/'.join(parts[-3:])})"


@dataclass(frozen=True)
class Profile:
    samples: int
    own: Counter[str]
    """Samples whose innermost frame is the function."""
    under: Counter[str]
    """Samples with the function anywhere on the stack (counted once per sample)."""

    def top(self, counter: Counter[str], n: int, rate: float) -> list[tuple[str, float]]:
        """The `n` largest entries, in seconds at `rate` samples per second."""
        return [(name, count / rate) for name, count in counter.most_common(n)]


def parse(lines: Iterable[str]) -> Profile:
    """Read a `raw` profile; thread and process frames (`--threads`, `--subprocesses`) are
    dropped."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    samples = 0
    for line in lines:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";") if f and not _THREAD.match(f)]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for name in set(frames):
            under[name] += count
    return Profile(samples, own, under)


def render(
    profile: Profile, *, title: str, rate: float, n: int = 25, ours: tuple[str, ...] = ()
) -> str:
    """The summary as text (seconds at `rate` samples per second): top functions by own
    samples, by inclusive samples, and the inclusive samples of functions whose path contains
    one of `ours`."""
    lines = [title, f"samples: {profile.samples} at {rate:g}/s", ""]

    def table(heading: str, rows: list[tuple[str, float]]) -> None:
        lines.append(heading)
        lines.extend(f"  {seconds:8.1f} s  {name}" for name, seconds in rows)
        lines.append("")

    table("self (innermost frame):", profile.top(profile.own, n, rate))
    table("inclusive (anywhere on the stack):", profile.top(profile.under, n, rate))
    if ours:
        mine = Counter({k: v for k, v in profile.under.items() if any(p in k for p in ours)})
        table(f"inclusive, our code ({', '.join(ours)}):", profile.top(mine, n, rate))
    return "\n".join(lines)
