"""Notebook 03's main line is what a learner runs; its measurements are appendices.

Framework-free: reads the stored notebook as JSON and parses its code cells with `ast`.

* The main line (sections 0 to 3, the exercise, the recap) comes first; the 1-vs-N tolerance
  derivation, XLA's FLOP count with MFU, and the profiler trace are Appendix A, B and C after the
  recap, each announced by a one-line link in the main line.
* No main-line cell reads a name that only an appendix defines (a learner may stop at the recap).
* The exercise: a visible placeholder (`evaluate = None`), a collapsed solution that applies only
  over it, a collapsed check that asserts, passed in the stored run. The results cell comes last.
"""

from __future__ import annotations

import ast

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, stdout, text
from tests.test_notebook_02 import appendix_only_names_read_by_the_main_line

NB03 = NOTEBOOKS / "03_jax_under_the_hood.ipynb"
APPENDICES = (
    "## Appendix A · One device or all",
    "## Appendix B · XLA's own FLOP count",
    "## Appendix C · A profiler trace",
    "## Appendix D · DataParallel in Keras' source",
)


def _exercise(cs: list[dict]) -> tuple[dict, dict, dict]:
    block = cs[heading(cs, "## Exercise") : heading(cs, "## Recap")]
    placeholder, solution, check = [c for c in block if c["cell_type"] == "code"]
    return placeholder, solution, check


def solution_applies_only_over_the_placeholder(solution: dict) -> bool:
    """Every statement of the solution sits under `if evaluate is None:`."""
    body = ast.parse(text(solution)).body
    if len(body) != 1 or not isinstance(body[0], ast.If):
        return False
    test = body[0].test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "evaluate"
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and not body[0].orelse
    )


def test_the_main_line_ends_with_the_recap_and_the_measurements_are_appendices() -> None:
    cs = cells(NB03)
    heads = [text(c).splitlines()[0] for c in cs if c["cell_type"] == "markdown" and text(c)]
    sections = [h for h in heads if h.startswith("## ")]
    assert [h.split(" ")[1] for h in sections[:4]] == ["0.", "1.", "2.", "3."], sections
    assert "Recompilation" in sections[3] and sections[4].startswith("## Exercise")
    assert sections[5] == "## Recap"
    appendices = sections[6:]
    assert len(appendices) == len(APPENDICES), sections
    assert all(h.startswith(a) for h, a in zip(appendices, APPENDICES, strict=True)), sections
    main = cs[: heading(cs, "## Recap")]
    links = [text(c) for c in main if c["cell_type"] == "markdown"]
    for letter in "ABCD":
        assert any(f"Appendix {letter} ·" in t and len(t.splitlines()) <= 4 for t in links), letter


def test_no_main_line_cell_needs_an_appendix() -> None:
    assert appendix_only_names_read_by_the_main_line(cells(NB03)) == {}


def test_the_dependency_check_catches_an_appendix_only_name() -> None:
    """Planted bug: the cell defining `batches` moved into Appendix A."""
    cs = cells(NB03)
    i = next(k for k, c in enumerate(cs) if text(c).startswith("def batches("))
    moved = cs[:i] + cs[i + 1 :] + [cs[i]]
    found = appendix_only_names_read_by_the_main_line(moved)
    assert any("batches" in names for names in found.values()), found


def test_exercise_placeholder_conditional_solution_and_asserting_check() -> None:
    placeholder, solution, check = _exercise(cells(NB03))
    assert not hidden(placeholder) and "\nevaluate = None" in text(placeholder)
    assert hidden(solution) and text(solution).startswith("# @title Solution")
    assert solution_applies_only_over_the_placeholder(solution)
    assert hidden(check) and "\nassert " in text(check)
    assert "NBVAL_IGNORE_OUTPUT" not in text(check)
    assert stdout(check).splitlines()[-1].startswith("Passed:")


def test_an_unconditional_solution_is_caught() -> None:
    """Planted bug: the solution overwrites the learner's `evaluate` whatever it holds."""
    _, solution, _ = _exercise(cells(NB03))
    title, rest = text(solution).split("\n", 1)
    body = rest.split("\n", 1)[1]  # drop the `if evaluate is None:` line
    dedented = "\n".join(line.removeprefix("    ") for line in body.splitlines())
    assert not solution_applies_only_over_the_placeholder({"source": [title + "\n" + dedented]})


def test_results_are_recorded_last_in_a_collapsed_cell() -> None:
    last = cells(NB03)[-1]
    assert hidden(last) and text(last).startswith("# @title Save this run's results")
    keys = (
        "xla_vs_analytic_flops",
        "mfu_all_devices",
        "sgd_equivalence_tolerance",
        "test_accuracy",
    )
    for key in keys:
        assert key in text(last)
