"""Notebook 07 serves a JAX learner too: a Grain exercise beside the tf.data one.

Framework-free: reads the stored notebook as JSON.

* The header names the JAX learner's path and both exercises.
* Exercise B (Grain) sits after Exercise A, before the results are saved, with a placeholder the
  learner edits, a collapsed solution that applies only over the placeholder, a self-check whose
  messages come from the run's numbers (ignored by nbval) and a compared check that the solution's
  settings differ from the naive read's.
"""

from __future__ import annotations

import ast
import builtins

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


def test_section_5b_trains_with_grain_and_keras_on_jax_in_a_fresh_process() -> None:
    """The free-TPU learner's training path: a visible script, run with KERAS_BACKEND=jax."""
    cs = cells(NB07)
    header = text(cs[0])
    assert "**5b" in header and "skip reading" in header, "the header points the JAX learner to 5b"
    s5b = heading(cs, "## 5b. ")
    s6 = heading(cs, "## 6. ")
    recap = heading(cs, "## Recap")
    s5 = index(cs, lambda c: c["cell_type"] == "markdown" and "\n## 5. " in text(c))
    assert s5 < s5b < s6 < recap
    block = cs[s5b:s6]
    script = [c for c in block if text(c).startswith("%%writefile ")]
    assert len(script) == 1 and not hidden(script[0])
    src = text(script[0])
    for piece in (
        "import grain",
        "model.fit(",
        'os.environ.setdefault("KERAS_BACKEND", "jax")',
        "devices[0].platform",
        "input_wait_share",
        "RESULT ",
    ):
        assert piece in src, piece
    runs = [c for c in block if "fresh_process.run_python(" in text(c)]
    assert len(runs) == 1 and not hidden(runs[0])
    assert '"KERAS_BACKEND": "jax"' in text(runs[0])
    assert text(runs[0]).startswith("# NBVAL_IGNORE_OUTPUT"), (
        "the child's lines depend on the machine"
    )
    checks = [c for c in block if text(c).startswith("# @title Check")]
    assert len(checks) == 1 and hidden(checks[0])
    check = text(checks[0])
    assert "NBVAL_IGNORE_OUTPUT" not in check
    assert (
        'train_result["platform"] == "tpu"' in check and 'train_result["backend"] == "jax"' in check
    )
    assert stdout(checks[0]).startswith("model.fit on Grain batches under Keras on JAX:")


def _jax_path(cs: list[dict]) -> list[dict]:
    """The cells the header's JAX learner's path runs, in order."""

    def at(start: str) -> int:
        return index(cs, lambda c: c["cell_type"] == "markdown" and f"\n{start}" in "\n" + text(c))

    def code(a: int, b: int) -> list[dict]:
        return [c for c in cs[a:b] if c["cell_type"] == "code"]

    save = index(cs, lambda c: text(c).startswith("# @title Save this run's results"))
    return (
        code(0, at("## 1. "))
        + code(at("## 2. "), at("## 3. "))[:1]
        + code(at("## 3b. "), at("## 4. "))
        + code(at("## 5b. "), at("## 6. "))
        + code(at("## Exercise A:"), at("## Exercise B:"))[:1]
        + code(at("## Exercise B:"), save)
    )


def test_the_jax_path_uses_no_name_from_the_cells_it_skips() -> None:
    """Set-up, section 2's workload cell, 3b, 5b, ex_wl and Exercise B run on their own."""
    header = text(cells(NB07)[0])
    for part in (
        "section 2's first code cell",
        "**section 3b**",
        "**5b**",
        "Exercise A's first code cell",
    ):
        assert part in header, part
    defined = set(dir(builtins)) | {"get_ipython"}
    for cell in _jax_path(cells(NB07)):
        source = text(cell)
        if source.startswith("%%writefile"):
            continue  # a file's text, run in another process
        tree = ast.parse(
            "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("!", "%")))
        )
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.add(node.name)
                defined |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.Lambda):
                defined |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            elif isinstance(node, ast.ExceptHandler) and node.name:
                defined.add(node.name)
        used = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        assert used <= defined, (sorted(used - defined), source[:80])
