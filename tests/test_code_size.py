"""utils stays small: at most CODE_LIMIT lines of code in every Python file that is not a test
module (utils/ and the maintainer tools in tests/), and no function longer than FUNCTION_LIMIT.

A line of code is a non-blank line that is neither a comment nor part of a docstring."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from utils import ROOT

CODE_LIMIT = 6_500
FUNCTION_LIMIT = 60
SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def code_lines(source: str) -> int:
    """Lines holding a token that is not a comment, a line break or a docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in SKIPPED and tok.type != tokenize.ENDMARKER:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docstrings)


def counted_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of utils/ and tests/ that is not a test module or a conftest."""
    files = [*root.glob("utils/**/*.py"), *root.glob("tests/**/*.py")]
    return sorted(p for p in files if not p.name.startswith(("test_", "conftest")))


def long_functions(paths: list[Path], limit: int = FUNCTION_LIMIT, root: Path = ROOT) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length})")
    return found


def test_utils_and_the_tools_hold_at_most_the_code_limit() -> None:
    counts = {p: code_lines(p.read_text(encoding="utf-8")) for p in counted_files()}
    total = sum(counts.values())
    biggest = sorted(counts.items(), key=lambda kv: -kv[1])[:8]
    listing = ", ".join(f"{p.relative_to(ROOT)} {n}" for p, n in biggest)
    assert total <= CODE_LIMIT, f"{total} lines of code > {CODE_LIMIT}; largest: {listing}"


def test_no_function_is_longer_than_the_limit() -> None:
    assert long_functions(counted_files()) == [], "split these into named pieces"


def test_the_counts_see_code_and_skip_the_rest(tmp_path: Path) -> None:
    source = '"""Doc\nstring."""\n\n# a comment\nx = (1,\n     2)\n\n\n'
    source += 'def f():\n    """Doc."""\n    return x\n'
    assert code_lines(source) == 4  # x = (1, / 2) / def f(): / return x
    body = "".join(f"    y{i} = {i}\n" for i in range(FUNCTION_LIMIT))
    (tmp_path / "long.py").write_text(f"def g():\n{body}")  # one line over
    (tmp_path / "ok.py").write_text(f"def h():\n{body[: body.rindex('    y')]}")
    found = long_functions(sorted(tmp_path.glob("*.py")), FUNCTION_LIMIT, tmp_path)
    assert len(found) == 1 and found[0].endswith(f"g ({FUNCTION_LIMIT + 1})")
