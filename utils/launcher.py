"""Rehearse a multi-host job on one machine: one process per "host", over 127.0.0.1 only.

On a TPU pod slice the same program starts on every host (``gcloud ... ssh --worker=all``),
each process learns its rank and the coordinator's address, and the job is only as healthy
as its slowest host: if one never starts or dies, the others block in a collective. This
module plays the role of ``--worker=all`` on one machine, with the safety a notebook needs:

- :func:`free_port` picks a free loopback port for the coordinator (an explicit port that is
  already taken is a clear :class:`LaunchError`, not a hang);
- :func:`launch` starts ``num_processes`` commands, each in its own process group, with its
  output in its own log; it stops the whole job when one process fails, when all succeed,
  or after ``timeout_s``, and kills every process group it started (no orphans, also on
  interpreter exit or a parent that dies);
- a JAX worker reads the values below with :func:`utils.jax.multihost_env.launcher_args`.

Children are started and stopped by :mod:`utils.fresh_process` (the course's one runner).
Checkpoints live in :mod:`utils.checkpoints`, ``TF_CONFIG`` in :mod:`utils.tf_config`.

Each command is a list of strings formatted with ``{process_id}``, ``{num_processes}``,
``{port}`` and ``{coordinator}``; the same values are in the environment as
``COURSE_PROCESS_ID``, ``COURSE_NUM_PROCESSES``, ``COURSE_COORDINATOR``. Framework-free.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils import fresh_process
from utils.fresh_process import pid_alive

LOOPBACK = "127.0.0.1"
__all__ = [
    "JobResult",
    "LaunchError",
    "WorkerResult",
    "free_port",
    "launch",
    "pid_alive",
]


class LaunchError(RuntimeError):
    """A job could not start or did not finish cleanly; the message says which process and why."""


# ----------------------------------------------------------------------------- ports


def check_loopback(host: str) -> str:
    """Return ``host`` if it is 127.0.0.1; otherwise raise :class:`ValueError`.

    The course rehearses multi-host jobs on one machine and never listens on or contacts any
    other address (a coordinator bound to 0.0.0.0 would be reachable from the network).
    """
    if host != LOOPBACK:
        raise ValueError(
            f"only {LOOPBACK} is allowed for a rehearsal on one machine, got {host!r}; "
            "on a real pod slice the coordinator is worker 0's internal address, set by the "
            "TPU runtime, not by this launcher"
        )
    return host


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True if a TCP socket can bind ``host:port`` now."""
    check_loopback(host)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


# Ports this process reserved: port -> the open lock file that keeps other rehearsals off it.
_RESERVED: dict[int, Any] = {}


def _port_lock_dir() -> Path:
    folder = Path(tempfile.gettempdir()) / f"course-ports-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host``, free now and reserved for this process until :func:`release_port`.

    The OS picks a free port; a lock file (``flock``) then keeps every other rehearsal on this
    machine from picking the same one in the moment between choosing it and a coordinator
    binding it, so two jobs started side by side cannot collide. The lock ends with this process.
    """
    check_loopback(host)
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port in _RESERVED:
            continue
        lock = open(_port_lock_dir() / f"{port}.lock", "w")  # noqa: SIM115 (kept open: the lock)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another rehearsal holds it
            lock.close()
            continue
        _RESERVED[port] = lock
        return port
    raise LaunchError("found no free loopback port in 100 tries")


def release_port(port: int) -> None:
    """Let other rehearsals pick ``port`` again (no-op for a port this process did not reserve)."""
    lock = _RESERVED.pop(port, None)
    if lock is not None:
        lock.close()


def resolve_port(port: int | None, host: str = LOOPBACK) -> int:
    """``port`` if given and free, a fresh free port if ``None``; a clear error otherwise."""
    if port is None:
        return free_port(host)
    if not 1024 <= int(port) <= 65535:
        raise ValueError(f"port must be in 1024..65535, got {port}")
    if not port_is_free(port, host):
        raise LaunchError(
            f"port {port} on {host} is already in use (another job still running, or another "
            "program): pass port=None to pick a free one, or stop whatever holds it "
            f"(e.g. `ss -ltnp | grep :{port}`)"
        )
    return int(port)


# ----------------------------------------------------------------------------- processes


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
    first_failure_s: float | None = None  # when the launcher saw the first failure
    stop_s: float | None = None  # how long stopping the others took after that
    pids: list[int] = field(default_factory=list)

    def summary(self, log_lines: int = 8) -> str:
        """The reason, then each failed or stopped process's last log lines."""
        parts = [self.reason]
        for w in self.workers:
            if w.returncode != 0:
                state = (
                    "stopped by the launcher" if w.stopped_by_launcher else f"exit {w.returncode}"
                )
                parts.append(f"--- process {w.process_id} ({state}), last lines of its log:")
                parts.append(w.tail(log_lines) or "(empty log)")
        return "\n".join(parts)

    def raise_for_failure(self) -> JobResult:
        if not self.ok:
            raise LaunchError(self.summary())
        return self


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _failure_reason(
    failed: Sequence[tuple[int, int, int]], seen_s: float, *, still_running: bool
) -> str:
    """The reason when the launcher sees ``failed`` = [(rank, pid, exit code), ...] at one poll.

    Every failed process is named with its own exit; several seen at the same poll are listed
    together (their order between two polls is unknown). "stopping the others" only when some
    process is still running.
    """
    exits = "; ".join(f"process {r} (pid {pid}) {_describe_exit(code)}" for r, pid, code in failed)
    when = f"seen {seen_s:.1f} s into the job" if len(failed) > 1 else f"after {seen_s:.1f} s"
    if len(failed) > 1:
        when += ", at the same check, so which ended first is not known"
    others = "; stopping the others" if still_running else ""
    return f"{exits} ({when}){others}" if len(failed) > 1 else f"{exits} {when}{others}"


def launch(
    commands: Sequence[str] | Sequence[Sequence[str]] | Callable[[int], Sequence[str]],
    num_processes: int,
    *,
    port: int | None = None,
    host: str = LOOPBACK,
    timeout_s: float = 120.0,
    grace_s: float = 3.0,
    poll_s: float = 0.05,
    env: Mapping[str, str] | None = None,
    env_for_rank: Callable[[int], Mapping[str, str]] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    python: bool = True,
) -> JobResult:
    """Start ``num_processes`` processes on ``host`` and supervise them until the job ends.

    ``commands``: one command for every process (``["-u", "worker.py", "{process_id}"]``), a
    list of ``num_processes`` commands, or a function ``rank -> command``. With ``python=True``
    (default) commands are arguments to this interpreter. The job ends when every process has
    exited 0 (``ok``), when one exits non-zero (the others are stopped at once: a peer of a
    dead host would block in its next collective), or after ``timeout_s`` (all stopped).
    Stopping is SIGTERM to each process group, then SIGKILL after ``grace_s``; the bound on
    the whole call is therefore ``timeout_s + grace_s`` plus start-up. Never raises for a
    failed job: check ``result.ok`` or call ``result.raise_for_failure()``.
    """
    check_loopback(host)
    if not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes must be an int >= 1, got {num_processes!r}")
    if timeout_s <= 0 or grace_s < 0 or poll_s <= 0:
        raise ValueError("timeout_s and poll_s must be > 0 and grace_s >= 0")
    argvs = _commands_per_rank(commands, num_processes)
    port = resolve_port(port, host)
    coordinator = f"{host}:{port}"

    log_dir = Path(tempfile.mkdtemp(prefix="course-launch-"))
    job = _Job(num_processes, time.monotonic())
    base_env = {"COURSE_NUM_PROCESSES": str(num_processes), "COURSE_COORDINATOR": coordinator}
    base_env.update(env or {})
    try:
        job.start(argvs, coordinator, log_dir, base_env, env_for_rank, cwd, python)
        job.supervise(timeout_s, poll_s)
    except BaseException:
        job.reason = job.reason or "the launcher was interrupted; stopped every process"
        raise
    finally:
        job.stop_all(grace_s)
        release_port(port)
    workers = [
        job.worker(rank, p, log_dir / f"process-{rank}.log") for rank, p in enumerate(job.procs)
    ]
    for path in log_dir.iterdir():
        path.unlink()
    log_dir.rmdir()
    return JobResult(
        ok=len(workers) == num_processes and all(w.returncode == 0 for w in workers),
        reason=job.reason,
        port=port,
        workers=workers,
        elapsed_s=time.monotonic() - job.t0,
        first_failure_s=job.first_failure,
        stop_s=job.stop_s,
        pids=[p.pid for p in job.procs],
    )


@dataclass
class _Job:
    """The launcher's bookkeeping for one job (see :func:`launch`)."""

    num_processes: int
    t0: float
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    ended: dict[int, float] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)
    reason: str = ""
    first_failure: float | None = None
    stop_s: float | None = None

    def fail(self, reason: str) -> None:
        self.reason = reason
        self.first_failure = time.monotonic() - self.t0

    def start(
        self,
        argvs: list[list[str]],
        coordinator: str,
        log_dir: Path,
        env: Mapping[str, str],
        env_for_rank: Callable[[int], Mapping[str, str]] | None,
        cwd: str | os.PathLike[str] | None,
        python: bool,
    ) -> None:
        """Spawn one process per rank, each logging to ``log_dir/process-<rank>.log``."""
        port = coordinator.rpartition(":")[2]
        for rank, argv in enumerate(argvs):
            values = {"process_id": rank, "num_processes": self.num_processes}
            values.update(port=port, coordinator=coordinator)
            args = [str(a).format(**values) for a in argv]
            rank_env = {"COURSE_PROCESS_ID": str(rank), **env}
            rank_env.update(env_for_rank(rank) if env_for_rank else {})
            rank_env["PYTHONUNBUFFERED"] = "1"
            with open(log_dir / f"process-{rank}.log", "wb") as log:
                try:
                    self.procs.append(
                        fresh_process.spawn(
                            [sys.executable, *args] if python else args,
                            env=fresh_process.child_env(rank_env),
                            cwd=cwd,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            die_with_parent=True,  # a killed launcher takes its job with it
                        )
                    )
                except OSError as exc:
                    self.fail(f"process {rank} could not be started: {exc}")
                    return

    def supervise(self, timeout_s: float, poll_s: float) -> None:
        """Poll until every process exited 0, one failed, or ``timeout_s`` passed."""
        n = self.num_processes
        while not self.reason:
            now = time.monotonic()
            failed = []  # every failure this poll saw: several can end between two polls
            for rank, proc in enumerate(self.procs):
                if rank not in self.ended and proc.poll() is not None:
                    self.ended[rank] = now - self.t0
                    if proc.returncode != 0:
                        failed.append((rank, proc.pid, proc.returncode))
            if failed:
                self.fail(_failure_reason(failed, now - self.t0, still_running=len(self.ended) < n))
            if not self.reason and len(self.ended) == n:
                self.reason = f"all {n} processes exited 0" if n > 1 else "the one process exited 0"
            elif not self.reason and now >= self.t0 + timeout_s:
                waiting = [r for r in range(n) if r not in self.ended]
                self.fail(
                    f"job ran past its {timeout_s:g} s timeout; processes {waiting} were still "
                    "running (a peer that never started or died blocks the others in a "
                    "collective); stopped them all"
                )
            elif not self.reason:
                time.sleep(poll_s)

    def stop_all(self, grace_s: float) -> None:
        """SIGTERM every live group at once, SIGKILL after ``grace_s``; wait until all are gone."""
        t_stop = time.monotonic()
        live = [(r, p) for r, p in enumerate(self.procs) if p.poll() is None]
        for rank, p in live:
            self.stopped.add(rank)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
        end_by = time.monotonic() + grace_s
        while any(p.poll() is None for _, p in live) and time.monotonic() < end_by:
            time.sleep(0.02)
        for p in self.procs:  # the whole group, also grandchildren that ignored SIGTERM
            fresh_process.stop(p)
        if live:
            self.stop_s = time.monotonic() - t_stop

    def worker(self, rank: int, proc: subprocess.Popen[str], log: Path) -> WorkerResult:
        text = log.read_bytes().decode("utf-8", "replace") if log.exists() else ""
        return WorkerResult(
            process_id=rank,
            pid=proc.pid,
            returncode=proc.returncode,
            log=text,
            stopped_by_launcher=rank in self.stopped,
        )


def _commands_per_rank(
    commands: Sequence[str] | Sequence[Sequence[str]] | Callable[[int], Sequence[str]],
    num_processes: int,
) -> list[list[str]]:
    if callable(commands):
        return [list(commands(r)) for r in range(num_processes)]
    if isinstance(commands, str):
        raise TypeError("commands must be a list of arguments, not one string")
    items = list(commands)
    if items and all(isinstance(c, str) for c in items):
        return [list(items) for _ in range(num_processes)]  # type: ignore[arg-type]
    if len(items) != num_processes:
        raise ValueError(
            f"got {len(items)} commands for num_processes={num_processes}: give one command "
            "for all processes, or exactly one per process"
        )
    return [list(c) for c in items]  # type: ignore[arg-type]
