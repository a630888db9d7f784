"""Notebook 04 is the seed's TensorFlow notebook, one job: `TPUStrategy`, `tf.data`, the seed's code
as written and rewritten (the Keras 3 + JAX recipe is notebook 02's).

Framework-free: reads the stored notebook as JSON.

* No Keras-on-JAX part: no `%%save_script` script, no JAX import, no `## Part 1`.
* The learning rate follows notebook 09's rule (square root of the batch growth) and links to it;
  no rule of its own (`LR_SCALING`).
* The exercise's layout: ``tests/test_solutions.py``.
* The results cell is last and collapsed, after the recap.
"""

from __future__ import annotations

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, text

NB04 = NOTEBOOKS / "04_keras_cifar10_tpu.ipynb"


def _code(cs: list[dict]) -> list[dict]:
    return [c for c in cs if c["cell_type"] == "code"]


def test_one_job_tensorflow_only() -> None:
    cs = cells(NB04)
    code = "\n".join(text(c) for c in _code(cs))
    assert "%%save_script" not in code and "import jax" not in code and "KERAS_BACKEND" not in code
    assert not any(text(c).startswith("## Part") for c in cs if c["cell_type"] == "markdown")
    assert "strategy.scope()" in code and "pipelines.make_dataset" in code


def test_parameters_then_one_prepare_and_check() -> None:
    cs = cells(NB04)
    i = next(i for i, c in enumerate(cs) if "parameters" in c["metadata"].get("tags", []))
    assert "SHOW_SOLUTIONS = False" in text(cs[i]) and "LR_SCALING" not in text(cs[i])
    after = text(cs[i + 1])
    assert after.count("bootstrap.prepare(") == 1 and after.count("check_params(") == 1
    assert "SHOW_SOLUTIONS=(SHOW_SOLUTIONS, bool, False)" in after


def test_learning_rate_is_notebook_09s_rule() -> None:
    cs = cells(NB04)
    rule = "learning_rate = 1e-3 * (global_batch / 128) ** 0.5"  # the seed's 1e-3 at batch 128
    assert any(rule in text(c) for c in _code(cs))
    assert any("09_train_faster.ipynb" in text(c) for c in cs if c["cell_type"] == "markdown")
    assert not any("LR_SCALING" in text(c) or "linear" in text(c).lower() for c in _code(cs))


def test_results_last_after_the_recap() -> None:
    cs = cells(NB04)
    last = cs[-1]
    assert hidden(last) and text(last).count("results.record(") == 1
    assert heading(cs, "## Recap") == len(cs) - 2
