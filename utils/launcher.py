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
- :func:`save_checkpoint` / :func:`latest_checkpoint` write ``.npz`` checkpoints atomically
  (temp file, fsync, ``os.replace``), so a kill during a write never leaves a checkpoint that
  loads as complete.

Each command is a list of strings formatted with ``{process_id}``, ``{num_processes}``,
``{port}`` and ``{coordinator}``; the same values are in the environment as
``COURSE_PROCESS_ID``, ``COURSE_NUM_PROCESSES``, ``COURSE_COORDINATOR``. Framework-free.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import re
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

LOOPBACK = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent

# Process groups started by this interpreter and not yet reaped; killed at exit.
_LIVE_GROUPS: set[int] = set()


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


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picks it)."""
    check_loopback(host)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


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


def _die_with_parent(parent: int) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec (Linux)
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: killed if the launcher dies
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)

    return preexec


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@atexit.register
def _kill_all_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        _kill_group(pgid, signal.SIGKILL)
        _LIVE_GROUPS.discard(pgid)


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (Linux ``/proc``; ``kill -0`` elsewhere)."""
    status = Path(f"/proc/{pid}/status")
    if status.parent.parent.exists() and Path("/proc/self").exists():
        try:
            text = status.read_text()
        except (FileNotFoundError, ProcessLookupError):
            return False
        m = re.search(r"^State:\s+(\S)", text, re.M)
        return bool(m) and m.group(1) not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class WorkerResult:
    """One process of a job: its rank, pid, exit code (negative: killed by that signal)."""

    process_id: int
    pid: int
    returncode: int | None
    log: str
    ended_s: float | None  # seconds after the job started when it ended (None: we stopped it)
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
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Any] = []
    ended: dict[int, float] = {}
    stopped: set[int] = set()
    t0 = time.monotonic()
    first_failure: float | None = None
    stop_s: float | None = None
    reason = ""
    try:
        for rank, argv in enumerate(argvs):
            values = {
                "process_id": rank,
                "num_processes": num_processes,
                "port": port,
                "coordinator": coordinator,
            }
            args = [str(a).format(**values) for a in argv]
            if python:
                args = [sys.executable, *args]
            child_env = {
                **os.environ,
                **(env or {}),
                **(env_for_rank(rank) if env_for_rank else {}),
            }
            child_env.setdefault("COURSE_PROCESS_ID", str(rank))
            child_env.setdefault("COURSE_NUM_PROCESSES", str(num_processes))
            child_env.setdefault("COURSE_COORDINATOR", coordinator)
            child_env["PYTHONUNBUFFERED"] = "1"
            child_env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(ROOT), child_env.get("PYTHONPATH")])
            )
            log = open(log_dir / f"process-{rank}.log", "wb")  # noqa: SIM115 (closed below)
            logs.append(log)
            try:
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=cwd if cwd is not None else ROOT,
                    env=child_env,
                    start_new_session=True,  # own process group: one killpg stops its children
                    preexec_fn=_die_with_parent(os.getpid())
                    if sys.platform.startswith("linux")
                    else None,
                )
            except OSError as exc:
                reason = f"process {rank} could not be started: {exc}"
                first_failure = time.monotonic() - t0
                break
            _LIVE_GROUPS.add(proc.pid)
            procs.append(proc)

        deadline = t0 + timeout_s
        while not reason:
            now = time.monotonic()
            for rank, proc in enumerate(procs):
                if rank not in ended and proc.poll() is not None:
                    ended[rank] = now - t0
                    if proc.returncode != 0 and not reason:
                        first_failure = now - t0
                        others = "; stopping the others" if num_processes > 1 else ""
                        reason = (
                            f"process {rank} (pid {proc.pid}) {_describe_exit(proc.returncode)} "
                            f"after {ended[rank]:.1f} s{others}"
                        )
            if not reason and len(ended) == num_processes:
                reason = f"all {num_processes} processes exited 0"
                break
            if not reason and now >= deadline:
                first_failure = now - t0
                waiting = [r for r in range(num_processes) if r not in ended]
                reason = (
                    f"job ran past its {timeout_s:g} s timeout; processes {waiting} were still "
                    "running (a peer that never started or died blocks the others in a "
                    "collective); stopped them all"
                )
            if not reason:
                time.sleep(poll_s)
    except BaseException:
        reason = reason or "the launcher was interrupted; stopped every process"
        raise
    finally:
        t_stop = time.monotonic()
        live = [(r, p) for r, p in enumerate(procs) if p.poll() is None]
        for rank, p in live:
            stopped.add(rank)
            _kill_group(p.pid, signal.SIGTERM)
        end_by = time.monotonic() + grace_s
        while any(p.poll() is None for _, p in live) and time.monotonic() < end_by:
            time.sleep(0.02)
        for p in procs:  # the whole group, also grandchildren that ignored SIGTERM
            _kill_group(p.pid, signal.SIGKILL)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
            _LIVE_GROUPS.discard(p.pid)
        if live:
            stop_s = time.monotonic() - t_stop
        for log in logs:
            log.close()
    workers = []
    for rank, p in enumerate(procs):
        path = log_dir / f"process-{rank}.log"
        text = path.read_bytes().decode("utf-8", "replace") if path.exists() else ""
        workers.append(
            WorkerResult(
                process_id=rank,
                pid=p.pid,
                returncode=p.returncode,
                log=text,
                ended_s=ended.get(rank),
                stopped_by_launcher=rank in stopped,
            )
        )
    for path in log_dir.iterdir():
        path.unlink()
    log_dir.rmdir()
    ok = len(workers) == num_processes and all(w.returncode == 0 for w in workers)
    return JobResult(
        ok=ok,
        reason=reason,
        port=port,
        workers=workers,
        elapsed_s=time.monotonic() - t0,
        first_failure_s=first_failure,
        stop_s=stop_s,
        pids=[p.pid for p in procs],
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


# ----------------------------------------------------------------------------- environment


def rank_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, int, int]:
    """``(coordinator, num_processes, process_id)`` from the launcher's environment, checked.

    A worker calls this first: a wrong or missing value is a clear error before any framework
    waits for peers that will never come.
    """
    environ = os.environ if environ is None else environ
    missing = [
        k
        for k in ("COURSE_COORDINATOR", "COURSE_NUM_PROCESSES", "COURSE_PROCESS_ID")
        if k not in environ
    ]
    if missing:
        raise LaunchError(f"not started by utils.launcher: {', '.join(missing)} not set")
    coordinator = environ["COURSE_COORDINATOR"]
    host, _, port = coordinator.rpartition(":")
    check_loopback(host)
    try:
        n, rank = int(environ["COURSE_NUM_PROCESSES"]), int(environ["COURSE_PROCESS_ID"])
    except ValueError as exc:
        raise LaunchError(
            f"COURSE_NUM_PROCESSES/COURSE_PROCESS_ID must be integers: {exc}"
        ) from exc
    if n < 1 or not 0 <= rank < n:
        raise LaunchError(f"process id {rank} is outside 0..{n - 1} (COURSE_NUM_PROCESSES={n})")
    return coordinator, n, rank


# ----------------------------------------------------------------------------- checkpoints

_CKPT_RE = re.compile(r"^ckpt-(\d{8})\.npz$")


def save_checkpoint(
    directory: str | os.PathLike[str], step: int, arrays: Mapping[str, Any]
) -> Path:
    """Write ``arrays`` (name -> numpy array) as ``ckpt-<step>.npz``, atomically.

    The data goes to a temporary file in the same directory, is flushed and fsynced, then
    renamed with :func:`os.replace` (atomic on POSIX): a reader sees the old set of
    checkpoints or the new one, never a half-written file under a checkpoint name.
    """
    import numpy as np

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"ckpt-{int(step):08d}.npz"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-ckpt-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __step__=np.asarray(int(step)), **dict(arrays))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return final


def latest_checkpoint(directory: str | os.PathLike[str]) -> tuple[int, dict[str, Any]] | None:
    """``(step, arrays)`` of the newest complete checkpoint in ``directory``, or ``None``.

    Temporary files of an interrupted write are ignored (they never carry a checkpoint name).
    """
    import numpy as np

    directory = Path(directory)
    if not directory.is_dir():
        return None
    found = sorted(
        (int(m.group(1)), p) for p in directory.iterdir() if (m := _CKPT_RE.match(p.name))
    )
    if not found:
        return None
    step, path = found[-1]
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "__step__"}
        if int(data["__step__"]) != step:
            raise LaunchError(f"{path} says step {int(data['__step__'])}, its name says {step}")
    return step, arrays


# ----------------------------------------------------------------------------- TF_CONFIG


def tf_config(ports: Sequence[int], index: int, host: str = LOOPBACK) -> str:
    """The ``TF_CONFIG`` JSON for worker ``index`` of a cluster of workers on ``host:ports``."""
    check_loopback(host)
    cfg = {
        "cluster": {"worker": [f"{host}:{int(p)}" for p in ports]},
        "task": {"type": "worker", "index": int(index)},
    }
    parse_tf_config(json.dumps(cfg))
    return json.dumps(cfg)


def parse_tf_config(text: str | None) -> dict[str, Any]:
    """Check a ``TF_CONFIG`` string before TensorFlow reads it; return it parsed.

    TensorFlow's own errors for a bad ``TF_CONFIG`` come late (a hang waiting for a worker that
    does not exist, or a ``KeyError`` deep in a cluster resolver). This names the field:
    ``cluster.worker``, ``task.type``, ``task.index``; it also keeps the rehearsal on 127.0.0.1.
    """
    if not text:
        raise LaunchError("TF_CONFIG is not set or empty: each worker needs its own TF_CONFIG")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LaunchError(f"TF_CONFIG is not valid JSON ({exc}): {text[:120]!r}") from exc
    if not isinstance(cfg, dict):
        raise LaunchError(f"TF_CONFIG must be a JSON object, got {type(cfg).__name__}")
    cluster, task = cfg.get("cluster"), cfg.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise LaunchError('TF_CONFIG field "cluster" is missing or empty: {"worker": [...]}')
    workers = cluster.get("worker")
    if not isinstance(workers, list) or not workers:
        raise LaunchError('TF_CONFIG field "cluster.worker" must be a non-empty list of host:port')
    for i, address in enumerate(workers):
        host, sep, port = str(address).rpartition(":")
        if not sep or not port.isdigit():
            raise LaunchError(
                f'TF_CONFIG field "cluster.worker[{i}]" is {address!r}, not host:port'
            )
        try:
            check_loopback(host)
        except ValueError as exc:
            raise LaunchError(f'TF_CONFIG field "cluster.worker[{i}]": {exc}') from exc
    if len(set(workers)) != len(workers):
        raise LaunchError(f'TF_CONFIG field "cluster.worker" lists an address twice: {workers}')
    if not isinstance(task, dict):
        raise LaunchError('TF_CONFIG field "task" is missing: {"type": "worker", "index": N}')
    if task.get("type") not in cluster:
        raise LaunchError(
            f'TF_CONFIG field "task.type" is {task.get("type")!r}; '
            f"the cluster has {sorted(cluster)}"
        )
    index = task.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(workers):
        raise LaunchError(
            f'TF_CONFIG field "task.index" is {index!r}; it must be an int in '
            f"0..{len(workers) - 1} (cluster.worker has {len(workers)} entries)"
        )
    return cfg
