"""Notebook 05's collapsed checks can fail: each runs, as stored, on a namespace that holds what
the cells before it would have bound, once as a good run leaves it (the check passes) and once
with one thing wrong (the check must raise). A weakened condition (``== 1`` made ``>= 1``) lets
the wrong run through and fails here. Framework-free: the stand-ins are plain Python.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.nbcells import NOTEBOOKS, cells, text

NB05 = NOTEBOOKS / "05_custom_training_loop.ipynb"


def _check(title: str) -> str:
    found = [text(c) for c in cells(NB05) if text(c).startswith(f"# @title Check: {title}")]
    assert len(found) == 1, title
    return found[0]


class _Log:
    def __init__(self, programs: int) -> None:
        self.programs, self.events = programs, ["multi_step"] * programs

    def count(self, name: str) -> int:
        return self.programs if name == "multi_step" else 0


def _part_1(**wrong: object) -> dict:
    return {"epoch_losses": [2.2, 1.8], "compile_log": _Log(1)} | wrong


def _part_2(**wrong: object) -> dict:
    ns = {
        "loop": SimpleNamespace(trace_count=1),
        "optimizer": SimpleNamespace(iterations=SimpleNamespace(numpy=lambda: 3 * 32)),
        "epochs": 3,
        "steps_per_epoch": 32,
        "history": [(2.0, 0.2), (1.5, 0.4)],
        "test_acc": 0.4,
        "cifar": SimpleNamespace(class_names=[str(i) for i in range(10)]),
    }
    return ns | wrong


CASES = {
    "one program": ("the loss fell, and a fixed k compiled one program", _part_1, "compile_log"),
    "one trace": ("one trace, every step ran", _part_2, "loop"),
}
WRONG = {
    "one program": [_Log(2), _Log(0)],
    "one trace": [SimpleNamespace(trace_count=2), SimpleNamespace(trace_count=0)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_check_passes_a_good_run_and_fails_a_second_compile(case: str) -> None:
    title, namespace, name = CASES[case]
    source = _check(title)
    exec(source, namespace())  # noqa: S102  (a good run: no error)
    for wrong in WRONG[case]:
        with pytest.raises(AssertionError):
            exec(source, namespace(**{name: wrong}))  # noqa: S102


def test_the_part_2_check_also_fails_a_loss_that_rose() -> None:
    with pytest.raises(AssertionError, match="did not go down"):
        exec(_check("one trace, every step ran"), _part_2(history=[(1.0, 0.2), (1.5, 0.4)]))  # noqa: S102
