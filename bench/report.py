"""The Markdown table of a `python -m bench` run, and its place in BENCHMARKS.md."""

from __future__ import annotations

from typing import Any

START = "<!-- bench:all:start -->"
END = "<!-- bench:all:end -->"


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.01 or magnitude == 0:
        return f"{value:.2f}"
    return f"{value:.2g}"


def _met(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: ""}[met]


def describe_run(report: dict[str, Any], json_path: str) -> str:
    """Where a run's figures came from: command, time, machine, load, profile, raw JSON."""
    machine = report["machine"]
    before = ", ".join(f"{x:.1f}" for x in report["load_average_before"])
    after = ", ".join(f"{x:.1f}" for x in report.get("load_average_after", ()))
    return (
        f"`{report['command']}` — {report['started_at']} → {report.get('finished_at', '?')}, "
        f"{machine['cpus']} cores ({machine['processor']}, Python {machine['python']}), "
        f"load average {before} before, {after} after; {report['profile']} profile; "
        f"raw figures: `{json_path}`."
    )


HEADER = [
    "| benchmark | setting | ours | baseline (same run) | ratio ours/baseline | aim | met |",
    "| --- | --- | --- | --- | --- | --- | --- |",
]


def render_markdown(report: dict[str, Any], json_path: str) -> str:
    """One table of every figure of the run, then the failed suites, then where it came from."""
    return render_runs([(report, json_path)])


def render_runs(runs: list[tuple[dict[str, Any], str]]) -> str:
    """One table of the figures of several runs (e.g. each suite's full-profile run), each run
    described above it."""
    if len(runs) == 1:
        lines = [describe_run(*runs[0]), "", *HEADER]
    else:
        lines = ["Runs:", ""]
        lines += [f"- {', '.join(r['suites'])}: {describe_run(r, path)}" for r, path in runs]
        lines += ["", *HEADER]
    failed: list[str] = []
    for report, _ in runs:
        lines += _rows(report, failed)
    if failed:
        lines += ["", *failed]
    return "\n".join(lines) + "\n"


def _rows(report: dict[str, Any], failed: list[str]) -> list[str]:
    lines: list[str] = []
    for suite, result in report["suites"].items():
        if "error" in result:
            failed.append(f"- `{suite}` failed: {result['error']}")
            continue
        failed += [f"- `{suite}` failed in part: {error}" for error in result.get("errors", ())]
        for figure in result["figures"]:
            unit = figure["unit"]
            baseline = (
                f"{_number(figure['baseline'])} {unit} ({figure['baseline_name']})"
                if figure["baseline"] is not None
                else "—"
            )
            setting = figure["setting"] + (f" — {figure['note']}" if figure["note"] else "")
            lines.append(
                f"| {figure['benchmark']} | {setting} | {_number(figure['ours'])} {unit} "
                f"| {baseline} | {_number(figure['ratio'])} | {figure['aim'] or ''} "
                f"| {_met(figure['met'])} |"
            )
    return lines


def splice_into(document: str, table: str) -> str:
    """The document with the text between its markers replaced by `table` (appended, with
    markers, when it has none)."""
    block = f"{START}\n{table}{END}"
    if START in document and END in document:
        head, rest = document.split(START, 1)
        _, tail = rest.split(END, 1)
        return head + block + tail
    return document.rstrip("\n") + "\n\n" + block + "\n"
