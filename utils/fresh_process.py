"""Run Python in a fresh interpreter with the course importable, and read its result back.

Some things can only happen once per process: TensorFlow's virtual CPU devices are fixed when TF
starts, torch_xla's launcher needs a process that has not touched the XLA device, and memory
growth is only honest in a clean heap. Notebooks and tests use this module for all of those.
Framework-free.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "RESULT "


class FreshProcessError(RuntimeError):
    """The child process failed; the message ends with the tail of its output."""


def run_python(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``python <args>`` from the course root with ``utils`` importable.

    ``env`` adds to (and overrides) this process's environment. Raises
    :class:`FreshProcessError` if the child exits non-zero or runs past ``timeout_s``.
    The child runs in a session of its own: on a timeout or Ctrl-C the whole session is killed,
    so neither the child nor anything it started outlives the call (and a grandchild holding
    the output pipe open cannot make the wait hang).
    """
    child_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), child_env.get("PYTHONPATH")])
    )
    command = [sys.executable, *args]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        _kill_session(proc)
        raise FreshProcessError(f"{' '.join(command)[:200]} ran past {timeout_s:.0f} s") from exc
    except BaseException:  # Ctrl-C: take the child's session down too
        _kill_session(proc)
        raise
    _kill_session(proc)  # anything the child left running in its session
    done = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise FreshProcessError(f"fresh Python process exited with {done.returncode}:\n{tail}")
    return done


def _kill_session(proc: subprocess.Popen[str]) -> None:
    """Kill every process of the child's session, then reap the child (bounded waits)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=10)  # pipes close once the whole session is gone
    except (subprocess.TimeoutExpired, ValueError, OSError):
        proc.kill()
        proc.wait(timeout=10)


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
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if not lines:
        raise FreshProcessError(
            f"the child printed no {RESULT_PREFIX!r} line:\n{(done.stdout + done.stderr)[-3000:]}"
        )
    return json.loads(lines[-1][len(RESULT_PREFIX) :])
