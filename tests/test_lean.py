"""Issue 35's budgets, per notebook: the header, prose, visible and collapsed code, banned phrases,
and exercises stored unsolved. `python -m tests.test_lean` prints the table."""

from __future__ import annotations

import re
from pathlib import Path

from tests.nbcells import NOTEBOOKS, cells, hidden, text

HEADER_WORDS, PROSE_WORDS, VISIBLE_LINES, COLLAPSED_LINES = 150, 2_500, 300, 100
COURSE_MARKDOWN_WORDS = 22_000
BANNED = ("not yet run", "not yet timed", "earlier version", "stored run", "reference machine",
          "run-times.md")  # fmt: skip
PASSED = re.compile(r"\bpassed\b", re.IGNORECASE)


def _comment_words(source: str) -> int:
    return sum(len(line.split("#", 1)[1].split()) for line in source.splitlines() if "#" in line)


def counts(path: Path) -> dict[str, int]:
    """Words (header, markdown, prose = markdown + code comments); visible and collapsed lines."""
    cs = cells(path)
    markdown = [text(c) for c in cs if c["cell_type"] == "markdown"]
    code = [c for c in cs if c["cell_type"] == "code"]
    return {
        "header": len(markdown[0].split()) if markdown else 0,
        "markdown": sum(len(m.split()) for m in markdown),
        "prose": sum(len(m.split()) for m in markdown) + sum(_comment_words(text(c)) for c in code),
        "visible": sum(len(text(c).splitlines()) for c in code if not hidden(c)),
        "collapsed": sum(len(text(c).splitlines()) for c in code if hidden(c)),
    }


def outputs(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def banned_phrases(path: Path) -> list[str]:
    found = []
    for i, c in enumerate(cells(path)):
        body = (text(c) if c["cell_type"] == "markdown" else outputs(c)).lower()
        found += [f"cell {i}: {p!r}" for p in BANNED if p in body]
    return found


NBS = sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))


def table() -> str:
    rows = [f"{'notebook':28} header markdown prose visible collapsed"]
    for p in NBS:
        c = counts(p)
        rows.append(f"{p.stem:28} {c['header']:6} {c['markdown']:8} {c['prose']:5} "
                    f"{c['visible']:7} {c['collapsed']:9}")  # fmt: skip
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
