"""Reading llama.cpp's per-request counters from the local server's log."""

from __future__ import annotations

from pathlib import Path

from bench.llama_timings import LogCursor, Timings, parse_timings

ONE_REQUEST = """\
INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK
llama_perf_context_print:        load time =     812.34 ms
llama_perf_context_print: prompt eval time =     700.50 ms /   301 tokens (    2.33 ms per token)
llama_perf_context_print:        eval time =    1500.25 ms /    41 runs   (   36.59 ms per token)
llama_perf_context_print:       total time =    2371.05 ms /   342 tokens
"""


def test_parse_timings_reads_prompt_and_generation_counters() -> None:
    assert parse_timings(ONE_REQUEST) == Timings(700.5, 301, 1500.25, 41, 2371.05, 1)


def test_parse_timings_sums_every_completion_of_a_retried_request() -> None:
    timings = parse_timings(ONE_REQUEST + ONE_REQUEST)

    assert timings == Timings(1401.0, 602, 3000.5, 82, 4742.1, 2)


def test_parse_timings_of_a_log_without_counters_is_empty() -> None:
    assert parse_timings("INFO: started\n") == Timings()


def test_log_cursor_returns_only_what_was_added_since_the_last_read(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("before\n")
    cursor = LogCursor(log)
    with log.open("a") as out:
        out.write("first\n")
    assert cursor.read() == "first\n"
    with log.open("a") as out:
        out.write("second\n")
    assert cursor.read() == "second\n"
    assert cursor.read() == ""
