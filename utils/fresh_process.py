"""Run Python in a fresh interpreter with the course importable, and read its result back.

Some things can only happen once per process: TensorFlow's virtual CPU devices are fixed when TF
starts, torch_xla's launcher needs a process that has not touched the XLA device, and memory
growth is only honest in a clean heap. Notebooks and tests use this module for all of those.
Framework-free.
"""

from __future__ import annotations

import json
import os
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
    """
    child_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    child_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), child_env.get("PYTHONPATH")])
    )
    command = [sys.executable, *args]
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        raise FreshProcessError(f"{' '.join(command)[:200]} ran past {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise FreshProcessError(f"fresh Python process exited with {done.returncode}:\n{tail}")
    return done


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
