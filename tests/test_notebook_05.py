"""Notebook 05's JAX loop comes with an exercise of its own (Exercise B), tested under nbval.

Framework-free: reads the stored notebook as JSON.

* Exercise A (tf.distribute's InputContext) and Exercise B (steps per call in JAX) both come before
  the recap, in that order.
* Exercise B has a visible placeholder, a collapsed solution that applies only over it, a collapsed
  self-check whose numbers nbval ignores, and a collapsed check whose output nbval compares (no
  numbers that vary), which the stored run passed with the solution applied.
"""

from __future__ import annotations

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, stdout, text

NB05 = NOTEBOOKS / "05_custom_training_loop.ipynb"


def test_both_exercises_before_the_recap() -> None:
    cs = cells(NB05)
    a, b = heading(cs, "## Exercise A"), heading(cs, "## Exercise B")
    assert a < b < heading(cs, "## Recap")


def test_exercise_b_placeholder_solution_and_checks() -> None:
    cs = cells(NB05)
    block = cs[heading(cs, "## Exercise B") : heading(cs, "## Recap")]
    code = [c for c in block if c["cell_type"] == "code"]
    placeholder, solution, self_check, compared = code
    assert not hidden(placeholder) and "my_k = None" in text(placeholder)
    assert hidden(solution) and "if my_k is None:" in text(solution)
    assert hidden(self_check) and "NBVAL_IGNORE_OUTPUT" in text(self_check)
    assert hidden(compared) and "NBVAL_IGNORE_OUTPUT" not in text(compared)
    assert "assert not my_problems" in text(compared)
    assert stdout(compared).startswith("Done: k = 2 ran as one compiled program")


def test_section_7_has_a_whole_loop_and_its_tolerance_derivation_is_in_appendix_a() -> None:
    """Section 7 ends with a visible loop over epochs (k steps per call) and a test accuracy,
    checked; its tolerance's derivation sits in Appendix A after the recap, not in section 7."""
    cs = cells(NB05)
    s7, ex_a = heading(cs, "## 7. "), heading(cs, "## Exercise A")
    main = cs[s7:ex_a]
    epochs = "for epoch in range(jax_epochs)"
    loop = [c for c in main if c["cell_type"] == "code" and epochs in text(c)]
    assert len(loop) == 1 and not hidden(loop[0])
    assert "k_steps(" in text(loop[0]) and "jax_test_acc" in text(loop[0])
    after = main[main.index(loop[0]) + 1]
    assert hidden(after) and "assert epoch_losses[-1] < epoch_losses[0]" in text(after)
    appendix = heading(cs, "## Appendix A · ")
    assert heading(cs, "## Recap") < appendix
    assert "Higham" in text(cs[appendix])
    assert not any("Higham" in text(c) for c in main)
