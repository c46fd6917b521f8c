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
    if document.get("language_bias"):
        bias = document["language_bias"]
        sections += [
            "## Language bias",
            calibration_lines(bias),
            "### Held-out check of the bias",
            bias_held_out_table(bias["held_out"]),
            "### The bias scaled",
            bias_scaled_table(bias["scaled"]),
        ]
    if document.get("alternatives"):
        sections += [
            "## Alternatives",
            alternatives_table(document["alternatives"]["rankers"]),
            "### Small language groups (vector mode)",
            small_groups_table(document["alternatives"]["small_language_groups"]),
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


def calibration_lines(bias: Mapping[str, Any]) -> str:
    found = bias["calibrated"]
    pooled = ", ".join(
        f"{language} {value:.4f} ({found['memories'][language]} memories)"
        for language, value in found["bias"].items()
    )
    product = ", ".join(f"{language} {value:g}" for language, value in bias["product"].items())
    rows = [
        [user, *(f"{by_language.get(lg, {}).get('bias', float('nan')):.4f}" for lg in ("en", "zh"))]
        for user, by_language in found["per_user"].items()
        if by_language
    ]
    return (
        f"calibrated on every user's memories: {pooled}; the product's figures: {product}\n\n"
        + markdown_table(["memories of", "bias en", "bias zh"], rows)
    )


def bias_held_out_table(splits: list[Mapping[str, Any]]) -> str:
    compared = list(splits[0]["test_scores"])
    header = ["calibrated on", "tested on", "bias en", "bias zh"]
    for name in compared:
        header += [f"{name}: R@5 / MRR", f"{name}: cross-lingual R@5 / MRR"]
    rows = []
    for split in splits:
        row = [
            " + ".join(split["train"]),
            f"{' + '.join(split['test'])} ({split['test_queries']}, "
            f"{split['test_cross_lingual']} cross-lingual)",
            f"{split['bias'].get('en', 0.0):.4f}",
            f"{split['bias'].get('zh', 0.0):.4f}",
        ]
        for name in compared:
            for part in ("all", "cross-lingual"):
                scores = split["test_scores"][name][part]
                row.append(f"{scores['recall_at_5']:.2f} / {scores['mrr']:.3f}")
        rows.append(row)
    return markdown_table(header, rows)


def bias_scaled_table(entries: list[Mapping[str, Any]]) -> str:
    groups = list(entries[0]["scores"])
    header = ["bias times", "bias en", "bias zh", *(f"{g} R@1 / R@5 / MRR" for g in groups)]
    rows = [
        [
            f"{entry['scale']:g}",
            f"{entry['bias'].get('en', 0.0):.3f}",
            f"{entry['bias'].get('zh', 0.0):.3f}",
            *(
                f"{entry['scores'][g]['recall_at_1']:.2f} / {entry['scores'][g]['recall_at_5']:.2f}"
                f" / {entry['scores'][g]['mrr']:.3f}"
                for g in groups
            ),
        ]
        for entry in entries
    ]
    return markdown_table(header, rows)


def alternatives_table(rankers: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    groups = list(next(iter(rankers.values())))
    header = ["ranker", *(f"{g} R@1 / R@5 / MRR" for g in groups)]
    rows = [
        [
            name,
            *(
                f"{by_group[g]['recall_at_1']:.2f} / {by_group[g]['recall_at_5']:.2f}"
                f" / {by_group[g]['mrr']:.3f}"
                for g in groups
            ),
        ]
        for name, by_group in rankers.items()
    ]
    return markdown_table(header, rows)


def small_groups_table(entries: list[Mapping[str, Any]]) -> str:
    rankers = list(dict.fromkeys(str(e["ranker"]) for e in entries))
    cells: dict[tuple[str, int], dict[str, str]] = {}
    counts: dict[tuple[str, int], int] = {}
    for e in entries:
        key = (str(e["kind"]), int(e["others_in_answer_language"]))
        cells.setdefault(key, {})[str(e["ranker"])] = f"{e['recall_at_5']:.2f} / {e['mrr']:.3f}"
        counts[key] = int(e["queries"])
    header = [
        "queries",
        "others in the answer's language",
        "stores",
        *(f"{r}: R@5 / MRR" for r in rankers),
    ]
    rows = [
        [kind, str(k), str(counts[(kind, k)]), *(cells[(kind, k)].get(r, "") for r in rankers)]
        for kind, k in sorted(cells, key=lambda key: (key[0] != "cross-lingual", key[1]))
    ]
    return markdown_table(header, rows)
