"""Notebook 03's main line is what a learner runs; its measurements are appendices.

Framework-free: reads the stored notebook as JSON and parses its code cells with `ast`.

* The main line (sections 0 to 3, the exercise, the recap) comes first; XLA's FLOP count with MFU,
  and the profiler trace are Appendix A and B after the recap. 1 device against all of them is
  notebook 02's Appendix A, linked from section 2.
* No main-line cell reads a name that only an appendix defines (a learner may stop at the recap).
* The exercise's layout: ``tests/test_solutions.py``.
* The results cell comes last.
"""

from __future__ import annotations

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, text
from tests.test_notebook_02 import (
    appendix_only_names_read_by_the_main_line,
)

NB03 = NOTEBOOKS / "03_jax_under_the_hood.ipynb"
APPENDICES = (
    "## Appendix A · XLA's own FLOP count",
    "## Appendix B · A profiler trace",
)


def _exercise(cs: list[dict]) -> tuple[dict, dict, dict]:
    block = cs[heading(cs, "## Exercise") : heading(cs, "## Recap")]
    placeholder, solution, check = [c for c in block if c["cell_type"] == "code"]
    return placeholder, solution, check


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
    assert any("02_keras_jax_cifar10.ipynb" in text(c) and "Appendix A" in text(c) for c in main)


def test_no_main_line_cell_needs_an_appendix() -> None:
    assert appendix_only_names_read_by_the_main_line(cells(NB03)) == {}


def test_the_dependency_check_catches_an_appendix_only_name() -> None:
    """Planted bug: the cell defining `batches` moved into an appendix."""
    cs = cells(NB03)
    i = next(k for k, c in enumerate(cs) if text(c).startswith("def batches("))
    moved = cs[:i] + cs[i + 1 :] + [cs[i]]
    found = appendix_only_names_read_by_the_main_line(moved)
    assert any("batches" in names for names in found.values()), found


def test_results_are_recorded_last_in_a_collapsed_cell() -> None:
    last = cells(NB03)[-1]
    assert hidden(last) and text(last).startswith("# @title Save this run's results")
    for key in ("xla_vs_analytic_flops", "mfu_all_devices", "test_accuracy"):
        assert key in text(last)
