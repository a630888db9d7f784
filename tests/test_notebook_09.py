"""Notebook 09 keeps the shape a learner relies on (issues 19, 21 and 25).

Framework-free: reads the stored notebook as JSON.

* What to expect on a TPU comes as a figure (the predicted ranges beside this machine's
  measurement) before the table of the same numbers.
* The machine lines never print a host overhead rounded to nothing ("0.00 ms").
* Every step up the ladder gets its lever-by-lever line, starting from the verdict.
* The exercise sits at the end of the main line, with a collapsed solution the stored run applied
  and a self-check whose compared output says the solution changed one lever.
* Section 5 is the prediction table from one collapsed cell; the host's measurement is printed in
  Appendix A, and a rung whose host was measured at fewer steps per call than it runs says so.
"""

from __future__ import annotations

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, index, stdout, text

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
    states = ("faster here", "slower here", "no difference this machine can resolve", "bar, though")
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


def test_section_5_is_the_table_and_the_host_measurement_is_in_appendix_a() -> None:
    cs = cells(NB09)
    five, six = heading(cs, "## 5. "), heading(cs, "## 6. ")
    appendix_a, appendix_b = heading(cs, "## Appendix A"), heading(cs, "## Appendix B")
    code = [c for c in cs[five:six] if c["cell_type"] == "code"]
    assert len(code) == 1 and hidden(code[0]), "section 5: one collapsed cell, the table"
    assert "Appendix A" in text(cs[five])
    printed = [
        i for i, c in enumerate(cs) if "step(s) per call" in stdout(c) and c["cell_type"] == "code"
    ]
    assert printed and all(appendix_a < i < appendix_b for i in printed), printed
    table = stdout(code[0]).splitlines()
    short = [
        line.split(":")[0]
        for c in cs[:five]
        for line in stdout(c).splitlines()
        if ": a pass holds " in line
    ]
    for name in short:  # the stored CPU run: rung 5's pass holds fewer steps than it would run
        row = next(line for line in table if line.startswith(name))
        assert "(host measured at " in row and " steps/call here)" in row, row
