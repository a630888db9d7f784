"""A function a notebook defines in a visible cell (the code a learner edits and copies) is the
same code as its ``utils`` original, which the rest of the course runs.

Framework-free: the notebook and the module are both read as text and compared with ``ast``
(docstrings and comments left out), so this runs without TensorFlow or torch.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.nbcells import (
    cells,
    function_ast,
    names_bound_and_read,
    saved_script,
    script_ast,
    shown_function,
)
from utils import ROOT

# (notebook, function, the utils module that holds the original)
SHOWN = [
    *[
        ("03_jax_under_the_hood.ipynb", name, "utils/jax/cnn.py")
        for name in ("init_params", "conv", "max_pool", "apply", "loss_fn", "make_train_step")
    ],
    ("05_custom_training_loop.ipynb", "make_train_loop", "utils/tf/training.py"),
    ("06_pytorch_xla.ipynb", "train_step", "utils/torch/xla.py"),
    ("09_train_faster.ipynb", "scanned_trainer", "utils/jax/ladder_bench.py"),
]


def _visible(cell: dict, name: str) -> None:
    assert not cell["metadata"].get("jupyter", {}).get("source_hidden"), f"{name} must be visible"


@pytest.mark.parametrize(("notebook", "name", "module"), SHOWN)
def test_the_notebook_shows_the_code_utils_runs(notebook: str, name: str, module: str) -> None:
    cells = shown_function(ROOT / "notebooks" / notebook, name)
    assert len(cells) == 1, (
        f"{notebook} must define {name} in exactly one code cell, found {len(cells)}"
    )
    _visible(cells[0], name)
    cell = cells[0]
    original = function_ast((ROOT / module).read_text(encoding="utf-8"), name)
    assert function_ast("".join(cell["source"]), name) == original, (
        f"{notebook}'s {name} differs from {module}'s: change both"
    )


@pytest.mark.parametrize(("notebook", "name", "module"), SHOWN)
def test_the_notebook_runs_the_code_it_shows(notebook: str, name: str, module: str) -> None:
    """Editing the shown cell changes what runs: the notebook uses ``name`` itself (a call, or
    passed on), never the ``utils`` copy through a module (``lb.scanned_trainer(...)``)."""
    code = [
        "".join(ln for ln in c["source"] if ln[:1] not in "!%")  # Python: no IPython lines
        for c in cells(ROOT / "notebooks" / notebook)
        if c["cell_type"] == "code" and not "".join(c["source"]).startswith("%%")
    ]
    _, read = names_bound_and_read([{"source": [source]} for source in code])
    assert name in read, f"{notebook} shows {name} but never uses it"
    for source in code:
        copies = [
            n
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Attribute) and n.attr == name
        ]
        assert not copies, f"{notebook} runs {module}'s {name}, not the one it shows"


# (notebook, the script a %%save_script cell writes, the utils copy that a TPU run starts before
# the kernel opens the chips)
SCRIPTS = [
    ("06_pytorch_xla.ipynb", "spmd_train.py", "utils/torch/spmd_train.py"),
]


@pytest.mark.parametrize(("notebook", "name", "module"), SCRIPTS)
def test_the_notebook_writes_the_script_utils_holds(notebook: str, name: str, module: str) -> None:
    cells = saved_script(ROOT / "notebooks" / notebook, name)
    assert len(cells) == 1, f"{notebook} must write {name} in exactly one cell, found {len(cells)}"
    original = script_ast((ROOT / module).read_text(encoding="utf-8"))
    assert script_ast("".join(cells[0]["source"])) == original, (
        f"{notebook}'s {name} differs from {module}: change both"
    )


def test_a_changed_statement_is_caught_and_a_docstring_is_not() -> None:
    """The comparison can fail: one changed argument differs; docstrings and comments do not."""
    original = "def f(x):\n    '''Doc.'''\n    return g(x, 1)  # note\n"
    assert function_ast("def f(x):\n    return g(x, 1)\n", "f") == function_ast(original, "f")
    assert function_ast("def f(x):\n    return g(x, 2)\n", "f") != function_ast(original, "f")
    with pytest.raises(LookupError):
        function_ast("def h():\n    pass\n", "f")
    script = '%%save_script s.py\n"""Usage."""\nimport sys\n\nprint(sys.argv[1])\n'
    assert script_ast(script) == script_ast("import sys\nprint(sys.argv[1])  # the argument\n")
    assert script_ast(script) != script_ast("import sys\nprint(sys.argv[2])\n")


def test_only_top_level_definitions_in_code_cells_count(tmp_path: Path) -> None:
    """A script written by a cell magic, or a nested def, is not the notebook's definition."""
    import json

    def code(text: str) -> dict:
        return {"cell_type": "code", "metadata": {}, "source": text.splitlines(keepends=True)}

    nb = {
        "cells": [
            code("%%save_script s.py\ndef f():\n    pass\n"),
            code("def outer():\n    def f():\n        pass\n"),
            code("def f():\n    return 1\n"),
        ]
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert ["".join(c["source"]) for c in shown_function(path, "f")] == ["def f():\n    return 1\n"]
