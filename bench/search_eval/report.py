"""The Markdown tables of RESULTS.md, rendered from a results JSON (`run.py --report FILE`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.search_eval.scoring import markdown_table

SWEEP_GROUPS = ("all", "query in en", "query in zh", "cross-lingual", "same language")


def render(document: Mapping[str, Any]) -> str:
    sections = [
        "## Quality",
        quality_table(document["quality"]),
        latency_lines(document["quality"]),
        equality_line(document["quality"]["equal_to_reference"]),
    ]
    if document.get("weights"):
        sections += [
            "## Vector weight",
            sweep_table(document["weights"]["sweep"]),
            "### Held-out check",
            held_out_table(document["weights"]["held_out"]),
        ]
    if document.get("scale"):
        sections += [
            "## Latency as the index grows (limit 10)",
            scale_table(document["scale"]),
            steps_table(document["scale"]),
            ratio_line(document["scale_ratio_p95"]),
        ]
    return "\n\n".join(sections)


def quality_table(quality: Mapping[str, Any]) -> str:
    rankers = quality["rankers"]
    header = ["queries", "n"]
    for ranker in rankers:
        header += [f"{ranker} R@1", f"{ranker} R@5", f"{ranker} MRR"]
    rows = []
    for group, by_ranker in quality["summary"].items():
        row = [group, str(by_ranker[rankers[0]]["queries"])]
        for ranker in rankers:
            s = by_ranker[ranker]
            row += [f"{s['recall_at_1']:.2f}", f"{s['recall_at_5']:.2f}", f"{s['mrr']:.3f}"]
        rows.append(row)
    return markdown_table(header, rows)


def latency_lines(quality: Mapping[str, Any]) -> str:
    rows = [
        [ranker, f"{t['p50']:.2f}", f"{t['p95']:.2f}"]
        for ranker, t in quality["ranking_ms"].items()
    ]
    embed = quality["query_embedding_ms"]
    return (
        markdown_table(["ranking one query (labelled set)", "p50 ms", "p95 ms"], rows)
        + f"\n\nquery embedding (`embed([query])`): p50 {embed['p50']:.1f} ms, "
        f"p95 {embed['p95']:.1f} ms"
    )


def equality_line(equal: Mapping[str, Any]) -> str:
    return (
        f"`ReadModel.search` = the definitions: {equal['rankings_equal']} of "
        f"{equal['rankings_compared']} full rankings identical (ids, `score`, `vector_score`, "
        "`keyword_score`)"
    )


def sweep_table(sweep: list[Mapping[str, Any]]) -> str:
    groups = list(sweep[0]["scores"])
    header = ["vector weight", "R@5 all", *(f"MRR {g}" for g in groups)]
    rows = [
        [
            f"{entry['weight']:g}",
            f"{entry['scores']['all']['recall_at_5']:.2f}",
            *(f"{entry['scores'][g]['mrr']:.3f}" for g in groups),
        ]
        for entry in sweep
    ]
    return markdown_table(header, rows)


def held_out_table(splits: list[Mapping[str, Any]]) -> str:
    compared = list(splits[0]["test_scores"])
    header = [
        "chosen on",
        "tested on",
        "weight",
        "MRR train",
        *(f"MRR test: {c}" for c in compared),
    ]
    rows = [
        [
            " + ".join(split["train"]),
            " + ".join(split["test"]),
            f"{split['chosen_weight']:g}",
            f"{split['train_mrr']:.3f}",
            *(f"{split['test_scores'][c]['mrr']:.3f}" for c in compared),
        ]
        for split in splits
    ]
    means = [
        sum(split["test_scores"][c]["mrr"] for split in splits) / len(splits) for c in compared
    ]
    rows.append(["mean of the splits", "", "", "", *(f"{m:.3f}" for m in means)])
    return markdown_table(header, rows)


def scale_table(scale: list[Mapping[str, Any]]) -> str:
    searches = list(scale[0]["search_ms"])
    header = ["memories", "build ms", "of which keywords ms"]
    for name in searches:
        header += [f"{name} p50 ms", f"{name} p95 ms"]
    header += ["definitions p50 ms", "definitions / SDK (p50, hybrid)", "= definitions"]
    rows = []
    for size in scale:
        row = [
            f"{size['size']:,}",
            f"{size['build_ms']['median']:.0f}",
            f"{size['keyword_build_ms']['median']:.0f}",
        ]
        for name in searches:
            row += [
                f"{size['search_ms'][name]['p50']:.2f}",
                f"{size['search_ms'][name]['p95']:.2f}",
            ]
        reference = size["reference"]
        against = reference.get("by_search", {}).get("hybrid", {})
        row += [
            f"{reference['ms']['p50']:.0f}",
            f"{against['ratio_p50']:.0f}x" if "ratio_p50" in against else "",
            f"{reference['equal_top10']}/{reference['searches']}",
        ]
        rows.append(row)
    return markdown_table(header, rows)


def steps_table(scale: list[Mapping[str, Any]]) -> str:
    steps = list(scale[0]["steps_ms"])
    header = ["memories (hybrid, steps)", *(f"{step} p50 / p95 ms" for step in steps)]
    rows = [
        [
            f"{size['size']:,}",
            *(
                f"{size['steps_ms'][s]['p50']:.2f} / {size['steps_ms'][s]['p95']:.2f}"
                for s in steps
            ),
        ]
        for size in scale
    ]
    return markdown_table(header, rows)


def ratio_line(ratio: Mapping[str, Any]) -> str:
    if not ratio:
        return ""
    by_search = ", ".join(f"{name} {value:.0f}x" for name, value in ratio["by_search"].items())
    return f"p95({ratio['largest']:,}) / p95({ratio['smallest']:,}): {by_search} (target ≤ 2x)"
