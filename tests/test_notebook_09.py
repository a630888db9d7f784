"""Notebook 09 keeps the shape a learner relies on (issues 19, 21 and 25).

Framework-free: reads the stored notebook as JSON.

* What to expect on a TPU comes as a figure (the predicted ranges beside this machine's
  measurement) before the table of the same numbers.
* The machine lines never print a host overhead rounded to nothing ("0.00 ms").
* Every step up the ladder gets its lever-by-lever line, starting from the verdict.
* The exercise sits at the end of the main line, with a collapsed solution the stored run applied
  and a self-check whose compared output says the solution changed one lever.
"""

from __future__ import annotations

from tests.nbcells import NOTEBOOKS, cells, hidden, index, stdout, text

NB09 = NOTEBOOKS / "09_train_faster.ipynb"


def test_the_tpu_figure_comes_before_the_table_of_its_numbers() -> None:
    cs = cells(NB09)
    figure = index(cs, lambda c: "roofline.plot_bands(" in text(c))
    table = index(cs, lambda c: "input needed (v6e high)" in text(c))
    assert figure < table
    assert any("image/png" in o.get("data", {}) for o in cs[figure]["outputs"]), "no stored figure"
    assert "high end:" in stdout(cs[figure]) and "low end:" in stdout(cs[figure])


def test_no_host_overhead_is_printed_as_zero() -> None:
    for c in cells(NB09):
        assert "0.00 ms" not in stdout(c), text(c)[:80]


def test_every_step_up_the_ladder_is_explained_from_its_verdict() -> None:
    cs = cells(NB09)
    why = cs[index(cs, lambda c: "by_name = {r.spec.name: r for r in rungs}" in text(c))]
    heads = [line for line in stdout(why).splitlines() if not line.startswith("  ")]
    assert len(heads) == 5, heads
    states = ("faster here", "slower here", "no difference this machine can resolve")
    assert all(", after " in h and any(s in h for s in states) for h in heads), heads


def test_exercise_with_a_tested_self_check_and_an_applied_solution() -> None:
    cs = cells(NB09)
    start = index(
        cs, lambda c: c["cell_type"] == "markdown" and "Exercise: your own rung" in text(c)
    )
    recap = index(cs, lambda c: c["cell_type"] == "markdown" and text(c).startswith("## Recap"))
    block = cs[start:recap]
    solution = [c for c in block if text(c).startswith("# @title Solution")]
    check = [c for c in block if text(c).startswith("# @title Exercise check: one lever")]
    assert len(solution) == 1 and hidden(solution[0])
    assert len(check) == 1 and hidden(check[0])
    assert "NBVAL_IGNORE_OUTPUT" not in text(check[0]), "nbval must compare the self-check"
    assert stdout(check[0]).startswith("one lever: yes")
    attempt = [c for c in block if c["cell_type"] == "code" and not hidden(c)]
    assert attempt and "my_spec = None" in text(attempt[0])
