"""No function in ``utils/`` is longer than a screenful and a half (80 lines), so each one can be
read, tested and named for the one job it does."""

from __future__ import annotations

import ast
from pathlib import Path

from utils import ROOT

LIMIT = 80


def long_functions(folder: Path, limit: int = LIMIT) -> list[str]:
    """``path:line name (N lines)`` for every function or method in ``folder`` over ``limit``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    where = path.relative_to(folder.parent)
                    found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_utils_is_over_80_lines() -> None:
    assert long_functions(ROOT / "utils") == [], "split these into named pieces"


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "".join(f"        x{i} = {i}\n" for i in range(LIMIT - 1))
    (pkg / "ok.py").write_text(f"class A:\n    def fits(self):\n{body}")  # exactly LIMIT lines
    (pkg / "long.py").write_text(f"class C:\n    def method(self):\n{body}        y = 0\n")
    assert long_functions(pkg) == [f"pkg/long.py:2 method ({LIMIT + 1} lines)"]
