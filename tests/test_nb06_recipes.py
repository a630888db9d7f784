"""Notebook 06's structure: on a TPU no second process fights the kernel for the chips, the loop to
copy is the compiled step the speed section measures, and every cell reads only names bound above
it (the exercise's layout: tests/test_solutions.py). Framework-free: the notebook is read as JSON,
its code with ``ast``."""

from __future__ import annotations

import ast
import builtins
import json
from pathlib import Path

from tests.nbcells import hidden, text

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06_pytorch_xla.ipynb"
ALWAYS = set(dir(builtins)) | {"get_ipython", "display", "__name__"}


def _cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def _code(cell: dict) -> str:
    source = text(cell)
    if source.startswith("%%"):  # a cell magic: the body is a script written to disk, not run here
        return ""
    return "\n".join(
        line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))
    )


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


def missing_names(cells: list[dict]) -> list[str]:
    known = set(ALWAYS)
    problems = []
    for n, cell in enumerate(cells):
        tree = ast.parse(_code(cell))
        here = _bound(tree)
        read = {
            x.id for x in ast.walk(tree) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)
        }
        if read - known - here:
            problems.append(f"cell {n} reads {sorted(read - known - here)}")
        known |= here
    return problems


def _code_cells() -> list[dict]:
    return [c for c in _cells() if c["cell_type"] == "code"]


def test_every_cell_reads_only_names_bound_above_it() -> None:
    assert missing_names(_code_cells()) == []


def test_the_check_finds_a_name_defined_only_below() -> None:
    cell = {"cell_type": "code", "metadata": {}, "source": ["x = cifar.x_train\n"]}
    assert missing_names([cell]) == ["cell 0 reads ['cifar']"]


def _opens(code: list[dict]) -> int:
    return next(i for i, c in enumerate(code) if "torch_xla.device()" in _code(c))


def tpu_problems(code: list[dict]) -> list[str]:
    """Fresh processes that would need the chips after this kernel opened them."""
    problems = []
    for n, cell in enumerate(code[_opens(code) :]):
        source = _code(cell)
        if "run_script(" in source and '"PJRT_DEVICE": "CPU"' not in source:
            problems.append(f"cell {n} after the device opens starts a TPU process")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.If) and "run_spmd(" in ast.unparse(node):
                if ast.unparse(node.test) != "spmd is None":
                    problems.append(f"cell {n} runs SPMD unless {ast.unparse(node.test)}")
        calls = source.count("run_spmd(")
        guarded = sum(
            ast.unparse(x).count("run_spmd(")
            for x in ast.walk(ast.parse(source))
            if isinstance(x, ast.If) and ast.unparse(x.test) == "spmd is None"
        )
        if calls > guarded:
            problems.append(f"cell {n} runs SPMD without `if spmd is None`")
    return problems


def test_on_a_tpu_no_process_needs_the_chips_after_the_kernel_opens_them() -> None:
    """SPMD runs before the device opens (on a TPU), later only `if spmd is None`; the debug
    script runs on the CPU backend; there are no appendix processes and no switch for them."""
    code = _code_cells()
    early = next(i for i, c in enumerate(code) if "spmd = run_spmd(" in _code(c))
    assert early < _opens(code)
    assert "if on_tpu else None" in _code(code[early])
    assert tpu_problems(code) == []
    assert "RUN_APPENDICES" not in NOTEBOOK.read_text(encoding="utf-8")


def test_an_unguarded_spmd_run_is_caught() -> None:
    code = _code_cells()
    planted = {"cell_type": "code", "metadata": {}, "source": ["spmd = run_spmd(path)\n"]}
    assert tpu_problems([*code, planted]) == [
        f"cell {len(code) - _opens(code)} runs SPMD without `if spmd is None`"
    ]


def test_the_loop_to_copy_is_the_compiled_step_the_speed_section_measures() -> None:
    code = _code_cells()
    loop = next(c for c in code if "def train_step(" in _code(c))
    assert not hidden(loop)
    source = _code(loop)
    assert "torch_xla.compile(train_step, full_graph=True)" in source
    assert "MpDeviceLoader" in source and "step(model, x, y, optimizer, bf16)" in source
    bench = next(c for c in code if "compare(" in _code(c))
    assert "step(m, x, y, opt, use_bf16)" in _code(bench)
    params = next(c for c in code if "parameters" in c["metadata"].get("tags", []))
    assert "BF16 = None" in text(params) and "SHOW_SOLUTIONS = False" in text(params)


def _exercise_cells(cells: list[dict]) -> list[dict]:
    start = next(i for i, c in enumerate(cells) if "## Exercise" in text(c))
    end = next(i for i, c in enumerate(cells) if i > start and text(c).startswith("## "))
    return [c for c in cells[start:end] if c["cell_type"] == "code"]


def exercise_problems(code: list[dict]) -> list[str]:
    """A visible `prepare = None`, a collapsed solution applied only `if SHOW_SOLUTIONS:`, a
    collapsed check that asserts only with SHOW_SOLUTIONS."""
    problems = []
    visible = [text(c) for c in code if not hidden(c)]
    if not any("prepare = None" in t for t in visible):
        problems.append("no visible placeholder `prepare = None`")
    solution = [c for c in code if text(c).startswith("# @title Solution")]
    body = ast.parse(text(solution[0])).body if solution else []
    if not (solution and hidden(solution[0]) and len(body) == 1 and isinstance(body[0], ast.If)
            and ast.unparse(body[0].test) == "SHOW_SOLUTIONS" and not body[0].orelse):  # fmt: skip
        problems.append("the solution does not apply only `if SHOW_SOLUTIONS:`")
    check = [c for c in code if text(c).startswith("# @title Check")]
    if not check or "assert not (SHOW_SOLUTIONS and problems)" not in text(check[0]):
        problems.append("the check does not assert only with SHOW_SOLUTIONS")
    return problems


def test_the_spmd_script_grows_adams_rate_by_the_square_root_rule() -> None:
    """On a v5e-8 the script's global batch is 8 x 128 = 1,024: Adam's 1e-3 at the seed's 128
    grows by sqrt(8) (notebook 09's rule), and the one-device twin trains at the same rate."""
    script = next(text(c) for c in _cells() if text(c).startswith("%%save_script spmd_train.py"))
    twin = next(text(c) for c in _cells() if "twin_opt = " in text(c) and not hidden(c))

    def lr(source: str, names: dict) -> float:
        body = "\n".join(x for x in source.splitlines() if not x.startswith("%%"))
        tree = ast.parse(body)
        call = next(
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("Adam")
        )
        kw = next(k.value for k in call.keywords if k.arg == "lr")
        return eval(compile(ast.Expression(kw), "<06>", "eval"), names)  # noqa: S307

    rate = 1e-3 * 8**0.5
    assert abs(lr(script, {"per_device_batch": 128, "n": 8}) - rate) < 1e-12
    assert abs(lr(twin, {"global_batch": 1024}) - rate) < 1e-12
    assert lr(script, {"per_device_batch": 32, "n": 4}) == 1e-3  # the CPU run: the seed's batch
