"""Rehearse a multi-host job on one machine: one process per "host", over 127.0.0.1 only.

On a pod slice the same program starts on every host (``gcloud ... ssh --worker=all``), each
process learns its rank and the coordinator's address, and the job is only as healthy as its
slowest host: one that dies leaves the others blocked in a collective. :func:`launch` plays
``--worker=all`` here: it picks a free loopback port for the coordinator, starts the processes
with :mod:`utils.fresh_process` (each in its own process group, its output in its own log, killed
with the launcher), and stops the whole job when one fails, when all succeed, or at a timeout.
Each process finds ``COURSE_PROCESS_ID``, ``COURSE_NUM_PROCESSES`` and ``COURSE_COORDINATOR``
in its environment (read by ``utils.jax.multihost_env``). Framework-free.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from utils import fresh_process
from utils.fresh_process import pid_alive

__all__ = ["JobResult", "LaunchError", "WorkerResult", "free_port", "launch", "pid_alive"]
LOOPBACK = "127.0.0.1"


class LaunchError(RuntimeError):
    """A job did not finish cleanly; the message says which process and why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS says is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@dataclass
class WorkerResult:
    """One process of a job: its rank, pid, exit code (negative: killed by that signal)."""

    process_id: int
    pid: int
    returncode: int | None
    log: str
    stopped_by_launcher: bool = False

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.rstrip().splitlines()[-lines:])


@dataclass
class JobResult:
    """What :func:`launch` saw. ``ok`` only if every process exited 0 in time."""

    ok: bool
    reason: str
    port: int
    workers: list[WorkerResult]
    elapsed_s: float

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    def summary(self, log_lines: int = 8) -> str:
        """The reason, then each failed or stopped process's last log lines."""
        parts = [self.reason]
        for w in (w for w in self.workers if w.returncode != 0):
            state = "stopped by the launcher" if w.stopped_by_launcher else f"exit {w.returncode}"
            parts += [
                f"--- process {w.process_id} ({state}), last lines of its log:",
                w.tail(log_lines),
            ]
        return "\n".join(parts)

    def raise_for_failure(self) -> JobResult:
        if not self.ok:
            raise LaunchError(self.summary())
        return self


def _exit(rank: int, proc: subprocess.Popen[str]) -> str:
    code = proc.returncode
    how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
    return f"process {rank} (pid {proc.pid}) {how}"


def _supervise(procs: list[subprocess.Popen[str]], t0: float, timeout_s: float) -> str:
    """Poll until every process exited 0, one failed, or the timeout; the reason in words."""
    n = len(procs)
    while True:
        ended = [(r, p) for r, p in enumerate(procs) if p.poll() is not None]
        failed = [_exit(r, p) for r, p in ended if p.returncode != 0]
        others = "; stopping the others" if len(ended) < n else ""
        if failed:
            return f"{'; '.join(failed)} after {time.monotonic() - t0:.1f} s{others}"
        if len(ended) == n:
            return f"all {n} processes exited 0" if n > 1 else "the one process exited 0"
        if time.monotonic() > t0 + timeout_s:
            waiting = [r for r, p in enumerate(procs) if p.poll() is None]
            return (
                f"job ran past its {timeout_s:g} s timeout; processes {waiting} were still running "
                "(a peer that never started or died blocks the others in a collective)"
            )
        time.sleep(0.05)


# The coordination service failed to bind its port: another program took it after free_port().
PORT_TAKEN = "Failed to add port to server"


def launch(
    commands: Sequence[str] | Sequence[Sequence[str]],
    num_processes: int,
    *,
    timeout_s: float = 120.0,
    grace_s: float = 3.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    port_tries: int = 3,
) -> JobResult:
    """Run ``num_processes`` Python processes on 127.0.0.1 until the job ends; never raises for
    a failed job (check ``ok``, or call ``raise_for_failure()``).

    ``commands``: this interpreter's arguments for every process (``["-u", "worker.py"]``), or a
    list of one such command per process. The job ends when all exit 0, when one fails (the
    others are stopped at once: they would block in their next collective), or after
    ``timeout_s``. Stopping is SIGTERM, then SIGKILL after ``grace_s``, to every process group.
    The coordinator binds 127.0.0.1 only; if another program took its port first, the job starts
    again on a new port (at most ``port_tries`` times in all).
    """
    if not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes must be an int >= 1, got {num_processes!r}")
    argvs = [list(commands)] * num_processes if isinstance(commands[0], str) else commands
    if len(argvs) != num_processes:
        raise ValueError(f"got {len(argvs)} commands for num_processes={num_processes}")
    for _ in range(max(1, port_tries)):
        job = _launch_once(argvs, free_port(), timeout_s, grace_s, env, cwd)
        if job.ok or PORT_TAKEN not in job.workers[0].log:
            break
    return job


def _launch_once(argvs, port, timeout_s, grace_s, env, cwd) -> JobResult:
    """One try of :func:`launch` with the coordinator on ``port``."""
    address = f"{LOOPBACK}:{port}"
    shared = {"COURSE_NUM_PROCESSES": str(len(argvs)), "PYTHONUNBUFFERED": "1"}
    shared.update(env or {}, COURSE_COORDINATOR=address, JAX_COORDINATOR_BIND_ADDRESS=address)
    logs = [tempfile.TemporaryFile("w+", errors="replace") for _ in argvs]
    procs: list[subprocess.Popen[str]] = []
    t0 = time.monotonic()
    try:
        for rank, argv in enumerate(argvs):
            rank_env = fresh_process.child_env({**shared, "COURSE_PROCESS_ID": str(rank)})
            out = {"stdout": logs[rank], "stderr": subprocess.STDOUT, "die_with_parent": True}
            procs.append(fresh_process.spawn([sys.executable, *argv], env=rank_env, cwd=cwd, **out))
        reason = _supervise(procs, t0, timeout_s)
    finally:  # also on Ctrl-C or an error: nothing outlives the call
        live = {p.pid for p in procs if p.poll() is None}
        fresh_process.stop(*procs, grace_s=grace_s)
    workers = []
    for rank, (p, log) in enumerate(zip(procs, logs, strict=True)):
        log.seek(0)
        workers.append(WorkerResult(rank, p.pid, p.returncode, log.read(), p.pid in live))
        log.close()
    ok = all(w.returncode == 0 for w in workers)
    return JobResult(ok, reason, port, workers, time.monotonic() - t0)
