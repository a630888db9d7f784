"""tests.tools.platforms: verdicts from executed notebooks, the set-up replay, the table."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from tests.tools import platforms as pm
from utils import fresh_process


def _code(source: str, outputs=(), status: str | None = None) -> dict:
    meta = {"papermill": {"status": status}} if status else {}
    return {"cell_type": "code", "source": source, "outputs": list(outputs), "metadata": meta}


def test_first_error_names_the_code_cell_and_the_message():
    nb = {"cells": [
        {"cell_type": "markdown", "source": "# title", "metadata": {}},
        _code("a = 1"),
        _code("import tensorflow", [{"output_type": "error", "ename": "ModuleNotFoundError",
                                     "evalue": "\x1b[0;31mNo module named 'tensorflow'\x1b[0m"}]),
        _code("b = 2"),
    ]}  # fmt: skip
    assert pm.first_error(nb) == (
        "stops at code cell 2: ModuleNotFoundError: No module named 'tensorflow'"
    )
    assert pm.first_error({"cells": [_code("a = 1")]}) is None


def test_last_started_cell_is_where_a_timeout_hit():
    nb = {"cells": [_code("a", status="completed"), _code("b", status="running"), _code("c")]}
    assert pm.last_started_cell(nb) == 2


def test_gated_cells_count_device_gates_not_host_only_ones():
    nb = {"cells": [
        _code('if bootstrap.tf_runs_here(rt, "TPUStrategy training"):\n    fit()'),
        _code('if bootstrap.tf_runs_here(rt, "the pipeline", host_only=True):\n    bench()'),
        _code("x = 1"),
    ]}  # fmt: skip
    assert pm.gated_cells(nb) == 1


def _replay(tmp_path, monkeypatch, cells: list[dict]):
    """Replay a notebook of ``cells`` for Colab with this interpreter as the image's Python."""
    path = tmp_path / "99_fake.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    monkeypatch.setattr(pm, "venv_python", lambda platform: Path(sys.executable))
    return pm.replay_setup("colab", path)


def test_replay_records_the_prepare_calls_pip_installs_and_installs_nothing(tmp_path, monkeypatch):
    installs, error = _replay(tmp_path, monkeypatch, [
        {"cell_type": "markdown", "source": "objectives", "metadata": {}},
        _code("COURSE_REF = 'x'"),
        {**_code("NEEDS = ['no_such_module_here']"), "metadata": {"tags": ["parameters"]}},
        _code("rt = bootstrap.prepare(needs=NEEDS)\nprint(rt)"),
    ])  # fmt: skip
    assert installs == [["no_such_module_here"]]  # asked of pip on the Colab image, not installed
    assert error.startswith("ModuleNotFoundError: no_such_module_here still not importable")


def test_replay_runs_every_prepare_call_a_part_2_included(tmp_path, monkeypatch):
    """Planted: 05's and 07's Part 2 ask for TensorFlow in a second, bare prepare call."""
    installs, _ = _replay(tmp_path, monkeypatch, [
        {**_code("X = 1"), "metadata": {"tags": ["parameters"]}},
        _code("rt = bootstrap.prepare(needs=['json'])"),
        _code("!echo part 2\nbootstrap.prepare(needs=['no_such_part_two'])"),
    ])  # fmt: skip
    assert installs == [["no_such_part_two"]]


def test_the_json_has_a_verdict_per_notebook_and_platform(monkeypatch):
    monkeypatch.setattr(pm, "venv_python", lambda platform: Path("/nonexistent/python"))
    results = [
        pm.Result("01_x", "colab", "runs top to bottom", True, [["tensorflow-cpu==2.20.0"]],
                  ["tensorflow-cpu==2.20.0", "tensorboard==2.20.0"], 2, 120.0),
        pm.Result("01_x", "kaggle", "stops at code cell 3: E: a | b", False, seconds=60.0),
    ]  # fmt: skip
    when = datetime.datetime(2026, 12, 1, 4, 0, tzinfo=datetime.UTC)
    doc = json.loads(pm.matrix_json(results, when, "abc123 (with uncommitted changes)"))
    assert doc["date"] == "2026-12-01" and doc["commit"] == "abc123"
    colab = doc["platforms"]["colab"]["notebooks"]["01_x"]
    assert colab == {"ok": True, "verdict": "runs top to bottom", "gated": 2, "minutes": 2.0,
                     "installs": ["tensorflow-cpu==2.20.0"],
                     "added": ["tensorflow-cpu==2.20.0", "tensorboard==2.20.0"]}  # fmt: skip
    assert doc["platforms"]["kaggle"]["notebooks"]["01_x"]["ok"] is False


def test_a_hanging_notebook_times_out_and_leaves_no_process(tmp_path, monkeypatch):
    """run_notebook's child (papermill and its kernel) ends with its whole group at the timeout."""
    fake = tmp_path / "python"  # stands in for the platform's python -m papermill IN OUT ...
    fake.write_text(
        "#!/bin/sh\n"
        'printf \'%s\' "$NB" > "$4"\n'  # papermill writes the notebook cell by cell
        "sleep 300 &\n"  # the kernel: a grandchild
        'echo $! > "$PIDFILE"\n'
        "wait\n"
    )
    fake.chmod(0o755)
    nb = {"cells": [_code("a", status="completed"), _code("b", status="running"), _code("c")]}
    monkeypatch.setenv("NB", json.dumps(nb))
    monkeypatch.setenv("PIDFILE", str(tmp_path / "kernel.pid"))
    monkeypatch.setattr(pm, "venv_python", lambda platform: fake)
    monkeypatch.setattr(pm, "BUILD", tmp_path / "build")
    verdict = pm.run_notebook("colab", tmp_path / "01_x.ipynb", None, timeout=10)
    assert verdict == "timed out after 10 s in code cell 2"
    kernel = int((tmp_path / "kernel.pid").read_text())
    assert not fresh_process.pid_alive(kernel), "the kernel outlived the timeout"
