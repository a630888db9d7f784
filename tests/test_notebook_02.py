"""Notebook 02's main line is the recipe a free-TPU learner runs; its detour is an appendix.

Framework-free: reads the stored notebook as JSON and parses its code cells with `ast`.

* The main line (sections 1 to 5, the exercise, the recap) comes first; "One device or eight" is
  Appendix A after the recap, announced by a link where the main line needs it.
* No main-line cell reads a name that only an appendix defines (a learner may stop at the recap).
* The settings a learner needs are computed in visible cells, not in collapsed harness.
* The results cell comes last and is collapsed (the exercise's layout: tests/test_solutions.py).
* The recipe cell itself is run by `tests/keras/test_nb02_recipe.py`.
"""

from __future__ import annotations

import ast
import builtins

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, text

NB02 = NOTEBOOKS / "02_keras_jax_cifar10.ipynb"


def _split(cs: list[dict]) -> tuple[list[dict], list[dict]]:
    recap = heading(cs, "## Recap")
    return cs[:recap], cs[recap:]


def _parse(cell: dict) -> ast.Module:
    """A code cell's Python, without the lines it gives to IPython (`!` shell, `%` magics)."""
    lines = text(cell).splitlines()
    return ast.parse("\n".join(ln for ln in lines if not ln.lstrip().startswith(("!", "%"))))


def _defined(cell: dict) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(_parse(cell)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _loaded(cell: dict) -> set[str]:
    tree = _parse(cell)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def appendix_only_names_read_by_the_main_line(cs: list[dict]) -> dict[int, set[str]]:
    """Main-line code cell index -> the names it reads that only appendix cells define."""
    main, rest = _split(cs)
    main_defs = set().union(*(_defined(c) for c in main if c["cell_type"] == "code"))
    appendix_defs = set().union(*(_defined(c) for c in rest if c["cell_type"] == "code"))
    only_there = appendix_defs - main_defs - set(dir(builtins))
    found = {}
    for i, c in enumerate(cs[: len(main)]):
        if c["cell_type"] == "code" and (bad := _loaded(c) & only_there):
            found[i] = bad
    return found


def test_the_main_line_ends_with_the_recap_and_the_detour_is_an_appendix() -> None:
    cs = cells(NB02)
    heads = [text(c).splitlines()[0] for c in cs if c["cell_type"] == "markdown" and text(c)]
    sections = [h for h in heads if h.startswith("## ")]
    recap = sections.index("## Recap")
    assert [h.split(" ")[1] for h in sections[:5]] == ["1.", "2.", "3.", "4.", "5."], sections
    assert "What `steps_per_execution` buys" in sections[2] and "Save and load" in sections[3]
    assert "recipe in one cell" in sections[4]
    assert sections[5].startswith("## Exercise") and recap == 6
    assert sections[recap + 1 :] == ["## Appendix A · One device or eight: the same weights"]
    main, _ = _split(cs)
    assert any("Appendix A" in text(c) for c in main if c["cell_type"] == "markdown")


def test_no_main_line_cell_needs_an_appendix() -> None:
    assert appendix_only_names_read_by_the_main_line(cells(NB02)) == {}


def test_the_dependency_check_catches_an_appendix_only_name() -> None:
    """Planted bug: the exercise's reference step moved after the recap."""
    cs = cells(NB02)
    ref = next(i for i, c in enumerate(cs) if "\nEQUIVALENCE_LR = " in text(c))
    moved = cs[:ref] + cs[ref + 1 :] + [cs[ref]]
    found = appendix_only_names_read_by_the_main_line(moved)
    assert any({"train_on", "weights_all", "weight_tolerance"} & names for names in found.values())


def test_the_settings_a_learner_needs_are_computed_in_visible_cells() -> None:
    main, _ = _split(cells(NB02))
    for name in ("per_replica_batch", "global_batch", "n_devices", "simulated_devices", "epochs"):
        where = [c for c in main if c["cell_type"] == "code" and name in _defined(c)]
        assert where and not any(hidden(c) for c in where), name
    visible = "".join(text(c) for c in main if c["cell_type"] == "code" and not hidden(c))
    assert 'set_dtype_policy("mixed_bfloat16")' in visible
    assert "steps_per_execution=steps_per_execution" in visible


def test_results_are_recorded_last_in_a_collapsed_cell() -> None:
    last = cells(NB02)[-1]
    assert hidden(last) and text(last).startswith("# @title Save this run's results")
    for key in ("one_vs_all_devices_max_weight_diff", "images_per_s"):
        assert key in text(last)
