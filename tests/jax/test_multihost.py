"""Notebook 08 and its worker modules (utils.jax.multihost_worker, _keras, _allreduce).

What the jobs do (two processes agreeing with one, per-host files covering the epoch once, a
killed host and a preemption notice resumed bit-exact from Orbax, a peer that never starts, no
process left running) is asserted by 08's own check cells, which nbval runs in `make test`.
These tests check the notebook's text against the modules it runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from utils import ROOT

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_beyond_one_host.ipynb"


def test_notebook_runs_the_worker_module_and_links_it():
    """Notebook 08 runs utils/jax/multihost_worker.py itself (no copy to drift) and links it."""
    if not NOTEBOOK.exists():
        pytest.skip("notebook 08 not present")
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert '"-m", "utils.jax.multihost_worker"' in code and "%%writefile" not in code
    prose = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "(../utils/jax/multihost_worker.py)" in prose


def test_notebook_says_who_may_skip_it_and_stores_its_exercise_unsolved():
    """The header's first paragraph says who needs 08; the exercise's solution applies only with
    SHOW_SOLUTIONS, and the stored check says what is missing without a pass."""
    if not NOTEBOOK.exists():
        pytest.skip("notebook 08 not present")
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    header = "".join(cells[0]["source"]).split("\n\n")
    assert header[1].startswith("**Optional:**") and "skip it" in header[1]
    texts = ["".join(c["source"]) for c in cells]
    solution = next(t for t in texts if t.startswith("# @title Solution"))
    assert solution.splitlines()[1] == "if SHOW_SOLUTIONS:"
    check = next(c for c in cells if "".join(c["source"]).startswith("# @title Check the exercise"))
    printed = "".join("".join(o.get("text", "")) for o in check.get("outputs", []))
    assert printed.startswith("Exercise: not done yet:") and "passed" not in printed
    assert "assert not (SHOW_SOLUTIONS and problems)" in "".join(check["source"])


def test_the_excerpt_before_the_worker_quotes_the_worker():
    """Section 3's excerpt of the multi-host lines: each line is a line of the worker."""
    if not NOTEBOOK.exists():
        pytest.skip("notebook 08 not present")
    source = (ROOT / "utils" / "jax" / "multihost_worker.py").read_text()
    worker = {line.strip() for line in source.splitlines()}
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    text = next(
        "".join(c["source"]) for c in cells if "".join(c["source"]).startswith("## 3. The worker")
    )
    excerpt = text.split("```python\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(excerpt) >= 8, excerpt
    missing = [line for line in excerpt if line.strip() not in worker]
    assert not missing, f"not lines of utils/jax/multihost_worker.py: {missing}"


def test_notebook_outputs_hold_no_machine_path():
    """Stored outputs of notebook 08 name no absolute path (its scratch folder is a temp dir)."""
    if not NOTEBOOK.exists():
        pytest.skip("notebook 08 not present")
    absolute = re.compile(r"(?:^|[\s'\"(=:])/[A-Za-z_.][\w.-]*/[\w.-]")
    for i, cell in enumerate(json.loads(NOTEBOOK.read_text())["cells"]):
        for out in cell.get("outputs", []):
            texts = [out.get("text", "")] + [out.get("data", {}).get("text/plain", "")]
            for text in texts:
                text = "".join(text) if isinstance(text, list) else text
                assert not absolute.search(text), (i, absolute.search(text).group(0))
