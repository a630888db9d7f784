"""utils.fresh_process: results come back, failures say why."""

from __future__ import annotations

import os
import sys

import pytest

from utils import ROOT, fresh_process


def test_result_comes_back_and_utils_is_importable():
    code = (
        "import json, utils; print('noise'); print('RESULT ' + json.dumps([utils.COURSE_REPO, 2]))"
    )
    assert fresh_process.run_python_json(code) == [fresh_process_repo(), 2]


def fresh_process_repo() -> str:
    from utils import COURSE_REPO

    return COURSE_REPO


def test_environment_reaches_the_child():
    code = "import json, os; print('RESULT ' + json.dumps(os.environ['COURSE_PROBE']))"
    assert fresh_process.run_python_json(code, env={"COURSE_PROBE": "x1"}) == "x1"


def test_failure_carries_the_child_error():
    with pytest.raises(fresh_process.FreshProcessError, match="ZeroDivisionError"):
        fresh_process.run_python(["-c", "1/0"])


def test_missing_result_line_is_an_error():
    with pytest.raises(fresh_process.FreshProcessError, match="RESULT"):
        fresh_process.run_python_json("print('nothing useful')")


def test_timeout_is_bounded():
    with pytest.raises(fresh_process.FreshProcessError, match="ran past .* its output so far"):
        fresh_process.run_python(["-c", "import time; time.sleep(60)"], timeout_s=0.5)


def test_run_child_reports_a_timeout_without_raising():
    # 20 s: long enough for a loaded machine to start Python and print; the print is the event.
    done = fresh_process.run_child(
        [sys.executable, "-c", "print('hi', flush=True); import time; time.sleep(60)"],
        timeout_s=20,
    )
    assert done.timed_out and done.returncode is None and "hi" in done.stdout


def test_child_env_puts_the_course_first_on_the_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = fresh_process.child_env({"COURSE_PROBE": "1"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]
    assert env["COURSE_PROBE"] == "1"


def test_timeout_kills_grandchildren_and_does_not_hang(tmp_path):
    """Before: the grandchild kept the output pipe open, so the wait after the kill hung until
    it ended (here 60 s), and it outlived the call."""
    import os
    import threading

    pid_file = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            # 15 s: the child must have started its grandchild before the kill, also when
            # Python takes seconds to start on a loaded machine.
            fresh_process.run_python(["-c", code], timeout_s=15)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout=120)  # the 15 s timeout, then the kill: never near 120 s unless it hangs
    grandchild = int(pid_file.read_text()) if pid_file.exists() else None
    try:
        assert not worker.is_alive(), "run_python had not returned 120 s after its 15 s timeout"
        assert outcome and isinstance(outcome[0], fresh_process.FreshProcessError)
        assert grandchild is not None, "the child never wrote its grandchild's pid (15 s)"
        assert not _alive(grandchild), "the grandchild outlived run_python"
    finally:
        if grandchild is not None and _alive(grandchild):
            os.kill(grandchild, 9)


def test_a_normal_run_leaves_no_background_process(tmp_path):
    import os

    pid_file = tmp_path / "bg.pid"
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
    )
    fresh_process.run_python(["-c", code], timeout_s=60)
    pid = int(pid_file.read_text())
    try:
        assert not _alive(pid)
    finally:
        if _alive(pid):
            os.kill(pid, 9)


def _alive(pid: int) -> bool:
    import os
    import time
    from pathlib import Path

    deadline = time.monotonic() + 60  # a killed process can take seconds to go on a busy machine
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"):
            return False  # exited, waiting to be reaped by init
        time.sleep(0.2)
    return True
