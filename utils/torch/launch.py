"""Run torch_xla scripts in a fresh process and read their debug output. Framework-free.

``CPU_NUM_DEVICES``, SPMD, the persistent compilation cache and ``PT_XLA_DEBUG_LEVEL`` are fixed
when a process's XLA runtime starts, so notebook 06 writes such code to a script and runs it here
(through :func:`utils.fresh_process.run_python`, the course's one child-process runner).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from utils.fresh_process import run_python


def run_script(
    script: Path | str,
    args: Sequence[object] = (),
    *,
    simulated_devices: int = 1,
    env: dict[str, str] | None = None,
    timeout_s: float = 600.0,
) -> subprocess.CompletedProcess[str]:
    """``python script args...`` in a fresh process on this process's PJRT backend (with
    ``simulated_devices`` devices on the CPU), plus ``env``. Read a ``RESULT`` line it printed
    with :func:`utils.fresh_process.result_of`.

    Raises:
        FileNotFoundError: no such script.
        FreshProcessError: the child failed or ran past ``timeout_s`` (with its output's tail).
    """
    if not Path(script).is_file():
        raise FileNotFoundError(f"no script at {script}: run the cell that writes it first")
    pjrt = {"PJRT_DEVICE": os.environ.get("PJRT_DEVICE") or "CPU"}  # CPU_NUM_DEVICES: CPU only
    full_env = {**pjrt, "CPU_NUM_DEVICES": str(simulated_devices), **(env or {})}
    return run_python([str(script), *map(str, args)], env=full_env, timeout_s=timeout_s)


_PREFIX = re.compile(r"^(?:Unexpected Execution Analysis|Compilation Analysis): ?")
_FRAME = re.compile(r"^(\S+) \((.+?):(\d+)\)$")


def compilation_causes(log: str, *, keep_files: Sequence[str] = ()) -> list[dict]:
    """The compilations ``PT_XLA_DEBUG_LEVEL=2`` output explains, in order.

    Each is ``{"cause": torch_xla's words, "frames": ["function (file:line)", ...]}``: the Python
    frames that triggered it, the file reduced to its name, only files in ``keep_files`` (default:
    all). Hashes and full paths, which differ between machines, are left out.
    """
    lines = [_PREFIX.sub("", ln).strip() for ln in log.splitlines() if _PREFIX.match(ln)]
    causes = []
    for i, line in enumerate(lines[:-1]):
        if line != "Compilation Cause":
            continue
        frames = []
        for text in lines[i + 1 :]:
            if text.startswith(("----", "====")):
                break
            match = _FRAME.match(text)
            if match and (not keep_files or Path(match[2]).name in keep_files):
                frames.append(f"{match[1]} ({Path(match[2]).name}:{match[3]})")
        causes.append({"cause": lines[i + 1], "frames": frames})
    return causes
