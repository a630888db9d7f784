"""Reading a stored notebook in tests: its cells, a cell's text and printed output, and whether
it is collapsed (harness). One copy for every notebook-structure test."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from utils.tools.nbtools import is_collapsed

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

__all__ = ["NOTEBOOKS", "cells", "heading", "hidden", "index", "stdout", "text"]


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def stdout(cell: dict) -> str:
    return "".join(
        "".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout"
    )


hidden = is_collapsed  # a check, a solution, the set-up: collapsed in Colab and Jupyter


def index(cs: list[dict], predicate: Callable[[dict], bool]) -> int:
    return next(i for i, c in enumerate(cs) if predicate(c))


def heading(cs: list[dict], start: str) -> int:
    return index(cs, lambda c: c["cell_type"] == "markdown" and text(c).startswith(start))
