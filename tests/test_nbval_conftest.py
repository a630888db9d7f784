"""notebooks/conftest.py: nbval's settings for the course notebooks."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tests.nbcells import cells

ROOT = Path(__file__).resolve().parents[1]


def _conftest():
    spec = importlib.util.spec_from_file_location("nb_conftest", ROOT / "notebooks" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cells_wait_longer_for_their_outputs_than_nbvals_five_seconds():
    conftest = _conftest()
    cell = SimpleNamespace(output_timeout=5)  # as nbval's IPyNbCell sets it
    other = SimpleNamespace()  # a plain test item has no output timeout
    conftest.pytest_collection_modifyitems([cell, other])
    assert cell.output_timeout == conftest.OUTPUT_TIMEOUT_S >= 60
    assert not hasattr(other, "output_timeout")


def test_nbval_still_names_the_attribute_the_conftest_raises():
    """If nbval renames ``output_timeout``, the conftest would silently do nothing."""
    import nbval.plugin

    source = Path(nbval.plugin.__file__).read_text()
    assert "timeout=self.output_timeout" in source


@pytest.mark.parametrize(
    "path", sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")), ids=lambda p: p.stem[:2]
)
def test_every_exercise_is_found_for_the_solved_run(path: Path) -> None:
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    span = _conftest().exercise_span(code)
    assert span is not None, (
        f"{path.name}: no '# @title Solution' cell before a 'not done yet' check"
    )
    assert span[1] - span[0] <= 3, "the solved run repeats a few cells, not a whole section"


def _exercise_notebook(solution: str) -> nbformat.NotebookNode:
    def cell(source: str, printed: str = "") -> nbformat.NotebookNode:
        out = [nbformat.v4.new_output("stream", name="stdout", text=printed)] if printed else []
        return nbformat.v4.new_code_cell(source, execution_count=1, outputs=out)

    check = (
        'if answer == 42:\n    print("Exercise passed.")\n'
        'else:\n    print("Exercise: not done yet: set answer to 42.")'
    )
    return nbformat.v4.new_notebook(
        cells=[
            cell("SHOW_SOLUTIONS = False"),
            cell("answer = None  # change me"),
            cell(f"# @title Solution\nif SHOW_SOLUTIONS:\n    answer = {solution}"),
            cell(check, "Exercise: not done yet: set answer to 42.\n"),
            cell(
                "print(SHOW_SOLUTIONS)", "False\n"
            ),  # the solved run leaves the parameter as it was
        ]
    )


@pytest.mark.parametrize(("solution", "passes"), [("42", True), ("41", False)])
def test_the_solved_run_fails_when_a_solution_does_not_pass(tmp_path, solution, passes):
    nbformat.write(_exercise_notebook(solution), tmp_path / "ex.ipynb")
    (tmp_path / "conftest.py").write_text("from notebooks.conftest import *  # noqa: F403\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
         "--nbval-current-env", "ex.ipynb"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = run.stdout + run.stderr
    assert ("6 passed" in report) is passes, report
    assert ("Cell 3 solved" in report and "did not pass" in report) is not passes, report
