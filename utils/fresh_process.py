"""The course's one way to run a child process: its own session, bounded, nothing left behind.

Some things happen only once per process (TensorFlow's virtual CPUs, JAX's device count,
torch_xla's launcher), a probe that hangs must not hang the notebook, and memory is only honest
in a clean heap. Every child starts here:

- :func:`child_env`: this environment plus ``env``, the course first on ``PYTHONPATH``;
- :func:`spawn`: start a command in a process group of its own, killed at interpreter exit
  (and, if asked, when this process dies: Linux ``PR_SET_PDEATHSIG``);
- :func:`stop`: SIGTERM the groups, SIGKILL them after a grace period, reap, wait until gone;
- :func:`run_child`: spawn, wait up to a timeout, stop; the output comes back also on a timeout;
- :func:`run_python` / :func:`run_python_json`: ``python <args>`` from the course root; a
  failure or a timeout raises :class:`FreshProcessError` ending with the tail of the output.

Framework-free. Process lookups read Linux's ``/proc``.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils import ROOT

RESULT_PREFIX = "RESULT "
_LIVE_GROUPS: set[int] = set()  # groups started here and not yet stopped; killed at exit


class FreshProcessError(RuntimeError):
    """The child process failed; the message ends with the tail of its output."""


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, overridden by ``env``, with the course first on PYTHONPATH."""
    out = {**os.environ, **(env or {})}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH")]))
    return out


def _die_with_parent(parent: int) -> None:
    """Runs in the child between fork and exec: SIGKILL it when ``parent`` dies (Linux)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


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

    ``env`` is the child's whole environment (default :func:`child_env`). ``die_with_parent``
    needs a Python hook between fork and exec, which JAX warns about in a process that has it.
    """
    parent = os.getpid()
    proc = subprocess.Popen(
        list(args),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd if cwd is not None else ROOT,
        env=dict(env) if env is not None else child_env(),
        text=True,
        start_new_session=True,  # own process group: one killpg reaches its children too
        preexec_fn=(lambda: _die_with_parent(parent)) if die_with_parent else None,
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


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, pgrp, ...; None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _running(field: int, value: int) -> list[int]:
    """Pids of running (not zombie) processes whose stat ``field`` (1 ppid, 2 pgrp) is ``value``."""
    pids = os.listdir("/proc") if os.path.isdir("/proc") else []  # Linux; elsewhere none seen
    found = [(int(e), _stat(e)) for e in pids if e.isdigit()]
    return [p for p, f in found if f and f[field] == str(value) and f[0] not in "ZX"]


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (Linux ``/proc``; elsewhere always False)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in "ZX"


def stop(*procs: subprocess.Popen[Any], grace_s: float = 0.0, gone_within_s: float = 30.0) -> None:
    """Stop each process's whole group: SIGTERM, ``grace_s`` to exit, SIGKILL; reap; wait.

    Returns once every child is reaped and no member of its group runs, or after
    ``gone_within_s`` (a loaded kernel can take seconds to tear a killed process down).
    """
    live = [p for p in procs if p.poll() is None]
    for p in live if grace_s > 0 else []:
        _kill_group(p.pid, signal.SIGTERM)
    end_by = time.monotonic() + grace_s
    while any(p.poll() is None for p in live) and time.monotonic() < end_by:
        time.sleep(0.02)
    end_by = time.monotonic() + gone_within_s
    for p in procs:
        _kill_group(p.pid, signal.SIGKILL)  # the whole group, also children that ignored SIGTERM
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
            p.wait(timeout=gone_within_s)
        while _running(2, p.pid) and time.monotonic() < end_by:
            _kill_group(p.pid, signal.SIGKILL)
            time.sleep(0.05)
        _LIVE_GROUPS.discard(p.pid)


@dataclass(frozen=True)
class ChildRun:
    """What :func:`run_child` saw: exit status (None: it never ended), output, timed out or not."""

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

    On a timeout or Ctrl-C the whole session is killed, so nothing it started outlives the call
    and a grandchild holding the output pipe open cannot make the wait hang.
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
    finally:  # also on Ctrl-C
        stop(proc)
    code = None if timed_out else proc.returncode
    return ChildRun(code, out or "", err or "", timed_out, time.monotonic() - start)


def run_python(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout_s: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """Run ``python <args>`` from the course root, ``env`` added to this environment (TensorFlow's
    C++ logs quiet unless ``env`` says otherwise); a failure or timeout raises
    :class:`FreshProcessError` with the tail of the output."""
    command = [sys.executable, *args]
    env = child_env({"TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})
    done = run_child(command, env=env, timeout_s=timeout_s)
    if done.timed_out:
        why = f"{' '.join(command)[:200]} ran past {timeout_s:.0f} s; its output so far"
        raise FreshProcessError(f"{why}:\n{done.tail()}")
    if done.returncode != 0:
        raise FreshProcessError(
            f"fresh Python process exited with {done.returncode}:\n{done.tail()}"
        )
    return subprocess.CompletedProcess(command, done.returncode, done.stdout, done.stderr)


def result_of(output: str, *, context: str | None = None) -> Any:
    """The JSON after the last ``RESULT `` line of ``output``; :class:`FreshProcessError` if none
    (its message ends with the tail of ``context``, default ``output``)."""
    lines = [ln for ln in output.splitlines() if ln.startswith(RESULT_PREFIX)]
    if not lines:
        tail = (output if context is None else context)[-3000:]
        raise FreshProcessError(f"the child printed no {RESULT_PREFIX!r} line:\n{tail}")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def run_python_json(
    code: str, *, env: Mapping[str, str] | None = None, timeout_s: float = 300.0
) -> Any:
    """Run ``code`` in a fresh interpreter; return the JSON it printed after ``RESULT ``."""
    done = run_python(["-c", code], env=env, timeout_s=timeout_s)
    return result_of(done.stdout, context=done.stdout + done.stderr)
