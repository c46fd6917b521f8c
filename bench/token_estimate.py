"""The window's token estimate (`handlers.snapshot_size`) against the packaged model's tokenizer.

    python -m bench.token_estimate [--out bench/results/token_estimate-DATE.json]

Counts the tokens of four texts with Qwen2.5's tokenizer (the packaged default model, loaded
vocabulary only) and with the estimate, and reports estimate / real per text. The estimate is
meant to err on the large side (ratio ≥ 1), so a snapshot the window cut by it fits the budget.
The Chinese and English chat texts are fixed paragraphs written for this benchmark (below).
"""

# ruff: noqa: RUF001 (the Chinese paragraph keeps its full-width commas)
from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from bench.machine import machine
from handlers.snapshot_size import TOKEN_ESTIMATE_VERSION, estimated_text_tokens

ROOT = Path(__file__).resolve().parents[1]
CHINESE = (
    "我昨天和妹妹安娜一起去了农贸市场，买了很多桃子和新鲜的蔬菜。下个月我要搬到柏林去工作，"
    "在一家医院当护士。我的狗叫小白，它已经七岁了，每天早上我都带它去公园散步。"
    "周末我们打算去看望住在上海的外婆，她最喜欢吃我做的红烧肉。"
)
ENGLISH_CHAT = (
    "I went to the farmers market yesterday with my sister Anna, and we bought peaches. "
    "Next month I am moving to Berlin to work as a nurse at a hospital. My dog Biscuit is "
    "seven now; I walk him in the park every morning before work."
)


def texts() -> dict[str, str]:
    docs = "".join(path.read_text() for path in sorted((ROOT / "docs").glob("*.md")))
    return {
        "english docs (docs/*.md)": docs,
        "english chat": ENGLISH_CHAT,
        "chinese chat": CHINESE,
        "mixed chat (english then chinese)": ENGLISH_CHAT + CHINESE,
    }


def measure() -> dict[str, object]:
    import llama_cpp

    from memstream.runtime.local.weights import resolve_model

    path, alias = resolve_model()
    model = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    rows = []
    for name, text in texts().items():
        real = len(model.tokenize(text.encode(), add_bos=False, special=False))
        estimate = estimated_text_tokens(text)
        rows.append(
            {
                "text": name,
                "characters": len(text),
                "tokens": real,
                "estimate": estimate,
                "estimate_over_tokens": round(estimate / real, 3),
            }
        )
    return {
        "command": "python -m bench.token_estimate",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "tokenizer": alias,
        "token_estimate_version": TOKEN_ESTIMATE_VERSION,
        "texts": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    today = datetime.now(UTC).date().isoformat()
    default = ROOT / "bench" / "results" / f"token_estimate-{today}.json"
    parser.add_argument("--out", type=Path, default=default)
    args = parser.parse_args(argv)
    report = measure()
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for row in report["texts"]:  # type: ignore[attr-defined]
        print(
            f"{row['text']}: {row['tokens']} tokens, estimate {row['estimate']} "
            f"({row['estimate_over_tokens']}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
