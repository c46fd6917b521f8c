"""The user documentation's tested blocks: the README and the `docs/` pages it links to.

A block marked `<!-- readme-example: NAME -->` (python or sh) is run by the test named after it;
the `memstream …` lines of every ```bash block run in page order (tests/test_readme.py).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The user's pages, in reading order; docs/architecture.md and docs/scaling.md are for the
# engineers and hold no runnable block.
PAGES = [
    README,
    *(
        ROOT / "docs" / f"{name}.md"
        for name in (
            "quickstart",
            "concepts",
            "producers",
            "http-and-mcp",
            "forgetting",
            "operations",
            "configuration",
            "benchmarks",
        )
    ),
]


def documented_example(name: str, language: str = "python") -> str:
    """The block marked `<!-- readme-example: NAME -->`, wherever in the pages it is."""
    pattern = rf"<!-- readme-example: {re.escape(name)} -->\n```{language}\n(.*?)```"
    found = [m.group(1) for page in PAGES for m in re.finditer(pattern, _text(page), re.DOTALL)]
    assert len(found) == 1, f"{len(found)} {language} examples named {name!r} in the pages"
    return found[0]


def documented_commands() -> list[str]:
    """The `memstream …` lines of the pages' bash blocks, in reading order."""
    return [
        line.strip()
        for page in PAGES
        for block in re.findall(r"```bash\n(.*?)```", _text(page), re.DOTALL)
        for line in block.splitlines()
        if line.strip().startswith("memstream ")
    ]


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")
