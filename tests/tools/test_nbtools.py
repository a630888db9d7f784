"""utils.tools.nbtools: metadata stripping, the one-place repository name, notebook conventions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from utils import COURSE_REPO
from utils.tools import nbtools

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def test_strip_papermill_removes_run_metadata_only():
    nb = {
        "metadata": {"papermill": {"duration": 1.0}, "kernelspec": {"name": "python3"}},
        "cells": [{"metadata": {"papermill": {}, "execution": {}, "tags": ["parameters"]}}],
    }
    nbtools.strip_papermill(nb)
    assert nb["metadata"] == {"kernelspec": {"name": "python3"}}
    assert nb["cells"][0]["metadata"] == {"tags": ["parameters"]}


def test_every_file_names_the_same_repository():
    assert nbtools.current_repo() == COURSE_REPO
    assert nbtools.check_repo() == []


def test_set_repo_rewrites_every_file_and_rejects_bad_names(tmp_path, monkeypatch):
    copy = tmp_path / "course"
    for name in ("README.md", "CONTRIBUTING.md", "utils/__init__.py"):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, copy / name)
    (copy / "notebooks").mkdir()
    for nb in NOTEBOOKS:
        shutil.copy(nb, copy / "notebooks" / nb.name)
    monkeypatch.setattr(nbtools, "ROOT", copy)
    monkeypatch.setattr(nbtools, "NOTEBOOKS", copy / "notebooks")

    with pytest.raises(ValueError, match="owner/name"):
        nbtools.set_repo("not a repo")
    changed = nbtools.set_repo("someone/fork-of-course")
    assert copy / "utils" / "__init__.py" in changed
    assert nbtools.current_repo() == "someone/fork-of-course"
    assert nbtools.check_repo() == []
    for path in nbtools.repo_files():
        assert COURSE_REPO not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_course_conventions(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    first = "".join(cells[0]["source"])
    assert cells[0]["cell_type"] == "markdown" and "objectives" in first.lower()
    setup = "".join(code[0]["source"])
    assert f'COURSE_REPO = "{COURSE_REPO}"' in setup and "bootstrap.prepare(" in setup
    assert any("parameters" in c["metadata"].get("tags", []) for c in code)
    assert (
        "recap" in "".join(cells[-1]["source"]).lower()
        or "recap" in "".join(cells[-2]["source"]).lower()
    )
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "not one clean top-to-bottom run"
    assert not any(o["output_type"] == "error" for c in code for o in c["outputs"])
    assert "papermill" not in nb["metadata"]
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


def test_committed_notebooks_store_sources_as_lists_of_lines() -> None:
    """A one-string source turns every one-line edit into a whole-cell diff."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            source = cell["source"]
            assert isinstance(source, list), f"{path.name} cell {i}: source is one string"
            assert all(line.count("\n") <= 1 for line in source), f"{path.name} cell {i}"


def test_canonical_splits_one_string_sources() -> None:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": "a = 1\nb = 2\n",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "x\ny\n"}],
            }
        ]
    }
    out = nbtools.canonical(nb)
    assert out["cells"][0]["source"] == ["a = 1\n", "b = 2\n"]
    assert out["cells"][0]["outputs"][0]["text"] == ["x\n", "y\n"]
