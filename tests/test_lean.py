"""Issue 35's budgets, per notebook: the header, prose, visible and collapsed code, banned phrases.
`python -m tests.test_lean` prints the table."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tests.nbcells import NOTEBOOKS, cells, hidden, text

HEADER_WORDS, PROSE_WORDS, VISIBLE_LINES, COLLAPSED_LINES = 150, 2_500, 300, 100
# What a header may say was checked, and where: never that a notebook ran on a TPU (issue 43).
TESTED = "CPU-tested with TPU-image packages, not on a TPU"
COURSE_MARKDOWN_WORDS = 22_000
BANNED = ("not yet run", "not yet timed", "earlier version", "stored run", "reference machine",
          "run-times.md")  # fmt: skip


def _comment_words(source: str) -> int:
    return sum(len(line.split("#", 1)[1].split()) for line in source.splitlines() if "#" in line)


def _printed_words(source: str) -> int:
    """Words in the string literals a cell passes to ``print`` (a printed paragraph is prose)."""
    python = "\n".join(line for line in source.splitlines() if line.lstrip()[:1] not in ("!", "%"))
    try:
        tree = ast.parse(python)
    except SyntaxError:
        return 0
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "print"
    ]
    return sum(
        len(s.value.split())
        for call in calls
        for s in ast.walk(call)
        if isinstance(s, ast.Constant) and isinstance(s.value, str)
    )


def counts(path: Path) -> dict[str, int]:
    """Words (header, markdown, prose = markdown + code comments + printed text); visible and
    collapsed lines."""
    cs = cells(path)
    markdown = [text(c) for c in cs if c["cell_type"] == "markdown"]
    code = [text(c) for c in cs if c["cell_type"] == "code"]
    return {
        "header": len(markdown[0].split()) if markdown else 0,
        "markdown": sum(len(m.split()) for m in markdown),
        "prose": sum(len(m.split()) for m in markdown)
        + sum(_comment_words(c) + _printed_words(c) for c in code),
        "visible": sum(
            len(text(c).splitlines()) for c in cs if c["cell_type"] == "code" and not hidden(c)
        ),
        "collapsed": sum(
            len(text(c).splitlines()) for c in cs if c["cell_type"] == "code" and hidden(c)
        ),
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


def over_budget(path: Path) -> list[str]:
    """Each budget of issue 35 the notebook exceeds, and a header without its metadata line."""
    c = counts(path)
    limits = {"header": HEADER_WORDS, "prose": PROSE_WORDS, "visible": VISIBLE_LINES,
              "collapsed": COLLAPSED_LINES}  # fmt: skip
    found = [f"{k}: {c[k]} > {limit}" for k, limit in limits.items() if c[k] > limit]
    header = text(cells(path)[0])
    if not re.search(rf"^\*Runs on.*minute.*{re.escape(TESTED)}\.?\*$", header, re.M | re.S):
        found.append(f"header: no metadata line (*Runs on ... minutes ... {TESTED}*)")
    return found


@pytest.mark.parametrize("path", NBS, ids=lambda p: p.stem[:2])
def test_notebook_keeps_its_budgets_and_no_bookkeeping(path: Path) -> None:
    assert not over_budget(path), f"{path.name}: {over_budget(path)}\n{table()}"
    assert not banned_phrases(path), f"{path.name}: {banned_phrases(path)}"


def stated_minutes(header: str) -> tuple[float, float]:
    """The run time a header states: "about 2 minutes" (2, 2), "1-2 minutes", "under 1 minute"."""
    found = re.search(r"(under |about )?(\d+)(?:-(\d+))? minutes?\b", header)
    assert found, "the header states no run time in minutes"
    under, lo, hi = found.group(1), int(found.group(2)), int(found.group(3) or found.group(2))
    return (0 if under == "under " else lo), hi


@pytest.mark.parametrize("path", NBS, ids=lambda p: p.stem[:2])
def test_header_minutes_agree_with_the_run_times_file(path: Path) -> None:
    """The header's minutes are those `make refresh` last measured (results/run-times.json)."""
    seconds = json.loads((NOTEBOOKS.parent / "results" / "run-times.json").read_text())["seconds"]
    lo, hi = stated_minutes(" ".join(text(cells(path)[0]).split()))
    measured = seconds[path.stem] / 60
    assert lo - 0.5 <= measured <= hi + 0.5, (
        f"header says {lo}-{hi} min, the last run {measured:.1f}"
    )


def test_course_markdown_total() -> None:
    total = sum(counts(p)["markdown"] for p in NBS)
    assert total <= COURSE_MARKDOWN_WORDS, f"{total} words of markdown > {COURSE_MARKDOWN_WORDS}"


def test_the_budget_check_catches_a_long_notebook(tmp_path: Path) -> None:
    """Planted: a long header, bookkeeping, too much code, a printed paragraph."""
    long = " ".join(["word"] * 151)
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": f"# T\n{long}\n\nthe stored run"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": "x = 1\n" * 301},
        {"cell_type": "code", "metadata": {"jupyter": {"source_hidden": True}}, "outputs": [],
         "source": f"print('{' '.join(['w'] * 2500)}')\n" + "y = 2\n" * 100},
    ]}  # fmt: skip
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(nb))
    assert [f.split(":")[0] for f in over_budget(path)] == [
        "header", "prose", "visible", "collapsed", "header"
    ]  # fmt: skip
    assert banned_phrases(path) == ["cell 0: 'stored run'"]


if __name__ == "__main__":
    print(table())
