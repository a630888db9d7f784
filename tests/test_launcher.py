"""utils.launcher: one process per "host" on 127.0.0.1, bounded, and nothing left running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from utils import ROOT, checkpoints, launcher, tf_cluster
from utils.launcher import LaunchError, _failure_reason, launch


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
    code = (
        "import os; print('rank', '{process_id}', 'of', '{num_processes}', "
        "os.environ['COURSE_PROCESS_ID'], os.environ['COURSE_COORDINATOR'])"
    )
    result = launch(["-c", code], 3, timeout_s=60)
    assert result.ok, result.summary()
    assert "all 3 processes exited 0" in result.reason
    for w in result.workers:
        assert f"rank {w.process_id} of 3 {w.process_id} 127.0.0.1:{result.port}" in w.log
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
    # Ended because of the crash, not because the 60 s timeout ran out.
    assert result.first_failure_s is not None and result.first_failure_s < 60
    _assert_all_gone(result.pids)
    with pytest.raises(LaunchError, match="no_such_module_for_the_course"):
        result.raise_for_failure()


def test_failure_reason_names_every_process_seen_failing_and_stops_only_live_ones():
    # Two processes ended between the same two polls: both are named with their own exit.
    both = _failure_reason(
        [(0, 10, -signal.SIGABRT), (1, 11, -signal.SIGKILL)], 4.3, still_running=False
    )
    assert "process 0 (pid 10) was killed by SIGABRT" in both
    assert "process 1 (pid 11) was killed by SIGKILL" in both
    assert "stopping the others" not in both  # nothing was left running to stop
    one = _failure_reason([(1, 11, 1)], 2.0, still_running=True)
    assert one == "process 1 (pid 11) exited with code 1 after 2.0 s; stopping the others"
    assert "stopping" not in _failure_reason([(0, 10, 1)], 2.0, still_running=False)


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


def test_port_in_use_is_a_clear_error_and_none_picks_a_free_one():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {busy} on 127.0.0.1 is already in use"):
            launch(["-c", "pass"], 1, port=busy)
        assert not launcher.port_is_free(busy)
        result = launch(["-c", "print('{port}')"], 1, port=None, timeout_s=60)
        assert result.ok and result.port != busy
        assert result.workers[0].log.strip() == str(result.port)


def test_mismatched_process_counts_are_rejected():
    with pytest.raises(ValueError, match="got 3 commands for num_processes=2"):
        launch([["-c", "pass"]] * 3, 2)
    with pytest.raises(ValueError, match="num_processes"):
        launch(["-c", "pass"], 0)


@pytest.mark.parametrize("host", ["0.0.0.0", "localhost", "10.0.0.2", "::1"])
def test_only_loopback_addresses(host):
    with pytest.raises(ValueError, match="only 127.0.0.1"):
        launch(["-c", "pass"], 1, host=host)


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


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_and_latest(tmp_path):
    assert checkpoints.latest_checkpoint(tmp_path / "none") is None
    checkpoints.save_checkpoint(tmp_path, 3, {"w": np.arange(3.0)})
    checkpoints.save_checkpoint(tmp_path, 10, {"w": np.arange(4.0), "b": np.ones(2)})
    step, arrays = checkpoints.latest_checkpoint(tmp_path)
    assert step == 10
    np.testing.assert_array_equal(arrays["w"], np.arange(4.0))
    assert sorted(arrays) == ["b", "w"]


def test_failed_write_leaves_previous_checkpoint_and_no_temp(tmp_path, monkeypatch):
    checkpoints.save_checkpoint(tmp_path, 1, {"w": np.zeros(3)})

    def half_then_fail(f, **arrays):
        f.write(b"PK\x03\x04 partial")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(np, "savez", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        checkpoints.save_checkpoint(tmp_path, 2, {"w": np.ones(3)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000001.npz"]
    assert checkpoints.latest_checkpoint(tmp_path)[0] == 1


def test_kill_during_write_never_leaves_a_complete_looking_checkpoint(tmp_path):
    # A real SIGKILL halfway through np.savez: the temp file stays behind, but under a name
    # that latest_checkpoint never reads, and the previous checkpoint is still the latest.
    code = textwrap.dedent(
        f"""
        import os, numpy as np
        from utils import ROOT, checkpoints, launcher, tf_cluster
        checkpoints.save_checkpoint({str(tmp_path)!r}, 1, {{"w": np.zeros(1000)}})
        def killed_while_writing(f, **arrays):
            f.write(b"PK" + b"x" * 100_000); f.flush()
            os.kill(os.getpid(), 9)
        np.savez = killed_while_writing
        checkpoints.save_checkpoint({str(tmp_path)!r}, 2, {{"w": np.ones(1000)}})
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "ckpt-00000001.npz" in names and "ckpt-00000002.npz" not in names
    assert any(n.startswith(".tmp-ckpt-") for n in names), names
    step, arrays = checkpoints.latest_checkpoint(tmp_path)
    assert step == 1 and arrays["w"].sum() == 0


# ----------------------------------------------------------------------------- TF_CONFIG


def test_tf_config_round_trip():
    cfg = json.loads(tf_cluster.tf_config([2222, 3333], 1))
    assert cfg == {
        "cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:3333"]},
        "task": {"type": "worker", "index": 1},
    }
    assert tf_cluster.parse_tf_config(json.dumps(cfg)) == cfg


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        (None, "TF_CONFIG is not set"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"task": {"type": "worker", "index": 0}}, '"cluster"'),
        ({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}, '"cluster.worker"'),
        ({"cluster": {"worker": ["127.0.0.1"]}, "task": {}}, '"cluster.worker[0]"'),
        ({"cluster": {"worker": ["10.1.2.3:80"]}, "task": {}}, '"cluster.worker[0]"'),
        ({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:1"]}}, "lists an address twice"),
        ({"cluster": {"worker": ["127.0.0.1:1"]}}, '"task"'),
        (
            {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}},
            '"task.type"',
        ),
        (
            {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 1}},
            '"task.index" is 1',
        ),
        (
            {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": "0"}},
            '"task.index"',
        ),
    ],
)
def test_malformed_tf_config_names_the_field(cfg, field):
    text = cfg if cfg is None or isinstance(cfg, str) else json.dumps(cfg)
    with pytest.raises(LaunchError) as err:
        tf_cluster.parse_tf_config(text)
    assert field in str(err.value)


def test_a_reserved_port_is_kept_from_other_rehearsals():
    """Two rehearsals started side by side: the port one picked is never handed to the other
    before it is released (the OS could otherwise return it to a second bind(0))."""
    port = launcher.free_port()
    probe = (
        "import fcntl, sys\n"
        "from utils import launcher\n"
        f"f = open(launcher._port_lock_dir() / '{port}.lock', 'w')\n"
        "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
        "except OSError:\n    print('taken')\n"
    )

    def other_rehearsal_sees() -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    try:
        assert other_rehearsal_sees() == "taken"
        other = launcher.free_port()
        launcher.release_port(other)
        assert other != port
    finally:
        launcher.release_port(port)
    assert other_rehearsal_sees() == "free"
