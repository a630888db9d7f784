"""Reading a stored notebook in tests: its cells, a cell's text and printed output, and whether
it is collapsed (harness). One copy for every notebook-structure test."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: What an exercise's check cell prints: solved, or what is still missing.
EXERCISE_PASSED = re.compile(r"exercise[^\n]*\bpassed\b", re.IGNORECASE)
EXERCISE_NOT_DONE = re.compile(r"exercise[^\n]*not done yet", re.IGNORECASE)

__all__ = [
    "EXERCISE_NOT_DONE",
    "EXERCISE_PASSED",
    "NOTEBOOKS",
    "bound_names",
    "cells",
    "code_cell",
    "code_sources",
    "heading",
    "hidden",
    "index",
    "parameters",
    "parameters_cell",
    "run_statements",
    "statements",
    "stdout",
    "text",
]


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


# --- running a notebook's own statements (the v5e-8 rehearsals) ------------------------------


def code_sources(notebook: Path) -> list[str]:
    """Every code cell of ``notebook``, without the lines it gives to IPython."""
    return [_code_only(text(c)) for c in cells(notebook) if c["cell_type"] == "code"]


def code_cell(notebook: Path, marker: str) -> str:
    """The one code cell of ``notebook`` that holds ``marker``, without the lines it gives to
    IPython."""
    found = [_code_only(text(c)) for c in cells(notebook)
             if c["cell_type"] == "code" and marker in text(c)]  # fmt: skip
    assert len(found) == 1, f"{notebook.name}: {len(found)} code cells hold {marker!r}"
    return found[0]


def parameters_cell(notebook: Path) -> str:
    """The source of ``notebook``'s cell tagged ``parameters``."""
    return next(text(c) for c in cells(notebook) if "parameters" in c["metadata"].get("tags", []))


def parameters(notebook: Path) -> dict:
    """The UPPERCASE names ``notebook``'s parameters cell binds, with their default values."""
    ns: dict = {}
    exec(parameters_cell(notebook), ns)  # noqa: S102
    return {k: v for k, v in ns.items() if k.isupper()}


def bound_names(node: ast.stmt) -> set[str]:
    """The names a top-level assignment or ``def`` binds (none for other statements)."""
    if isinstance(node, ast.FunctionDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def statements(source: str, *names: str) -> ast.Module:
    """The cell's top-level statements that bind ``names``, in its order (``ast.unparse`` gives
    their source); AssertionError if one of ``names`` is bound by none."""
    chosen = [node for node in ast.parse(source).body if bound_names(node) & set(names)]
    missing = set(names) - set().union(*map(bound_names, chosen))
    assert not missing, f"no top-level statement binds {sorted(missing)}: the test needs updating"
    return ast.Module(body=chosen, type_ignores=[])


def run_statements(nodes: ast.Module | list[ast.stmt], ns: dict) -> None:
    """Execute ``nodes`` (a notebook's own statements) in the namespace ``ns``."""
    body = nodes.body if isinstance(nodes, ast.Module) else nodes
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    exec(compile(module, "<notebook>", "exec"), ns)  # noqa: S102
