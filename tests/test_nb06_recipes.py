"""Notebook 06's printed recovery recipe works as printed: its cells define every name they use.

On a TPU, section 7 and appendices A and B of notebook 06 start a second process on the chips,
which the kernel holds after section 2; they then print the recipe: restart, run the set-up cell,
the parameters cell and the two after it (check, sizes), the first code cell of section 7 (it
loads what all three need), then the section or appendix. This test runs that recipe statically:
every name a cell reads must be bound by a cell before it (or by itself), or be a builtin.
Framework-free: reads the notebook as JSON and parses its code with ``ast``.
"""

from __future__ import annotations

import ast
import builtins
import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06_pytorch_xla.ipynb"
SECTIONS = (
    "## 7. Several devices",
    "## Appendix A · Multi-process",
    "## Appendix B · The persistent compilation cache",
)
ALWAYS = set(dir(builtins)) | {"get_ipython", "display", "__name__"}


def _code(cell: dict) -> str:
    text = "".join(cell["source"])
    if text.startswith("%%"):  # a cell magic: the body is a script written to disk, not run here
        return ""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("%", "!")))


def _bound(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
    return out


def _read(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _section(cells: list[dict], heading: str) -> list[dict]:
    """The code cells from the markdown cell holding ``heading`` to the next ``## `` heading."""

    def has(cell: dict, text: str) -> bool:
        return cell["cell_type"] == "markdown" and f"\n{text}" in "\n" + "".join(cell["source"])

    start = next(i for i, c in enumerate(cells) if has(c, heading))
    end = next((i for i, c in enumerate(cells) if i > start and has(c, "## ")), len(cells))
    return [c for c in cells[start + 1 : end] if c["cell_type"] == "code"]


def recipe_cells(cells: list[dict], heading: str) -> list[dict]:
    """Set-up, parameters, its check, the sizes, section 7's first code cell, then the section."""
    code = [c for c in cells if c["cell_type"] == "code"]
    params = next(i for i, c in enumerate(code) if "parameters" in c["metadata"].get("tags", []))
    first_of_7 = _section(cells, SECTIONS[0])[0]
    section = [c for c in _section(cells, heading) if c is not first_of_7]
    return [code[0], *code[params : params + 3], first_of_7, *section]


def missing_names(cells: list[dict]) -> list[str]:
    known = set(ALWAYS)
    problems = []
    for n, cell in enumerate(cells):
        tree = ast.parse(_code(cell))
        here = _bound(tree)
        missing = _read(tree) - known - here
        if missing:
            problems.append(f"cell {n} of the recipe reads {sorted(missing)}")
        known |= here
    return problems


@pytest.mark.parametrize("heading", SECTIONS)
def test_each_fresh_process_section_runs_after_setup_and_parameters(heading: str) -> None:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    assert missing_names(recipe_cells(cells, heading)) == []


def test_the_check_finds_a_name_defined_only_elsewhere() -> None:
    """The check can fail: a section cell reading a name from an earlier section is caught."""
    cell = {"cell_type": "code", "metadata": {}, "source": ["x = cifar.x_train\n"]}
    assert missing_names([cell]) == ["cell 0 of the recipe reads ['cifar']"]


EARLY = "early_runs = {}  # what those processes reported"


def _early_keys(tree: ast.AST, ctx: type) -> set[str]:
    return {
        n.slice.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ctx)
        and isinstance(n.value, ast.Name)
        and n.value.id == "early_runs"
        and isinstance(n.slice, ast.Constant)
    }


def test_on_a_tpu_the_fresh_process_sections_run_before_the_kernel_opens_the_device() -> None:
    """The cell that runs the processes of section 7 and appendices A and B first on a TPU comes
    before anything opens the device, has every name it needs from the cells above it, and sets
    every result those sections read."""
    code = [
        c
        for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
        if c["cell_type"] == "code"
    ]
    early = next(i for i, c in enumerate(code) if EARLY in "".join(c["source"]))
    opens = next(
        i
        for i, c in enumerate(code)
        if "torch_xla.device()" in _code(c) or "xla.device()" in _code(c)
    )
    assert early < opens, "the early cell must run before this kernel opens its XLA device"
    assert missing_names(code[: early + 1]) == []
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    read = set().union(
        *(_early_keys(ast.parse(_code(c)), ast.Load) for h in SECTIONS for c in _section(cells, h))
    )
    assert read and read <= _early_keys(ast.parse(_code(code[early])), ast.Store), read


def _main_line_code(cells: list[dict]) -> list[dict]:
    recap = next(
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## Recap")
    )
    return [c for c in cells[:recap] if c["cell_type"] == "code"]


def test_the_main_line_runs_without_the_appendices() -> None:
    """Every name a main-line cell reads is bound by a main-line cell before it: the multi-process
    recipe, the cache and the profiler live in appendices after the recap, and nothing before the
    recap may need them."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    assert missing_names(_main_line_code(cells)) == []


def test_a_main_line_cell_reading_an_appendix_name_is_caught() -> None:
    """The check can fail: the results cell reading the cache appendix's ``cache_runs``."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    main = _main_line_code(cells)
    planted = {"cell_type": "code", "metadata": {}, "source": ["n = len(cache_runs)\n"]}
    assert missing_names([*main, planted]) == [
        f"cell {len(main)} of the recipe reads ['cache_runs']"
    ]


def _exercise_cells(cells: list[dict]) -> list[dict]:
    """The code cells between the exercise heading and the next ``## `` heading."""
    return _section(cells, "## Exercise")


def exercise_problems(code: list[dict]) -> list[str]:
    """What is wrong with the exercise's structure: a visible cell leaving ``prepare = None``, a
    collapsed solution that applies only ``if prepare is None:``, a collapsed check that asserts."""
    problems = []
    texts = ["".join(c["source"]) for c in code]
    visible = [t for t in texts if not t.startswith("# @title")]
    if not any(
        isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["prepare"]
        and isinstance(node.value, ast.Constant)
        and node.value.value is None
        for t in visible
        for node in ast.parse(t).body
    ):
        problems.append("no visible cell leaves the placeholder `prepare = None`")
    solutions = [t for t in texts if t.startswith("# @title Solution")]
    body = ast.parse(solutions[0]).body if solutions else []
    if not (
        len(body) == 1
        and isinstance(body[0], ast.If)
        and ast.unparse(body[0].test) == "prepare is None"
        and not body[0].orelse
    ):
        problems.append("the solution does not apply only `if prepare is None:`")
    checks = [t for t in texts if t.startswith("# @title Check")]
    if not checks or not any(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(checks[0]))):
        problems.append("the check does not assert")
    elif "NBVAL_IGNORE_OUTPUT" in checks[0]:
        problems.append("the check's output is ignored by nbval")
    return problems


def test_exercise_has_a_placeholder_a_conditional_solution_and_an_asserting_check() -> None:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    code = _exercise_cells(cells)
    assert exercise_problems(code) == []
    check = next(c for c in code if "".join(c["source"]).startswith("# @title Check"))
    printed = "".join(
        "".join(o.get("text", "")) for o in check["outputs"] if o.get("name") == "stdout"
    )
    assert printed.splitlines()[-1].startswith("Done:"), printed


def test_a_solution_made_unconditional_is_caught() -> None:
    """Planted bug: the solution redefines ``prepare`` whatever the learner wrote."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    code = [dict(c) for c in _exercise_cells(cells)]
    i = next(n for n, c in enumerate(code) if "".join(c["source"]).startswith("# @title Solution"))
    text = "".join(code[i]["source"])
    title, rest = text.split("\n", 1)
    body = "\n".join(line.removeprefix("    ") for line in rest.splitlines()[1:])
    code[i] = {**code[i], "source": [title + "\n" + body + "\n"]}
    assert exercise_problems(code) == ["the solution does not apply only `if prepare is None:`"]
