"""Notebook 09 keeps the shape a learner relies on (issues 35 and 36).

Framework-free: reads the stored notebook as JSON.

* Each rung's lever is asserted: compiles after the first step, the batch knee and Adam's
  square-root rule, Keras' K launches against the scan's one program, bytes per step.
* The scanned loop a learner copies is the one ``utils.jax.ladder_bench`` holds, and the one
  09 runs: ``tests/test_shown_functions.py``.
* Measurement cells are tagged ``nbval-ignore-output`` and followed by a check cell.
* The exercise's layout: ``tests/test_solutions.py``.
* The results cell comes last, collapsed, after the recap (budgets: ``tests/test_lean.py``).
"""

from __future__ import annotations

from tests.nbcells import (
    NOTEBOOKS,
    cells,
    heading,
    hidden,
    index,
    text,
)

NB09 = NOTEBOOKS / "09_train_faster.ipynb"
IGNORE = "nbval-ignore-output"


def _code(cs: list[dict]) -> list[dict]:
    return [c for c in cs if c["cell_type"] == "code"]


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def test_each_lever_is_asserted() -> None:
    source = "\n".join(text(c) for c in _code(cells(NB09)))
    for needed in (
        "assert new_compiles[static_spec.name] == 0",  # static shapes: 0 compiles after warm-up
        "assert knee in batches",  # the sweep's knee
        "(knee / BATCH) ** 0.5",  # Adam's square-root rule
        "assert calls == 1 and launches in (1, STEPS)",  # Keras: K programs, or one (keras#23527)
        'log.count("program") == 1',  # the scan: one program per K steps
        'sent["float32"] == 4 * sent["uint8"]',  # uint8: 4x fewer bytes
        'result.rate("Grain alone")',  # the input's delivered rate
        "<= 1",  # no MFU above 100 %
    ):
        assert needed in source, needed


def test_measurements_are_tagged_and_followed_by_a_check() -> None:
    cs = _code(cells(NB09))
    for i, c in enumerate(cs):
        assert "NBVAL_" not in text(c), "a cell tag, not a comment"
        if IGNORE in _tags(c) and "compare.compare(" in text(c) and "@title" not in text(c):
            after = cs[i + 1]
            assert IGNORE not in _tags(after) and "assert " in text(after), text(c)[:80]


def test_one_figure_with_the_ladder_and_its_v5e_band() -> None:
    cs = cells(NB09)
    figure = [c for c in cs if "ladder.plot_ladder(" in text(c)]
    assert len(figure) == 1
    assert any("image/png" in o.get("data", {}) for o in figure[0]["outputs"]), "no stored figure"
    assert "plot_bands" not in "".join(text(c) for c in cs)


def test_results_are_recorded_last_after_the_recap() -> None:
    """(Budgets and banned phrases: tests/test_lean.py, for every notebook.)"""
    cs = cells(NB09)
    recap = heading(cs, "## Recap")
    assert index(cs, lambda c: "results.record(" in text(c)) == len(cs) - 1
    assert hidden(cs[-1]) and "**result.metrics(pairs)" in text(cs[-1]) and recap < len(cs) - 1


def test_grain_alone_times_its_steady_rate_in_bounded_rounds_on_a_cpu_and_a_v5e() -> None:
    """The notebook's own ``alone = ...`` line, with the CPU branch's sizes (1,100 images, knee
    64) and a TPU's (50,000 images, any knee of the sweep): every round draws at least 64 chunks
    (far past Grain's prefetch buffer, whose drain measured 125,000-512,000 images/s where the
    steady rate was 20,000) and at most one pass over the images plus those 64 chunks."""
    import ast

    line = next(
        ln for c in _code(cells(NB09)) for ln in text(c).splitlines() if ln.startswith("alone =")
    )
    expr = compile(ast.Expression(ast.parse(line).body[0].value), "<09>", "eval")
    for images, knees in ((1_100, (64, 128)), (50_000, (128, 256, 512, 1024, 2048))):
        for knee in knees:
            steps = min(4, images // knee)
            whole = images // (knee * steps) * knee * steps
            alone = eval(expr, {"max": max, "whole": whole, "knee": knee, "steps": steps})  # noqa: S307
            assert alone >= 64 and alone * knee * steps <= whole + 64 * knee * steps, (images, knee)
