"""utils.launcher: one process per "host" on 127.0.0.1, bounded, and nothing left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from utils import ROOT, launcher
from utils.launcher import LaunchError, launch


def _assert_all_gone(pids, within_s=60.0):
    """Every pid ends (or is a zombie) within ``within_s``: a killed process on a loaded machine
    takes a moment to be torn down, so this waits for the event instead of looking once."""
    deadline = time.monotonic() + within_s
    while (still := [p for p in pids if launcher.pid_alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not still, f"processes still running {within_s:g} s after the job ended: {still}"


def _pids_in_logs(result, tag="CHILD"):
    return [
        int(line.split()[1])
        for w in result.workers
        for line in w.log.splitlines()
        if line.startswith(tag + " ")
    ]


def test_all_processes_succeed_and_see_their_rank():
    names = ("PROCESS_ID", "NUM_PROCESSES", "COORDINATOR")
    code = f"import os; print('rank', *(os.environ['COURSE_' + k] for k in {names}))"
    result = launch(["-c", code], 3, timeout_s=60)
    assert result.ok, result.summary()
    assert "all 3 processes exited 0" in result.reason
    for w in result.workers:
        assert f"rank {w.process_id} 3 127.0.0.1:{result.port}" in w.log
    _assert_all_gone(result.pids)


def test_a_single_process_job_is_reported_in_the_singular():
    result = launch(["-c", "pass"], 1, timeout_s=60)
    assert result.ok, result.summary()
    assert result.reason == "the one process exited 0"
    _assert_all_gone(result.pids)


def test_worker_crashing_at_import_ends_the_job_and_shows_its_log():
    commands = [
        ["-c", "import time; time.sleep(60)"],
        ["-c", "import no_such_module_for_the_course"],
    ]
    result = launch(commands, 2, timeout_s=60)
    assert not result.ok
    assert "process 1" in result.reason and "exited with code 1" in result.reason
    assert "stopping the others" in result.reason
    assert "ModuleNotFoundError" in result.summary()
    assert result.workers[0].stopped_by_launcher
    assert result.elapsed_s < 60  # ended by the crash, not by the 60 s timeout
    _assert_all_gone(result.pids)
    with pytest.raises(LaunchError, match="no_such_module_for_the_course"):
        result.raise_for_failure()


def test_timeout_kills_every_process_and_its_children():
    # Each worker starts a grandchild and ignores SIGTERM: the launcher must still leave nothing.
    code = textwrap.dedent(
        """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        print("CHILD", child.pid, flush=True)
        time.sleep(120)
        """
    )
    # 15 s: both workers must have started their grandchild before the timeout, also when
    # Python takes seconds to start on a loaded machine.
    result = launch(["-c", code], 2, timeout_s=15, grace_s=0.5)
    assert not result.ok
    assert "ran past its 15 s timeout" in result.reason
    grandchildren = _pids_in_logs(result)
    assert len(grandchildren) == 2, (
        f"not every worker started its grandchild in 15 s: {result.summary()}"
    )
    assert all(w.stopped_by_launcher for w in result.workers)
    assert all(w.returncode == -signal.SIGKILL for w in result.workers)
    _assert_all_gone(result.pids + grandchildren)


def test_sigkilled_worker_is_reported_by_signal_name():
    commands = [["-c", "import time; time.sleep(60)"], ["-c", "import os; os.kill(os.getpid(), 9)"]]
    result = launch(commands, 2, timeout_s=60)
    assert not result.ok
    assert "process 1" in result.reason and "SIGKILL" in result.reason
    _assert_all_gone(result.pids)


def test_mismatched_process_counts_are_rejected():
    with pytest.raises(ValueError, match="got 3 commands for num_processes=2"):
        launch([["-c", "pass"]] * 3, 2)
    with pytest.raises(ValueError, match="num_processes"):
        launch(["-c", "pass"], 0)


def test_workers_die_with_a_killed_launcher():
    # The launcher's own process is SIGKILLed (no atexit, no finally): its workers must follow.
    code = textwrap.dedent(
        """
        from utils.launcher import launch
        launch(["-c", "import os, time; print('WORKER', os.getpid(), flush=True); time.sleep(120)"],
               2, timeout_s=120)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        workers = []
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = [
                int(p)
                for p in os.listdir("/proc")
                if p.isdigit() and _parent_of(int(p)) == parent.pid and _is_worker(int(p))
            ]
        assert len(workers) == 2, "the launcher did not start its two workers"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=60)
        _assert_all_gone(workers)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait(timeout=10)


def test_interpreter_exit_kills_what_a_job_left_running(tmp_path):
    """The exit hook: the launcher's thread never reaches its cleanup (the interpreter exits
    under it), the workers die with their parent thread, and the grandchild they started, which
    nothing else would stop, is killed with its process group at interpreter exit."""
    pid_file = tmp_path / "grandchild.pid"
    worker = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        f"open({str(pid_file)!r} + '.tmp', 'w').write(str(p.pid)); "
        f"__import__('os').replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); "
        "time.sleep(120)"
    )
    code = textwrap.dedent(
        f"""
        import pathlib, threading, time
        from utils.launcher import launch
        threading.Thread(target=launch, args=(["-c", {worker!r}], 1),
                         kwargs={{"timeout_s": 120}}, daemon=True).start()
        deadline = time.monotonic() + 120
        while not pathlib.Path({str(pid_file)!r}).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=180,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert pid_file.exists(), "the worker never started its grandchild (waited 120 s)"
    grandchild = int(pid_file.read_text())
    try:
        _assert_all_gone([grandchild])
    finally:
        if launcher.pid_alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def _is_worker(pid: int) -> bool:  # exec'd already (not between fork and exec)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"WORKER" in f.read()
    except OSError:
        return False


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_a_taken_coordinator_port_starts_the_job_again_on_another(tmp_path):
    """Another program can take the port between free_port() and the coordinator's bind (seen
    in 08: process 0 logged the bind failure and died of SIGSEGV). The job restarts on a new
    port, and every process is told to bind 127.0.0.1 only."""
    marker = tmp_path / "first-port"
    code = textwrap.dedent(f"""
        import os, pathlib, sys
        rank, address = os.environ["COURSE_PROCESS_ID"], os.environ["COURSE_COORDINATOR"]
        assert os.environ["JAX_COORDINATOR_BIND_ADDRESS"] == address, address
        marker = pathlib.Path({str(marker)!r})
        if rank == "0" and not marker.exists():
            marker.write_text(address)
            print("E0000 add_port.cc:83] {launcher.PORT_TAKEN}: No address added")
            sys.exit(-11 % 256)
        print("rank", rank, address)
    """)
    result = launch(["-c", code], 2, timeout_s=60)
    assert result.ok, result.summary()
    first = marker.read_text()
    assert all(f"rank {w.process_id} 127.0.0.1:{result.port}" in w.log for w in result.workers)
    assert first != f"127.0.0.1:{result.port}"
    failing = launch(["-c", "import sys; print('no port'); sys.exit(3)"], 2, timeout_s=60)
    assert not failing.ok and "exited with code 3" in failing.reason  # other failures: one try
