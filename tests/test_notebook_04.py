"""Notebook 04 puts the free-TPU path first: Part 1 (the recipe on Keras 3 + JAX, Exercise A), then
Part 2 (the seed's TensorFlow path with TPUStrategy, Exercise B), then the recap.

Framework-free: reads the stored notebook as JSON.

* Part 1 comes right after the header, set-up, parameter and settings cells; each part holds its
  exercise, and both come before the recap; numbered sections run 1, 2, ... without gaps.
* Part 1 stands alone after those cells: none of its cells reads a name that only Part 2 defines.
* The hint for Exercise A (which steps-per-execution values change the executions per epoch) is
  computed from the run's own steps per epoch, and every value it names passes the exercise's rule.
"""

from __future__ import annotations

import re

from tests.nbcells import (
    NOTEBOOKS,
    cells,
    exercises_in_their_parts,
    heading,
    hidden,
    part_1_names_only_part_2_defines,
    stdout,
    text,
)

NB04 = NOTEBOOKS / "04_keras_cifar10_tpu.ipynb"


def _code(cs: list[dict]) -> list[dict]:
    return [c for c in cs if c["cell_type"] == "code"]


def test_part_1_first_then_part_2_each_with_its_exercise_before_the_recap() -> None:
    cs = cells(NB04)
    a, b = exercises_in_their_parts(cs)
    assert "on-chip script" in text(cs[a]) and "static batch shape" in text(cs[b])
    assert any(text(c).startswith("%%save_script") for c in cs[heading(cs, "## Part 1 · ") : a])


def test_part_1_reads_no_name_that_only_part_2_defines() -> None:
    """On a free TPU a learner runs the cells before Part 1, then Part 1, never Part 2."""
    assert part_1_names_only_part_2_defines(cells(NB04)) == set()


def test_no_stale_section_or_exercise_references() -> None:
    for c in cells(NB04):
        assert "section 1b" not in text(c).lower() and "## 1b" not in text(c), text(c)[:80]


def test_the_exercise_a_hint_comes_from_the_run_and_its_values_change_the_executions() -> None:
    cs = cells(NB04)
    a = heading(cs, "## Exercise A")
    check = next(c for c in reversed(cs[:a]) if c["cell_type"] == "code")
    assert hidden(check) and "values_that_change(recipe_steps, base)" in text(check)
    m = re.search(
        r"An epoch of (\d+) steps ran in (\d+) Keras executions .*?STEPS_PER_EXECUTION = (\d+)\)\. "
        r".*?another number: (.+)\.\n",
        stdout(check),
    )
    assert m, stdout(check)
    steps, default_runs, base = int(m[1]), int(m[2]), int(m[3])
    assert default_runs == -(-steps // base)
    for part in m[4].split(" or "):
        lo, _, hi = part.replace(",", "").partition(" to ")
        for v in range(int(lo), int(hi or lo) + 1):
            assert -(-steps // v) != default_runs, v
