"""Exercises are stored unsolved and their solutions work (issue 35, item 4).

Every notebook has a ``SHOW_SOLUTIONS = False`` parameter. The stored run (False) never reports a
passed exercise, and its check says what is still missing. That the solutions pass is checked by
nbval itself: ``notebooks/conftest.py`` runs each exercise again with ``SHOW_SOLUTIONS = True``
right after its check cell (``tests/test_nbval_conftest.py`` tests that item).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.nbcells import EXERCISE_NOT_DONE, EXERCISE_PASSED, NOTEBOOKS, cells, hidden, text
from tests.test_lean import outputs

NBS = sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))


def _parameters(path: Path) -> str:
    return next(text(c) for c in cells(path) if "parameters" in c["metadata"].get("tags", []))


@pytest.mark.parametrize("path", NBS, ids=lambda p: p.stem[:2])
def test_exercises_are_stored_unsolved(path: Path) -> None:
    assert re.search(r"^SHOW_SOLUTIONS = False\b", _parameters(path), re.M), path.name
    stored = "\n".join(outputs(c) for c in cells(path) if c["cell_type"] == "code")
    assert not EXERCISE_PASSED.search(stored), f"{path.name}: a stored output reports a pass"
    assert EXERCISE_NOT_DONE.search(stored), f"{path.name}: the check should say what is missing"


@pytest.mark.parametrize("path", NBS, ids=lambda p: p.stem[:2])
def test_each_solution_is_collapsed_and_applies_only_when_asked(path: Path) -> None:
    """The one solution cell is collapsed and does nothing unless ``SHOW_SOLUTIONS`` is set."""
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    solutions = [c for c in code if text(c).startswith("# @title Solution")]
    assert len(solutions) == 1 and hidden(solutions[0]), path.name
    assert text(solutions[0]).splitlines()[1].startswith("if SHOW_SOLUTIONS"), path.name
    checks = [c for c in code if EXERCISE_NOT_DONE.search(outputs(c))]
    assert checks, f"{path.name}: no stored check says what is missing"
    tags = [t for c in checks for t in c["metadata"].get("tags", [])]
    assert "nbval-ignore-output" not in tags, f"{path.name}: nbval compares the check's output"
