"""Summaries of py-spy's collapsed stacks (`bench.pyspy_summary`)."""

from __future__ import annotations

from bench.pyspy_summary import frame_name, parse, render

RAW = [
    "thread (0x1);main (/x/memstream/runtime/worker.py:10);apply (/x/streams/projector.py:80) 30",
    "thread (0x1);main (/x/memstream/runtime/worker.py:10);select (selectors.py:468) 50",
    "thread (0x2);apply (/x/streams/projector.py:81);recv (/y/pymongo/net.py:5) 20",
    "garbage line",
]


def test_frame_names_drop_line_numbers_and_keep_the_last_path_parts() -> None:
    assert frame_name("apply (/a/b/c/streams/projector.py:80)") == "apply (c/streams/projector.py)"
    assert frame_name("<module> (<string>:4)") == "<module> (<string>)"


def test_own_and_inclusive_samples_ignore_thread_frames_and_junk() -> None:
    profile = parse(RAW)
    assert profile.samples == 100
    assert profile.own["select (selectors.py)"] == 50
    # two lines (different line numbers) of one function are one entry
    assert profile.under["apply (x/streams/projector.py)"] == 50
    assert "thread (0x1)" not in profile.under


def test_render_gives_seconds_at_the_sampling_rate_and_our_code_apart() -> None:
    text = render(parse(RAW), title="t", rate=10, ours=("streams/",))
    assert "samples: 100 at 10/s" in text
    assert "5.0 s  select (selectors.py)" in text
    ours = text.split("our code")[1]
    assert "apply (x/streams/projector.py)" in ours
    assert "select" not in ours
