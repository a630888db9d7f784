"""Notebook 07 serves a JAX learner too: a Grain exercise beside the tf.data one.

Framework-free: reads the stored notebook as JSON.

* The header names the JAX learner's path and both exercises.
* Exercise B (Grain) sits after Exercise A, before the results are saved, with a placeholder the
  learner edits, a collapsed solution that applies only over the placeholder, a self-check whose
  messages come from the run's numbers (ignored by nbval) and a compared check that the solution's
  settings differ from the naive read's.
"""

from __future__ import annotations

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, index, stdout, text

NB07 = NOTEBOOKS / "07_tf_data_performance.ipynb"


def test_the_header_gives_a_jax_learners_path_and_both_exercises() -> None:
    header = text(cells(NB07)[0])
    assert "**JAX learner's path**" in header
    assert "Exercise A" in header and "Exercise B" in header


def test_grain_exercise_follows_the_tfdata_one_with_solution_and_checks() -> None:
    cs = cells(NB07)
    a = heading(cs, "## Exercise A:")
    b = heading(cs, "## Exercise B: a Grain pipeline that keeps up")
    save = index(cs, lambda c: text(c).startswith("# @title Save this run's results"))
    assert a < b < save
    block = cs[b:save]
    attempt = [
        c
        for c in block
        if c["cell_type"] == "code" and text(c).startswith("my_read_options = None")
    ]
    assert len(attempt) == 1 and not hidden(attempt[0])
    solution = [c for c in block if text(c).startswith("# @title Solution")]
    assert len(solution) == 1 and hidden(solution[0])
    assert "if my_read_options is None:" in text(solution[0]), (
        "the solution must not overwrite an attempt"
    )
    checks = [c for c in block if text(c).startswith("# @title Check")]
    assert len(checks) == 2 and all(hidden(c) for c in checks)
    timed, ran = checks
    assert "NBVAL_IGNORE_OUTPUT" in text(timed) and "compare(" in text(timed)
    assert "No difference this machine can resolve" in text(timed), "every verdict has its message"
    assert "NBVAL_IGNORE_OUTPUT" not in text(ran), "nbval must compare the settings check"
    assert "my_read_options != naive_read" in text(ran)
    assert stdout(ran).startswith("compared in 5 interleaved rounds")
    assert "num_threads=0, prefetch_buffer_size=0" in stdout(ran)
    assert "grain_ex" in text(cs[save]), "the results record exercise B's verdict"
