"""Notebook 07 serves a free-TPU (JAX) learner first: Part 1 is the Grain / Keras-on-JAX path,
Part 2 the tf.data lab.

Framework-free: reads the stored notebook as JSON.

* The header gives the outline: Part 1 (sections 1-3 and Exercise A, Grain) before Part 2 (sections
  4-10 and Exercise B, tf.data), then the recap; section headings are numbered 1..10 in order.
* Exercise A (Grain) closes Part 1, with a placeholder the learner edits, a collapsed solution that
  applies only over the placeholder, a self-check whose messages come from the run's numbers
  (ignored by nbval) and a compared check that the solution's settings differ from the naive read's.
* Section 3 saves its script quietly (``%%save_script``) and runs it with KERAS_BACKEND=jax.
* Part 1 runs on its own: it uses no name defined only in Part 2.
"""

from __future__ import annotations

import ast
import builtins
import re

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, index, stdout, text

NB07 = NOTEBOOKS / "07_tf_data_performance.ipynb"
PART1 = "## Part 1 · The free-TPU path: Grain and Keras 3 on JAX"
PART2 = "## Part 2 · The tf.data lab"


def test_the_header_outlines_part_1_before_part_2_with_both_exercises() -> None:
    header = text(cells(NB07)[0])
    assert "**JAX learner's path.**" in header
    p1, p2 = header.index("**Part 1 · "), header.index("**Part 2 · ")
    assert p1 < header.index("**Exercise A**") < p2 < header.index("**Exercise B**")
    assert "skip" not in header.split("**JAX learner's path.**")[1].split("**Learning")[0], (
        "the outline replaces the old skip list"
    )


def test_parts_sections_and_exercises_come_in_order() -> None:
    cs = cells(NB07)
    order = [
        heading(cs, PART1),
        heading(cs, "## 1. The workload"),
        heading(cs, "## 2. The same pipeline in Grain"),
        heading(cs, "## 3. Grain feeding `model.fit` under Keras 3 on JAX"),
        heading(cs, "## Exercise A: a Grain pipeline that keeps up"),
        heading(cs, PART2),
        heading(cs, "## 4. "),
        heading(cs, "## Exercise B: beat the naive pipeline"),
        index(cs, lambda c: text(c).startswith("# @title Save this run's results")),
        heading(cs, "## Recap"),
    ]
    assert order == sorted(order), order
    numbers = [
        int(m.group(1))
        for c in cs
        if c["cell_type"] == "markdown"
        for m in re.finditer(r"^## (\d+)\. ", text(c), re.M)
    ]
    assert numbers == list(range(1, 11)), numbers
    prose = "\n".join(text(c) for c in cs if c["cell_type"] == "markdown")
    assert not re.search(r"\b[35]b\b", prose), "a stale section number (3b, 5b)"


def test_grain_exercise_closes_part_1_with_solution_and_checks() -> None:
    cs = cells(NB07)
    a = heading(cs, "## Exercise A: a Grain pipeline that keeps up")
    part2 = heading(cs, PART2)
    save = index(cs, lambda c: text(c).startswith("# @title Save this run's results"))
    block = cs[a:part2]
    assert any(text(c).startswith("ex_wl = bp.make_workload(") for c in block), "its own workload"
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
    assert "grain_ex" in text(cs[save]), "the results record the Grain exercise's verdict"


def test_section_3_trains_with_grain_and_keras_on_jax_in_a_fresh_process() -> None:
    """The free-TPU learner's training path: a visible script, saved quietly, run on JAX."""
    cs = cells(NB07)
    s3 = heading(cs, "## 3. Grain feeding `model.fit` under Keras 3 on JAX")
    ex_a = heading(cs, "## Exercise A:")
    assert "`%%writefile grain_keras_train.py` does the same" in text(cs[s3])
    block = cs[s3:ex_a]
    script = [c for c in block if text(c).startswith("%%save_script grain_keras_train.py\n")]
    assert len(script) == 1 and not hidden(script[0])
    assert script[0]["outputs"] == [], "the script cell prints nothing (no machine path)"
    k = next(i for i, c in enumerate(block) if c is script[0])
    register = [c for c in block[:k] if "register_save_script(" in text(c)]
    assert len(register) == 1 and not hidden(register[0])
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
    assert 'scripts / "grain_keras_train.py"' in text(runs[0])
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


def test_part_1_uses_no_name_defined_only_in_part_2() -> None:
    """The set-up, the parameters and Part 1 run on their own, top to bottom."""
    cs = cells(NB07)
    defined = set(dir(builtins)) | {"get_ipython"}
    part1 = [c for c in cs[: heading(cs, PART2)] if c["cell_type"] == "code"]
    assert any("%%save_script" in text(c) for c in part1)
    for cell in part1:
        source = text(cell)
        if source.startswith("%%"):
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


def test_exercise_b_solution_applies_only_over_the_placeholder() -> None:
    """Exercise B's collapsed solution must not overwrite a learner's own pipeline: it applies only
    while ``my_pipeline`` still holds the placeholder's one-file-after-another read."""
    cs = cells(NB07)
    b = heading(cs, "## Exercise B")
    block = cs[b:]
    attempt = [c for c in block if text(c).startswith("def my_pipeline(")]
    assert len(attempt) == 1 and not hidden(attempt[0])
    marker = "files.flat_map(read)  # one file after another"
    assert marker in text(attempt[0]), "the placeholder reads one file after another"
    solution = [c for c in block if text(c).startswith("# @title Solution")]
    assert len(solution) == 1 and hidden(solution[0])
    code = text(solution[0])
    assert f'"{marker}" in inspect.getsource(my_pipeline)' in code and "if untouched:" in code
    guard, definition = code.index("if untouched:"), code.index("def my_pipeline(")
    assert guard < definition, "the definition sits under the guard"
    assert "Solution applied" in stdout(solution[0]), "the stored run applied it"
