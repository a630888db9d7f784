"""pytest --nbval settings for the course notebooks.

Framework libraries write warnings to stderr that change between releases and machines, so
stderr is not compared (stdout, results and plots' text are). See shared notes on nbval.

Exercises are stored unsolved (``SHOW_SOLUTIONS = False``). Right after a notebook's exercise check
cell, one more item runs in the same kernel: ``SHOW_SOLUTIONS = True``, then the cells from the
collapsed solution to the check again; it fails unless the check then says the exercise passed.
So one nbval run compares the stored outputs and proves the solutions work.
"""

from __future__ import annotations

from collections import defaultdict

import nbformat
from nbval.plugin import IPyNbCell

from tests.nbcells import EXERCISE_NOT_DONE, EXERCISE_PASSED, stdout, text


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)


#: Seconds nbval waits for a cell's next output message after the kernel's reply (nbval's own is 5).
#: The outputs travel on another channel than the reply, and on a loaded 2-core machine (two nbval
#: shards side by side, or a run beside another job) a plot's output has come later than 5 s.
#: A cell that finishes normally is not slowed: reading stops at the kernel's "idle".
OUTPUT_TIMEOUT_S = 120


class SolvedExercise(IPyNbCell):
    """The exercise's cells again with SHOW_SOLUTIONS = True; fails unless the check passes."""

    def runtest(self):
        super().runtest()
        printed = "".join(
            o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
            for o in self.test_outputs
        )
        if not EXERCISE_PASSED.search(printed) or EXERCISE_NOT_DONE.search(printed):
            self.raise_cell_error("With SHOW_SOLUTIONS = True the check did not pass", printed)


def exercise_span(code_cells: list[dict]) -> tuple[int, int] | None:
    """First and last index of the exercise's solution cell ... check cell, or None if none."""
    sources = [text(c) for c in code_cells]
    start = next((i for i, t in enumerate(sources) if t.startswith("# @title Solution")), None)
    if start is None:
        return None
    checks = (
        i for i in range(start, len(code_cells)) if EXERCISE_NOT_DONE.search(stdout(code_cells[i]))
    )
    end = next(checks, None)
    return None if end is None else (start, end)


def _with_solved_exercises(items: list) -> list:
    """``items`` with a SolvedExercise after each notebook's exercise check cell."""
    solved_after: dict[int, SolvedExercise] = {}  # id of the check cell's item -> its solved run
    for parent in dict.fromkeys(i.parent for i in items if isinstance(i, IPyNbCell)):
        mine = [i for i in items if isinstance(i, IPyNbCell) and i.parent is parent]
        span = exercise_span([i.cell for i in mine])
        if span is None:
            continue
        cells = [i.cell.source for i in mine[span[0] : span[1] + 1]]
        check = mine[span[1]]
        solved_after[id(check)] = SolvedExercise.from_parent(
            parent,
            name=f"{check.name} solved",
            cell_num=check.cell_num,
            cell=nbformat.v4.new_code_cell(
                "\n".join(["SHOW_SOLUTIONS = True", *cells, "SHOW_SOLUTIONS = False"])
            ),
            options=defaultdict(bool, check=False),
        )
    return [x for i in items for x in (i, solved_after.get(id(i))) if x is not None]


def pytest_collection_modifyitems(items):
    items[:] = _with_solved_exercises(items)
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = max(item.output_timeout, OUTPUT_TIMEOUT_S)
