"""Tests for utils.tools.run_course on tiny fixture notebooks (not the course's).

The fixtures use the ``python3`` kernel, which ipykernel provides for the Python running pytest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
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
    [
        (["--epochs", "2"], "unknown parameter arguments"),
        (["-y", "[1, 2]"], "not a YAML mapping"),
        (["-p", "EPOCHS"], "expected 2 arguments"),
    ],
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
    # 02_fails declares no parameters, so none are injected: the raise is the 4th cell, In [3].
    assert "FAILED  cell 4 (In [3]): ValueError: boom from the fixture" in progress[1]
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
    # The kernels' own stderr goes to a log per notebook, not the screen. Each notebook gets only
    # the parameters it declares (papermill would warn "Passed unknown parameter" otherwise).
    assert (out_dir / "02_fails.log").exists()
    assert "REPEAT goes to 01_passes only" in proc.stdout
    assert "Passed unknown parameter" not in proc.stderr + (out_dir / "02_fails.log").read_text()
    assert "time limit: 1800 s per cell" in proc.stdout

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


# --------------------------------------------------------------------------------------------
# Hangs, Ctrl-C, names of parameters, unwritable folders (issue 16)
# --------------------------------------------------------------------------------------------


def _notebook(path: Path, *sources: str, parameters: str = "MARKER = ''") -> Path:
    """A fixture notebook: a parameters cell, then ``sources`` as code cells (python3 kernel)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params] + [nbformat.v4.new_code_cell(src) for src in sources]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# The kernel writes its pid, so the test can check that it does not outlive the run.
WRITE_PID = "import os, pathlib\npathlib.Path(MARKER).write_text(str(os.getpid()))"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


@pytest.fixture
def kernel_pids() -> Iterator[list[int]]:
    """Kernel pids a test saw; any still running at the end is killed (and fails the test)."""
    pids: list[int] = []
    yield pids
    survivors = []
    for pid in pids:
        deadline = time.monotonic() + 60  # a killed kernel can take seconds to go when busy
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            survivors.append(pid)
            os.kill(pid, signal.SIGKILL)
    assert not survivors, f"kernels outlived the run: {survivors}"


def _run_cmd(tmp_path: Path, notebooks: Path, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "utils.tools.run_course", "--kernel", "python3"]
    cmd += ["--notebooks-dir", str(notebooks), "--out-dir", str(tmp_path / "build")]
    return [*cmd, "--results-dir", str(tmp_path / "results"), *extra]


def test_a_cell_past_the_time_limit_fails_its_notebook_and_the_rest_run(
    tmp_path: Path, kernel_pids: list[int]
) -> None:
    """Before: no limit reachable from make, a hanging cell blocked the batch forever."""
    nbs = tmp_path / "nbs"
    marker = tmp_path / "kernel.pid"
    _notebook(nbs / "01_hangs.ipynb", WRITE_PID, "import time\ntime.sleep(600)", "print('never')")
    _notebook(nbs / "02_after.ipynb", "print('still ran')")
    # 10 s per cell: the quick cells before it finish well within that on a loaded machine.
    cmd = _run_cmd(tmp_path, nbs, "--timeout", "10", "--", "-p", "MARKER", str(marker))
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    finally:
        if marker.exists():
            kernel_pids.append(int(marker.read_text()))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    progress = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert "FAILED  timed out: cell 3 ran longer than the 10 s limit per cell" in progress[0]
    assert progress[1].startswith("[2/2] 02_after") and progress[1].endswith("ok")
    executed = nbformat.read(tmp_path / "build" / "01_hangs.ipynb", as_version=4)
    assert executed.metadata.papermill.status == "timed out"
    assert "TIMED OUT" in executed.cells[0].source
    assert kernel_pids, "the fixture kernel did not start"


def test_make_run_passes_the_timeout() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "TIMEOUT ?= 1800" in makefile and "--timeout $(TIMEOUT)" in makefile
    assert run_course.build_parser().parse_args([]).timeout == run_course.DEFAULT_CELL_TIMEOUT_S
    with pytest.raises(SystemExit):
        run_course.build_parser().parse_args(["--timeout", "-1"])


@pytest.mark.parametrize(
    ("signum", "how"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")]
)
def test_ctrl_c_marks_the_executed_copy_interrupted(
    tmp_path: Path, kernel_pids: list[int], signum: int, how: str
) -> None:
    """Before: the executed copy claimed completion (no exception, 0.0 s in the summary)."""
    nbs = tmp_path / "nbs"
    marker = tmp_path / "kernel.pid"
    in_cell = tmp_path / "kernel.pid.sleeping"  # written by the kernel as it enters the cell
    sleeping = "import pathlib, time\npathlib.Path(MARKER + '.sleeping').touch()\ntime.sleep(600)"
    _notebook(nbs / "01_slow.ipynb", WRITE_PID, sleeping, "print('never')")
    _notebook(nbs / "02_never.ipynb", "print('never')")
    cmd = _run_cmd(tmp_path, nbs, "--", "-p", "MARKER", str(marker))
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # Events, not sleeps: the kernel wrote its pid, then entered the sleeping cell.
        deadline = time.monotonic() + 240
        while not in_cell.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if marker.exists():
            kernel_pids.append(int(marker.read_text()))
        assert in_cell.exists(), "the kernel did not reach the sleeping cell within 240 s"
        proc.send_signal(signum)
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run_course had not exited 300 s after {how} (it stops the kernel)")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == 130, out + err
    assert f"INTERRUPTED  interrupted ({how}) during cell 3" in out
    assert "Not run: 02_never" in out
    assert "0 ok, 0 failed, 1 interrupted: the run stopped" in out
    executed = nbformat.read(tmp_path / "build" / "01_slow.ipynb", as_version=4)
    assert executed.metadata.papermill.status == "interrupted"
    assert executed.metadata.papermill.exception is True
    assert executed.cells[0].source.startswith(f"**INTERRUPTED: interrupted ({how})")
    assert not (tmp_path / "build" / "02_never.ipynb").exists()


def test_unknown_parameter_name_is_an_error_naming_the_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Before: -p REPEATS 2 was a warning in the log file and the run used the defaults."""
    base = ["--notebooks-dir", str(NOTEBOOKS), "--out-dir", str(tmp_path / "b")]
    assert run_course.main([*base, "--", "-p", "REPEATS", "2"]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter REPEATS: no selected notebook declares it" in err
    assert "Did you mean: REPEATS -> REPEAT?" in err
    assert "01_passes: GREETING, REPEAT; 02_fails: (no parameters)" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()  # nothing ran


def test_parameter_names_split_per_notebook() -> None:
    declared = {"a": ["EPOCHS", "X"], "b": ["EPOCHS"], "c": []}
    split, problem = run_course.check_parameter_names({"EPOCHS": 2, "X": 1}, declared)
    assert problem is None
    assert split == {"a": {"EPOCHS": 2, "X": 1}, "b": {"EPOCHS": 2}, "c": {}}
    _, problem = run_course.check_parameter_names({"EPOCH": 2, "Y": 1}, declared)
    assert problem is not None and problem.startswith("unknown parameters EPOCH, Y")


@pytest.mark.parametrize("which", ["--out-dir", "--results-dir"])
def test_unwritable_folders_are_usage_errors_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture, which: str
) -> None:
    """Before: a raw traceback (--out-dir) or a failure in each notebook's last cell (results)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    dirs = {"--out-dir": str(tmp_path / "out"), "--results-dir": str(tmp_path / "res")}
    dirs[which] = str(blocker / "sub")  # cannot be created, even by root
    args = ["--kernel", "python3", "--notebooks-dir", str(NOTEBOOKS), "--only", "01"]
    args += [x for kv in dirs.items() for x in kv]
    assert run_course.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("run_course: cannot write to the ") and str(blocker / "sub") in err
    assert "choose another folder" in err and len(err.splitlines()) == 1
    assert not list((tmp_path / "out").glob("*.ipynb")) if (tmp_path / "out").exists() else True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-y", "A: [1"], "not valid YAML"),
        (["-f", "/nonexistent/params.yaml"], "cannot read parameters file"),
    ],
)
def test_bad_yaml_is_a_one_line_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    base = ["--notebooks-dir", str(NOTEBOOKS), "--out-dir", str(tmp_path)]
    assert run_course.main([*base, "--", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_mark_unfinished_is_idempotent(tmp_path: Path) -> None:
    path = _notebook(tmp_path / "x.ipynb", "print(1)")
    run_course.mark_unfinished(path, "interrupted", "first")
    run_course.mark_unfinished(path, "interrupted", "second")
    nb = nbformat.read(path, as_version=4)
    assert [c.source for c in nb.cells[:1]] == ["**INTERRUPTED: second**"]
    assert len(nb.cells) == 3
    run_course.mark_unfinished(tmp_path / "missing.ipynb", "interrupted", "x")  # no error
