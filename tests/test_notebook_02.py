"""Notebook 02's main line is the recipe a free-TPU learner runs; its detour is an appendix.

Framework-free: reads the stored notebook as JSON and parses its code cells with `ast`.

* The main line (sections 1 to 5, the exercise, the recap) comes first; "One device or eight" is
  Appendix A after the recap, announced by a link where the main line needs it.
* No main-line cell reads a name that only an appendix defines (a learner may stop at the recap).
* The settings a learner needs are computed in visible cells, not in collapsed harness.
* The exercise is stored unsolved: a visible placeholder, a collapsed solution that applies only
  under `SHOW_SOLUTIONS` (False in the parameters), a collapsed check that says what is missing and
  asserts only when the solution is shown. The results cell comes last and is collapsed.
* The recipe cell itself is run by `tests/keras/test_nb02_recipe.py`.
"""

from __future__ import annotations

import ast
import builtins

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, stdout, text

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


def solution_applies_only_when_shown(solution: dict) -> bool:
    """Every statement of the solution (after its title comment) sits under `if SHOW_SOLUTIONS:`."""
    body = ast.parse(text(solution)).body
    if len(body) != 1 or not isinstance(body[0], ast.If) or body[0].orelse:
        return False
    test = body[0].test
    return isinstance(test, ast.Name) and test.id == "SHOW_SOLUTIONS"


def shows_solutions_off(cs: list[dict]) -> bool:
    params = next(c for c in cs if "parameters" in c.get("metadata", {}).get("tags", []))
    return "\nSHOW_SOLUTIONS = False" in "\n" + text(params)


def stored_unsolved(check: dict) -> bool:
    """The check's stored output says what is missing, and never that the exercise passed."""
    out = stdout(check)
    return out.startswith("Exercise: not done yet:") and "passed" not in out.lower()


def test_the_main_line_ends_with_the_recap_and_the_detour_is_an_appendix() -> None:
    cs = cells(NB02)
    heads = [text(c).splitlines()[0] for c in cs if c["cell_type"] == "markdown" and text(c)]
    sections = [h for h in heads if h.startswith("## ")]
    recap = sections.index("## Recap")
    assert [h.split(" ")[1] for h in sections[:5]] == ["1.", "2.", "3.", "4.", "5."], sections
    assert "What each setting buys" in sections[2] and "Save and load" in sections[3]
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


def test_the_exercise_is_stored_unsolved() -> None:
    cs = cells(NB02)
    assert shows_solutions_off(cs)
    block = cs[heading(cs, "## Exercise") : heading(cs, "## Recap")]
    code = [c for c in block if c["cell_type"] == "code"]
    placeholder, solution, reference, check = code  # the reference is collapsed, after the edit
    assert hidden(reference) and "def train_on(" in text(reference)
    assert not hidden(placeholder) and "DataParallel(devices=devices)" in text(placeholder)
    assert hidden(solution) and solution_applies_only_when_shown(solution)
    assert hidden(check) and "\n    assert not SHOW_SOLUTIONS or " in text(check)
    assert "sharding_check.check_in_fresh_process(exercise_distribution" in text(check)
    assert stored_unsolved(check), stdout(check)


def test_an_unconditional_solution_is_caught() -> None:
    """Planted bug: the solution applied whatever SHOW_SOLUTIONS says."""
    cs = cells(NB02)
    block = cs[heading(cs, "## Exercise") : heading(cs, "## Recap")]
    solution = [c for c in block if c["cell_type"] == "code"][1]
    title, _, body = text(solution).split("\n", 2)
    dedented = "\n".join(line.removeprefix("    ") for line in body.splitlines())
    assert not solution_applies_only_when_shown({"source": [title + "\n" + dedented]})
    assert not stored_unsolved({"outputs": [{"name": "stdout", "text": "Exercise: passed: ..."}]})


def test_results_are_recorded_last_in_a_collapsed_cell() -> None:
    last = cells(NB02)[-1]
    assert hidden(last) and text(last).startswith("# @title Save this run's results")
    for key in ("one_vs_all_devices_max_weight_diff", "images_per_s_float32"):
        assert key in text(last)
