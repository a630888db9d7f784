"""The course's one way to run a child process: its own session, bounded, nothing left behind.

Some things can only happen once per process: TensorFlow's virtual CPU devices are fixed when TF
starts, torch_xla's launcher needs a process that has not touched the XLA device, a TPU probe that
hangs must not hang the notebook, and memory growth is only honest in a clean heap. Notebooks,
tests, the multi-host launcher (:mod:`utils.launcher`), the TPU probe (``utils.tf.tpu_connect``)
and the torch_xla runner (``utils.torch.launch``) all start children here:

- :func:`child_env`: this process's environment plus ``env``, with the course importable
  (``PYTHONPATH`` starts with :data:`utils.ROOT`);
- :func:`spawn`: start a command in a session (process group) of its own, killed with every
  group still live by an ``atexit`` hook (and, if asked, when this process dies: Linux
  ``PR_SET_PDEATHSIG``);
- :func:`stop`: SIGTERM the whole group, SIGKILL it after a grace period, reap the child and wait
  (bounded) until no member of the group is left running;
- :func:`run_child`: spawn, wait up to a timeout, stop; returns the output also on a timeout;
- :func:`run_python` / :func:`run_python_json`: ``python <args>`` from the course root; a
  failure or a timeout raises :class:`FreshProcessError` ending with the tail of the output.

Framework-free.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils import ROOT

RESULT_PREFIX = "RESULT "

# Process groups started by this interpreter and not yet stopped; killed at exit.
_LIVE_GROUPS: set[int] = set()


class FreshProcessError(RuntimeError):
    """The child process failed; the message ends with the tail of its output."""


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, overridden by ``env``, with the course first on PYTHONPATH."""
    out = {**os.environ, **(env or {})}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH")]))
    return out


def _die_with_parent(parent: int) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec (Linux)
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: killed if the parent dies
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def spawn(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
    die_with_parent: bool = False,
) -> subprocess.Popen[str]:
    """Start ``args`` in a new session (its pid is the group id), stdin closed, text output.

    ``env`` is the child's whole environment (build it with :func:`child_env`). The group is
    registered for :func:`stop` and for the kill at interpreter exit. ``die_with_parent``
    (Linux): the child is SIGKILLed if this process dies without cleaning up; it needs a Python
    hook between fork and exec, which JAX warns about in a process that imported it.
    """
    linux = sys.platform.startswith("linux") and die_with_parent
    proc = subprocess.Popen(
        list(args),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd if cwd is not None else ROOT,
        env=dict(env) if env is not None else child_env(),
        text=True,
        start_new_session=True,  # own process group: one killpg reaches its children too
        preexec_fn=_die_with_parent(os.getpid()) if linux else None,
    )
    _LIVE_GROUPS.add(proc.pid)
    return proc


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@atexit.register
def _kill_all_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        _kill_group(pgid, signal.SIGKILL)
        _LIVE_GROUPS.discard(pgid)


_HAS_PROC = Path("/proc/self").exists()  # Linux


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, pgrp, ...; None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (Linux ``/proc``; ``kill -0`` elsewhere)."""
    if _HAS_PROC:
        fields = _stat(pid)
        return fields is not None and fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def group_members(pgid: int) -> list[int]:
    """Pids of the running (not zombie) processes of group ``pgid`` (Linux; else the leader)."""
    if not _HAS_PROC:
        return [pgid] if pid_alive(pgid) else []
    found = [(int(e), _stat(e)) for e in os.listdir("/proc") if e.isdigit()]
    return [pid for pid, f in found if f and f[2] == str(pgid) and f[0] not in ("Z", "X")]


def children(pid: int) -> list[int]:
    """Pids of the running (not zombie) children of ``pid`` (Linux; elsewhere none)."""
    found = [(int(e), _stat(e)) for e in os.listdir("/proc") if e.isdigit()] if _HAS_PROC else []
    return [c for c, f in found if f and f[1] == str(pid) and f[0] not in ("Z", "X")]


def stop(proc: subprocess.Popen[Any], *, grace_s: float = 0.0, gone_within_s: float = 30.0) -> None:
    """Stop ``proc``'s whole group: SIGTERM, ``grace_s`` to exit, then SIGKILL; reap; wait.

    Returns once the child is reaped and no member of its group is running, or after
    ``gone_within_s`` (a process in uninterruptible sleep can outlast a SIGKILL for a while;
    on a loaded machine the kernel may take seconds to tear a killed process down).
    """
    if grace_s > 0 and proc.poll() is None:
        _kill_group(proc.pid, signal.SIGTERM)
        end_by = time.monotonic() + grace_s
        while proc.poll() is None and time.monotonic() < end_by:
            time.sleep(0.02)
    _kill_group(proc.pid, signal.SIGKILL)  # the whole group, also children that ignored SIGTERM
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        proc.wait(timeout=gone_within_s)
    end_by = time.monotonic() + gone_within_s
    while group_members(proc.pid) and time.monotonic() < end_by:
        _kill_group(proc.pid, signal.SIGKILL)
        time.sleep(0.05)
    _LIVE_GROUPS.discard(proc.pid)


@dataclass(frozen=True)
class ChildRun:
    """What :func:`run_child` saw: exit status (None: it never ended), output, timed out or not."""

    args: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float

    def tail(self, chars: int = 3000) -> str:
        return (self.stdout + self.stderr)[-chars:]


def run_child(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout_s: float = 300.0,
    stderr: Any = subprocess.PIPE,
) -> ChildRun:
    """Run ``args`` (see :func:`spawn`) for at most ``timeout_s``; never raises for a failure.

    On a timeout or Ctrl-C the whole session is killed, so neither the child nor anything it
    started outlives the call, and a grandchild holding the output pipe open cannot make the wait
    hang. The output read so far comes back also when the child timed out.
    """
    start = time.monotonic()
    proc = spawn(args, env=env, cwd=cwd, stderr=stderr)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=10)  # the output so far; pipes close with the group
        except (subprocess.TimeoutExpired, ValueError, OSError):
            out, err = "", ""
    finally:  # also on Ctrl-C: the child's whole session goes, and anything it left running
        stop(proc)
    return ChildRun(
        list(args),
        None if timed_out else proc.returncode,
        out or "",
        err or "",
        timed_out,
        time.monotonic() - start,
    )


def run_python(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``python <args>`` from the course root with ``utils`` importable.

    ``env`` adds to (and overrides) this process's environment (TensorFlow's C++ logs are quiet
    unless ``env`` says otherwise). Raises :class:`FreshProcessError` with the tail of the output
    if the child exits non-zero or runs past ``timeout_s``.
    """
    command = [sys.executable, *args]
    done = run_child(
        command, env=child_env({"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}), timeout_s=timeout_s
    )
    if done.timed_out:
        raise FreshProcessError(
            f"{' '.join(command)[:200]} ran past {timeout_s:.0f} s; its output so far:\n"
            f"{done.tail()}"
        )
    if done.returncode != 0:
        raise FreshProcessError(
            f"fresh Python process exited with {done.returncode}:\n{done.tail()}"
        )
    return subprocess.CompletedProcess(command, done.returncode, done.stdout, done.stderr)


def result_of(output: str, *, context: str | None = None) -> Any:
    """The JSON after the last ``RESULT `` line of ``output``.

    Raises:
        FreshProcessError: no such line; the message ends with the tail of ``context``
            (default ``output``).
    """
    lines = [ln for ln in output.splitlines() if ln.startswith(RESULT_PREFIX)]
    if not lines:
        tail = (output if context is None else context)[-3000:]
        raise FreshProcessError(f"the child printed no {RESULT_PREFIX!r} line:\n{tail}")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def run_python_json(
    code: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
) -> Any:
    """Run ``code`` in a fresh interpreter; return the JSON it printed after ``RESULT ``.

    The code reports with ``print("RESULT " + json.dumps(value))``; the last such line wins.
    """
    done = run_python(["-c", code], env=env, timeout_s=timeout_s)
    return result_of(done.stdout, context=done.stdout + done.stderr)
