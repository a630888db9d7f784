"""Notebook 05 puts the free-TPU path first: Part 1 (the loop in JAX, Exercise A), then Part 2
(the loop with tf.distribute, Exercise B), then the recap.

Framework-free: reads the stored notebook as JSON.

* Part 1 comes right after the set-up and parameter cells, and Part 1's exercise (Exercise A,
  steps per call in JAX) and Part 2's (Exercise B, tf.distribute's InputContext) come before the
  recap, each in its part.
* Part 1 stands alone after the set-up and parameter cells: none of its cells reads a name that
  only Part 2 defines, and its sizes come from the `parameters` cell, checked by check_params.
* Exercise A has a visible placeholder, a collapsed solution that applies only over it, a collapsed
  self-check whose numbers nbval ignores, and a collapsed check whose output nbval compares (no
  numbers that vary), which the stored run passed with the solution applied.
"""

from __future__ import annotations

from tests.nbcells import (
    NOTEBOOKS,
    cells,
    exercises_in_their_parts,
    heading,
    hidden,
    part_1_names_only_part_2_defines,
    parts,
    stdout,
    text,
)

NB05 = NOTEBOOKS / "05_custom_training_loop.ipynb"
JAX_PARAMETERS = ("JAX_TRAIN_IMAGES", "JAX_EPOCHS", "JAX_STEPS_PER_EXECUTION")


def _code(cs: list[dict]) -> list[dict]:
    return [c for c in cs if c["cell_type"] == "code"]


def test_part_1_first_then_part_2_each_with_its_exercise_before_the_recap() -> None:
    cs = cells(NB05)
    a, b = exercises_in_their_parts(cs)
    assert "JAX" in text(cs[a]) and "tf.distribute" in text(cs[b])


def test_part_1_reads_no_name_that_only_part_2_defines() -> None:
    """On a free TPU a learner runs the cells before Part 1, then Part 1, never Part 2."""
    assert part_1_names_only_part_2_defines(cells(NB05)) == set()


def test_part_1_sizes_are_checked_parameters() -> None:
    cs = cells(NB05)
    params = [c for c in cs if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1
    check = cs[cs.index(params[0]) + 1]
    assert hidden(check) and "check_params(" in text(check)
    _, part1, _ = parts(cs)
    part1_code = "\n".join(text(c) for c in _code(part1))
    for name in JAX_PARAMETERS:
        assert f"{name} = " in text(params[0]), name
        assert f"{name}=({name}," in text(check), name
        assert name in part1_code, name
    assert "subset=4_096" not in part1_code and "jax_epochs = 3" not in part1_code
    assert "steps_per_call = 4" not in part1_code


def test_exercise_a_placeholder_solution_and_checks() -> None:
    cs = cells(NB05)
    block = cs[heading(cs, "## Exercise A") : heading(cs, "## Part 2 · ")]
    code = [c for c in block if c["cell_type"] == "code"]
    placeholder, solution, self_check, compared = code
    assert not hidden(placeholder) and "my_k = None" in text(placeholder)
    assert hidden(solution) and "if my_k is None:" in text(solution)
    assert hidden(self_check) and "NBVAL_IGNORE_OUTPUT" in text(self_check)
    assert hidden(compared) and "NBVAL_IGNORE_OUTPUT" not in text(compared)
    assert "assert not my_problems" in text(compared)
    assert stdout(compared).startswith("Done: k = 2 ran as one compiled program")


def test_part_1_has_a_whole_loop_and_its_tolerance_derivation_is_in_appendix_a() -> None:
    """Part 1 has a visible loop over epochs (k steps per call) and a test accuracy, checked; its
    tolerance's derivation sits in Appendix A after the recap, not in Part 1."""
    cs = cells(NB05)
    _, main, _ = parts(cs)
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
