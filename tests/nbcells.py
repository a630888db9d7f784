"""Reading a stored notebook in tests: its cells, a cell's text and printed output, and whether
it is collapsed (harness). One copy for every notebook-structure test."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

__all__ = ["NOTEBOOKS", "cells", "heading", "hidden", "index", "stdout", "text"]


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def stdout(cell: dict) -> str:
    return "".join(
        "".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout"
    )


def hidden(cell: dict) -> bool:
    """Collapsed in Jupyter (source hidden): harness, not what a learner copies."""
    return cell.get("metadata", {}).get("jupyter", {}).get("source_hidden") is True


is_collapsed = hidden


def _code_only(source: str) -> str:
    """``source`` without the lines a notebook gives to IPython (``%`` magics, ``!`` shell)."""
    return "\n".join(s for s in source.splitlines() if not s.lstrip().startswith(("%", "!")))


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def script_ast(source: str) -> str:
    """``ast.dump`` of a whole script, docstrings and comments left out."""
    return ast.dump(_without_docstrings(ast.parse(_code_only(source))))


def function_ast(source: str, name: str) -> str:
    """``ast.dump`` of the top-level function ``name`` in ``source`` (LookupError if none)."""
    for node in ast.parse(_code_only(source)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ast.dump(_without_docstrings(node))
    raise LookupError(f"no top-level function {name!r}")


def saved_script(notebook: Path, name: str) -> list[dict]:
    """The code cells of ``notebook`` whose first line is ``%%save_script name``."""
    return [
        c
        for c in cells(notebook)
        if c["cell_type"] == "code" and text(c).split("\n", 1)[0].split() == ["%%save_script", name]
    ]


def shown_function(notebook: Path, name: str) -> list[dict]:
    """The code cells of ``notebook`` (cell magics skipped) that define ``name`` at top level."""
    found = []
    for cell in cells(notebook):
        if cell["cell_type"] != "code" or text(cell).startswith("%%"):
            continue
        try:
            function_ast(text(cell), name)
        except LookupError:
            continue
        found.append(cell)
    return found


def index(cs: list[dict], predicate: Callable[[dict], bool]) -> int:
    return next(i for i, c in enumerate(cs) if predicate(c))


def heading(cs: list[dict], start: str) -> int:
    return index(cs, lambda c: c["cell_type"] == "markdown" and text(c).startswith(start))


def names_bound_and_read(code_cells: list[dict]) -> tuple[set[str], set[str]]:
    """Names the cells bind anywhere (assignments, imports, defs, loop targets), names they read."""
    bound: set[str] = set()
    read: set[str] = set()
    for c in code_cells:
        tree = ast.parse(text(c))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
                bound.update(a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.Lambda):
                bound.update(a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg))
    return bound, read


def parts(cs: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """A two-part notebook's cells before Part 1 (header, set-up, parameters), Part 1, and Part 2
    (up to the recap)."""
    p1, p2 = heading(cs, "## Part 1 · "), heading(cs, "## Part 2 · ")
    recap = heading(cs, "## Recap")
    assert p1 < p2 < recap
    return cs[:p1], cs[p1:p2], cs[p2:recap]


def exercises_in_their_parts(cs: list[dict]) -> tuple[int, int]:
    """Check a two-part notebook's order and return the indices of Exercise A and Exercise B:
    no section before Part 1, Part 1 < Exercise A < Part 2 < Exercise B < Recap, and numbered
    sections ``## 1.``, ``## 2.``, ... without gaps."""
    before, _, _ = parts(cs)
    sections = [text(c).splitlines()[0] for c in before if c["cell_type"] == "markdown" and text(c)]
    assert not any(s.startswith("## ") for s in sections), sections
    a, b = heading(cs, "## Exercise A"), heading(cs, "## Exercise B")
    p1, p2 = heading(cs, "## Part 1 · "), heading(cs, "## Part 2 · ")
    assert p1 < a < p2 < b < heading(cs, "## Recap")
    firsts = [text(c).splitlines()[0] for c in cs if c["cell_type"] == "markdown" and text(c)]
    numbered = [f.split(".")[0] for f in firsts if f.startswith("## ") and f[3].isdigit()]
    assert numbered == [f"## {n}" for n in range(1, len(numbered) + 1)], numbered
    return a, b


def part_1_names_only_part_2_defines(cs: list[dict]) -> set[str]:
    """Names Part 1's code reads that only Part 2 binds: on a free TPU a learner runs the cells
    before Part 1, then Part 1, never Part 2. Cell magics (a %%save_script script) are not kernel
    code, and reaching into Part 2 through ``globals()`` counts too."""
    import builtins

    before, part1, part2 = parts(cs)

    def code(block: list[dict]) -> list[dict]:
        return [c for c in block if c["cell_type"] == "code" and not text(c).startswith("%%")]

    before_bound, _ = names_bound_and_read(code(before))
    p1_bound, p1_read = names_bound_and_read(code(part1))
    p2_bound, _ = names_bound_and_read(code(part2))
    found = p1_read & (p2_bound - before_bound - p1_bound - set(dir(builtins)))
    if any("globals()" in text(c) for c in code(part1)):
        found.add("globals()")
    return found
