"""Tests for utils.tools.run_course on tiny fixture notebooks (not the course's).

The fixtures use the ``python3`` kernel, which ipykernel provides for the Python running pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from utils import results
from utils.tools import run_course

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = Path(__file__).parents[1] / "fixtures" / "notebooks"


def test_find_notebooks_in_order_and_by_prefix_or_path() -> None:
    names = [nb.name for nb in run_course.find_notebooks(NOTEBOOKS)]
    assert names == ["01_passes.ipynb", "02_fails.ipynb", "03_records.ipynb"]
    assert [nb.name for nb in run_course.find_notebooks(NOTEBOOKS, "02")] == ["02_fails.ipynb"]
    path = NOTEBOOKS / "03_records.ipynb"
    assert run_course.find_notebooks(NOTEBOOKS, str(path)) == [path]
    assert run_course.find_notebooks(NOTEBOOKS, "99") == []


def test_parse_parameters_like_papermill(tmp_path: Path) -> None:
    yaml_file = tmp_path / "params.yaml"
    yaml_file.write_text("EPOCHS: 5\nNAME: from-file\nLR: 0.1\n")
    params = run_course.parse_parameters(
        ["-f", str(yaml_file), "-y", "NAME: from-yaml", "-p", "EPOCHS", "2", "-p", "FAST", "True"]
        + ["-p", "LR", "1e-3", "-p", "SIZE", "None", "-r", "TAG", "007", "-p", "WORD", "hi"]
    )
    assert params == {
        "EPOCHS": 2,
        "NAME": "from-yaml",
        "LR": 0.001,
        "FAST": True,
        "SIZE": None,
        "TAG": "007",
        "WORD": "hi",
    }
    assert run_course.parse_parameters([]) == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--epochs", "2"], "unknown parameter arguments"), (["-y", "[1, 2]"], "not a YAML mapping")],
)
def test_parse_parameters_rejects(args: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_course.parse_parameters(args)


def test_failing_notebook_is_reported_and_the_rest_still_runs(tmp_path: Path) -> None:
    out_dir = tmp_path / "build"
    cmd = [sys.executable, "-m", "utils.tools.run_course", "--kernel", "python3"]
    cmd += ["--notebooks-dir", str(NOTEBOOKS), "--out-dir", str(out_dir)]
    cmd += ["--results-dir", str(tmp_path / "results")]
    cmd += ["--", "-p", "REPEAT", "2", "-r", "GREETING", "42"]
    (tmp_path / "results").mkdir()
    stale = tmp_path / "results" / "02_fails.json"
    stale.write_text("{}")  # from an earlier run: must not survive the failed run
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)

    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    progress = [line for line in lines if line.startswith("[")]
    assert len(progress) == 3
    assert progress[0].startswith("[1/3] 01_passes") and progress[0].endswith("ok")
    assert progress[1].startswith("[2/3] 02_fails")
    # The parameters cell papermill injects is not counted: the raise is the 4th source cell.
    assert "FAILED  cell 4 (In [4]): ValueError: boom from the fixture" in progress[1]
    assert progress[2].startswith("[3/3] 03_records") and progress[2].endswith("ok")
    assert lines[-1].startswith("3 notebooks: 2 ok, 1 failed")

    # Executed copies go to --out-dir; the parameters reached the kernel with papermill's types.
    assert sorted(p.name for p in out_dir.glob("*.ipynb")) == [
        "01_passes.ipynb",
        "02_fails.ipynb",
        "03_records.ipynb",
    ]
    first = nbformat.read(out_dir / "01_passes.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in first.cells for o in c.get("outputs", []))
    assert printed == "'42' x 2: 4242\n"
    assert not list(NOTEBOOKS.glob("*.ipynb.*")), "the sources must stay untouched"

    # The kernels inherit --results-dir: the last notebook's record() landed there.
    # The kernels' own stderr and papermill's warnings go to a log per notebook, not the screen.
    assert "Passed unknown parameter: REPEAT" in (out_dir / "02_fails.log").read_text()
    assert "Passed unknown parameter" not in proc.stderr

    assert not stale.exists()
    recorded = results.load(tmp_path / "results" / "03_records.json")
    assert recorded.metrics == {"answer": results.Metric(42.0, "x")}


def test_only_one_notebook(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # main() sets these for the kernels; monkeypatch restores them after the test.
    for name, value in {**run_course.QUIET_ENV, "COURSE_RESULTS_DIR": "unused"}.items():
        monkeypatch.setenv(name, os.environ.get(name, value))
    out_dir, results_dir = tmp_path / "build", tmp_path / "results"
    args = ["--kernel", "python3", "--notebooks-dir", str(NOTEBOOKS), "--out-dir", str(out_dir)]
    assert run_course.main([*args, "--results-dir", str(results_dir), "--only", "03"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] 03_records" in out and "1 notebook: 1 ok, 0 failed" in out
    assert sorted(p.name for p in out_dir.iterdir()) == ["03_records.ipynb", "03_records.log"]
    assert [p.name for p in results_dir.iterdir()] == ["03_records.json"]


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = ["--notebooks-dir", str(NOTEBOOKS), "--out-dir", str(tmp_path)]
    assert run_course.main([*base, "--only", "99"]) == 2
    assert "no notebook matches '99'" in capsys.readouterr().err
    assert run_course.main([*base, "--kernel", "no-such-kernel-here"]) == 2
    assert "no Jupyter kernel named 'no-such-kernel-here'" in capsys.readouterr().err
    assert run_course.main([*base, "--", "-x"]) == 2
    assert "bad parameters" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing ran


def test_summary_table_lists_every_notebook() -> None:
    table = run_course.summary_table(
        [
            run_course.Outcome("01_a", 1.25, True),
            run_course.Outcome("02_bb", 75.0, False, "cell 3 (In [2]): KeyError: 'x'"),
        ]
    )
    assert table.splitlines() == [
        "notebook        time  status",
        "--------  ----------  ------",
        "01_a           1.2 s  ok",
        "02_bb     1 min 15 s  FAILED  cell 3 (In [2]): KeyError: 'x'",
        "2 notebooks: 1 ok, 1 failed, 1 min 16 s",
    ]
