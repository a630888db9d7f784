"""Notebook 05: Part 1 writes the loop in JAX (what drives the free TPUs' chips), then the recap,
then Part 2 writes it with tf.distribute.

Framework-free: reads the stored notebook as JSON and the `utils` sources with `ast`.

* Part 1 neither installs nor imports TensorFlow: the `bootstrap.prepare` after the parameters
  asks only for jax and optax, and no cell before Part 2 imports tensorflow or keras, directly or
  through a `utils` module (followed transitively through `utils`' own imports).
* Part 2 starts with its own `bootstrap.prepare(needs=["tensorflow"], ...)` and imports, and
  it and the results cell read no name that only Part 1 binds: they run after the cells up to
  the parameter check alone (the restart path where TensorFlow drives a TPU).
* The exercise's layout: ``tests/test_solutions.py``.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, names_bound_and_read, text

NB05 = NOTEBOOKS / "05_custom_training_loop.ipynb"
ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("tensorflow", "keras")


def _code(cs: list[dict]) -> list[dict]:
    return [c for c in cs if c["cell_type"] == "code"]


def _imports(source: str) -> set[str]:
    """Modules a cell or file imports (absolute names; IPython lines skipped)."""
    lines = [s for s in source.splitlines() if not s.lstrip().startswith(("%", "!"))]
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _utils_file(module: str) -> Path | None:
    path = ROOT / Path(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _reaches_a_framework(modules: set[str]) -> set[str]:
    """The frameworks among ``modules`` and everything the `utils` ones import, transitively."""
    seen, todo, found = set(), list(modules), set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if module.split(".")[0] in FRAMEWORKS:
            found.add(module)
        elif module.startswith("utils") and (path := _utils_file(module)):
            todo += _imports(path.read_text(encoding="utf-8"))
    return found


def _part_2(cs: list[dict]) -> int:
    return heading(cs, "## Part 2 · ")


def test_part_1_then_recap_then_part_2_then_results() -> None:
    cs = cells(NB05)
    assert heading(cs, "## Part 1 · ") < heading(cs, "## Exercise") < heading(cs, "## Recap")
    assert heading(cs, "## Recap") < _part_2(cs)
    assert hidden(cs[-1]) and text(cs[-1]).count("results.record(") == 1


def test_part_1_asks_for_jax_and_optax_only() -> None:
    cs = cells(NB05)
    i = next(i for i, c in enumerate(cs) if "parameters" in c["metadata"].get("tags", []))
    assert "SHOW_SOLUTIONS = False" in text(cs[i])
    prepare = text(cs[i + 1])
    assert prepare.startswith('rt = bootstrap.prepare(needs=["jax", "optax"])\n')
    assert prepare.count("check_params(") == 1 and "tensorflow" not in prepare


def test_nothing_before_part_2_imports_tensorflow() -> None:
    """Directly, or through a `utils` module (utils.keras imports Keras, whose default backend is
    TensorFlow)."""
    cs = cells(NB05)
    before = _code(cs[: _part_2(cs)])
    imported = set().union(*(_imports(text(c)) for c in before))
    assert "jax" in imported and "optax" in imported
    assert _reaches_a_framework(imported) == set()


def test_the_framework_check_sees_utils_tf() -> None:
    """The transitive check can fail: utils.tf.training imports TensorFlow and Keras."""
    assert {"tensorflow", "keras"} <= _reaches_a_framework({"utils.tf.training"})


def test_part_2_prepares_and_imports_for_itself() -> None:
    cs = cells(NB05)
    part2 = _code(cs[_part_2(cs) :])  # the results cell too: it runs after a restart
    assert text(part2[0]).startswith('rt = bootstrap.prepare(needs=["tensorflow"], ')
    assert "import tensorflow as tf" in text(part2[0])
    first_cells = [c for c in _code(cs[: heading(cs, "## Part 1 · ")]) if "\n![" not in text(c)]
    before_bound, _ = names_bound_and_read(first_cells)
    p1_bound, _ = names_bound_and_read(_code(cs[heading(cs, "## Part 1 · ") : _part_2(cs)]))
    p2_bound, p2_read = names_bound_and_read(part2)
    only_part_1 = p1_bound - before_bound - p2_bound - set(dir(builtins))
    assert p2_read & only_part_1 == set()


def test_part_1_has_a_whole_loop_with_k_steps_per_call() -> None:
    cs = cells(NB05)
    part1 = _code(cs[heading(cs, "## Part 1 · ") : heading(cs, "## Exercise")])
    loop = [c for c in part1 if "for epoch in range(JAX_EPOCHS)" in text(c)]
    assert len(loop) == 1 and not hidden(loop[0]) and "k_steps(" in text(loop[0])
    assert any("jax.lax.scan(" in text(c) for c in part1)
