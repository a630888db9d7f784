"""Notebook 07 serves a free-TPU (JAX) learner first: Part 1 is Grain and Keras on JAX without
TensorFlow, Part 2 a tf.data tuning lab on the same records.

Framework-free: reads the stored notebook as JSON.

* Part 1 neither installs nor imports TensorFlow: its ``bootstrap.prepare`` asks for no
  TensorFlow and no Part 1 cell imports it; Part 2 starts with its own
  ``prepare(needs=["tensorflow"])``.
* Grain reads ArrayRecord shards with multiprocess prefetch; verdicts compare it with tf.data.
* Part 2's ladder is ``bp.LADDER``, each step judged against the one before; the tuned chain and
  the v5e line are printed from the measurements; every step is recorded.
* The exercise's layout: ``tests/test_solutions.py``.
* Part 1 runs on its own: it uses no name defined only in Part 2.
"""

from __future__ import annotations

import ast
import builtins

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, index, stdout, text

NB07 = NOTEBOOKS / "07_tf_data_performance.ipynb"
PART1 = "## Part 1 · Grain and Keras on JAX"
PART2 = "## Part 2 · `tf.data`, tuned one technique at a time"


def _tree(source: str) -> ast.Module:
    return ast.parse(
        "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("!", "%")))
    )


def _part1_code() -> list[dict]:
    cs = cells(NB07)
    return [c for c in cs[: heading(cs, PART2)] if c["cell_type"] == "code"]


def test_sections_come_in_order_and_results_last() -> None:
    cs = cells(NB07)
    order = [
        heading(cs, PART1),
        heading(cs, "## 1. Shards written without TensorFlow"),
        heading(cs, "## 2. Grain"),
        heading(cs, "## 3. Grain feeding `model.fit` on JAX"),
        heading(cs, "## Exercise"),
        heading(cs, "## Recap"),
        heading(cs, PART2),
        index(cs, lambda c: text(c).startswith("# @title Save this run's results")),
    ]
    assert order == sorted(order), order
    assert order[-1] == len(cs) - 1 and hidden(cs[-1]), "the collapsed results cell comes last"


def test_part_1_neither_installs_nor_imports_tensorflow() -> None:
    part1 = _part1_code()
    prepare = [c for c in part1 if "bootstrap.prepare(" in text(c)]
    assert len(prepare) == 1 and "tensorflow" not in text(prepare[0])
    for cell in part1:
        for node in ast.walk(_tree(text(cell))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(
                n.split(".")[0] == "tensorflow" or n.startswith("utils.tf") for n in names
            ), (names, text(cell)[:80])
            assert not (isinstance(node, ast.ImportFrom) and node.module == "utils.tf"), text(cell)[
                :80
            ]


def test_part_2_starts_with_its_own_tensorflow_prepare() -> None:
    cs = cells(NB07)
    first = next(c for c in cs[heading(cs, PART2) :] if c["cell_type"] == "code")
    assert text(first).startswith('bootstrap.prepare(needs=["tensorflow"])')


def test_grain_reads_array_record_with_worker_processes_and_meets_tf_data_by_verdicts() -> None:
    cs = cells(NB07)
    code = "\n".join(text(c) for c in cs if c["cell_type"] == "code")
    for piece in ("ArrayRecordWriter(", "grain.sources.ArrayRecordDataSource(", ".mp_prefetch(",
                  "grain.MultiprocessingOptions(num_workers=", "model.fit("):  # fmt: skip
        assert piece in code, piece
    part2 = "\n".join(text(c) for c in cs[heading(cs, PART2) :] if c["cell_type"] == "code")
    assert 'per_epoch("tf.data, tuned", with_tf)' in part2 and '"Grain, threads"' in part2
    assert ".verdict(" in part2 and ".sentence()" in part2, "verdicts in their own words"


def test_part_2_is_a_ladder_judged_step_by_step_and_against_the_chip() -> None:
    cs = cells(NB07)
    part2 = [c for c in cs[heading(cs, PART2) :] if c["cell_type"] == "code"]
    ladder = next(c for c in part2 if "bp.LADDER" in text(c) and "compare(" in text(c))
    assert "nbval-ignore-output" in ladder["metadata"]["tags"]
    assert "zip(names[1:], names" in text(ladder), "each step against the one before"
    assert "verdict = ladder.verdict(step, before)" in text(ladder)
    assert "print(verdict.sentence())" in text(ladder) and "bp.PAYS_WHEN[step]" in text(ladder)
    assert "against_v5e(" in text(ladder), "each step's rate against one v5e chip's need"
    tuned = next(c for c in part2 if text(c).startswith("def tuned_chain("))
    assert not hidden(tuned), "the tuned chain is a visible cell a learner copies"
    pieces = (
        ".interleave(",
        "num_parallel_calls=tf.data.AUTOTUNE",
        ".cache()",
        ".prefetch(tf.data.AUTOTUNE)",
        "tf.data.Options()",
        "deterministic = False",
    )
    for piece in pieces:
        assert piece in text(tuned), piece
    closing = "\n".join(text(c) for c in part2)
    assert "against_v5e(tuned)" in closing and "if tuned < need:" in closing
    assert 'ladder.metrics(pairs, prefix="ladder_")' in text(cs[-1]), "every step is recorded"
    demo = next(c for c in part2 if "decoded.map(bp.augment).cache()" in text(c))
    assert stdout(demo).splitlines() == [
        "cache after the augmentation: 2,048 of 2,048 images identical in epoch 2",
        "cache before the augmentation: 0 of 2,048 images identical in epoch 2",
    ]


def test_part_1_uses_no_name_defined_only_in_part_2() -> None:
    """The set-up, the parameters and Part 1 run on their own, top to bottom."""
    defined = set(dir(builtins)) | {"get_ipython"}
    for cell in _part1_code():
        tree = _tree(text(cell))
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
            elif isinstance(node, ast.comprehension):
                defined |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        used = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        assert used <= defined, (sorted(used - defined), text(cell)[:80])
