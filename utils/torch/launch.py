"""Run torch_xla code in a fresh Python process, and read what it leaves behind.

Some torch_xla settings are fixed when a process's XLA runtime starts: ``CPU_NUM_DEVICES``,
SPMD (``xr.use_spmd()``), the persistent compilation cache (``xr.initialize_cache``) and
``PT_XLA_DEBUG_LEVEL``. A notebook kernel that has already used its device cannot change them,
so notebook 06 writes such code to a script (visible in the notebook) and runs it here.
This module is plumbing only and imports neither torch nor torch_xla:

- :func:`child_env`: the environment for the child: ``PJRT_DEVICE`` and, on the CPU backend,
  ``CPU_NUM_DEVICES``.
- :func:`tpu_held_line`: on a TPU, a kernel that opened the chips keeps them until it ends,
  so no child process can have them; returns the one line that says so (None when free).
- :func:`run_script`: run a script, return its ``RESULT`` JSON and its output.
- :func:`compilation_causes`: the "Compilation Cause" blocks of ``PT_XLA_DEBUG_LEVEL=2``
  output, with machine-specific paths and hashes taken out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils import simulated_devices as simulated
from utils.fresh_process import RESULT_PREFIX, FreshProcessError, result_of, run_python

__all__ = [
    "FreshProcessError",
    "ScriptRun",
    "child_env",
    "compilation_causes",
    "run_script",
    "tpu_held_line",
]


def child_env(simulated_devices: int, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a torch_xla child: this process's PJRT backend, N devices on the CPU.

    On a TPU the child sees every chip (``simulated_devices`` is ignored). A ``CPU_NUM_DEVICES``
    already set in this process is replaced: the child gets exactly what was asked for.
    """
    simulated.check_count(simulated_devices, "simulated_devices")
    source = os.environ if env is None else env
    pjrt = source.get("PJRT_DEVICE") or "CPU"
    out = {"PJRT_DEVICE": pjrt}
    if pjrt == "CPU":
        out["CPU_NUM_DEVICES"] = str(simulated_devices)
    return out


def tpu_held_line(*, runtime_started: bool, env: Mapping[str, str] | None = None) -> str | None:
    """One line when a child process cannot get the TPU because this process holds it; else None.

    ``runtime_started``: :func:`utils.torch.xla.runtime_started` of this process.
    """
    source = os.environ if env is None else env
    if source.get("PJRT_DEVICE") == "TPU" and runtime_started:
        return (
            "Skipped: this kernel holds the TPU (it opened it above), so a second process cannot "
            "get the chips. Restart the runtime and run the set-up, parameters and this section "
            "first, or run the script from a terminal."
        )
    return None


@dataclass(frozen=True)
class ScriptRun:
    """What :func:`run_script` got back: the ``RESULT`` JSON (or None) and all output."""

    result: Any
    stdout: str
    stderr: str


def run_script(
    script: Path | str,
    args: Sequence[str] = (),
    *,
    simulated_devices: int = 1,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
    require_result: bool = True,
) -> ScriptRun:
    """Run ``python script args...`` in a fresh process with :func:`child_env` (+ ``env``).

    The script reports by printing ``RESULT <json>`` (the last such line wins).

    Raises:
        FileNotFoundError: no such script.
        FreshProcessError: the child failed, ran past ``timeout_s`` or (with
            ``require_result``) printed no ``RESULT`` line; the tail of its output is included.
    """
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"no script at {script}: run the cell that writes it first")
    full_env = {**child_env(simulated_devices), **(env or {})}
    done = run_python([str(script), *map(str, args)], env=full_env, timeout_s=timeout_s)
    output = done.stdout + done.stderr
    has_result = any(ln.startswith(RESULT_PREFIX) for ln in done.stdout.splitlines())
    if require_result or has_result:
        return ScriptRun(result_of(done.stdout, context=output), done.stdout, done.stderr)
    return ScriptRun(None, done.stdout, done.stderr)


_PREFIX = re.compile(r"^(?:Unexpected Execution Analysis|Compilation Analysis): ?")
_FRAME = re.compile(r"^(\s*)(\S+) \((.+?):(\d+)\)$")


def compilation_causes(log: str, *, keep_files: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The compilations explained in ``PT_XLA_DEBUG_LEVEL=2`` output, one dict each.

    Each dict: ``cause`` (torch_xla's words), ``graph`` (its name when the code named it, e.g.
    with ``torch_xla.compile(name=...)``), ``inputs``/``outputs`` (graph sizes) and ``frames``:
    the Python frames that triggered it, as ``function (file:line)`` with the file reduced to
    its name, keeping only files named in ``keep_files`` (default: every frame). Hashes and
    full paths, which differ between machines, are dropped.
    """
    blocks: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    section = None
    for raw in log.splitlines():
        if not _PREFIX.match(raw):
            continue
        line = _PREFIX.sub("", raw).rstrip()
        stripped = line.strip()
        if stripped == "Compilation Cause":
            current = {"cause": None, "graph": None, "inputs": None, "outputs": None, "frames": []}
            blocks.append(current)
            section = "cause"
            continue
        if current is None:
            continue
        if stripped.startswith("Graph Info"):
            section = "graph"
        elif stripped.startswith("Python Frame Triggered Execution"):
            section = "frames"
        elif stripped.startswith("----") or stripped.startswith("===="):
            current, section = None, None
        elif section == "cause" and stripped and current["cause"] is None:
            current["cause"] = stripped
        elif section == "graph" and stripped.startswith("Graph Name:"):
            current["graph"] = stripped.split(":", 1)[1].strip()
        elif section == "graph" and stripped.startswith("Number of Graph Inputs:"):
            current["inputs"] = int(stripped.split(":", 1)[1])
        elif section == "graph" and stripped.startswith("Number of Graph Outputs:"):
            current["outputs"] = int(stripped.split(":", 1)[1])
        elif section == "frames":
            match = _FRAME.match(line)
            if match:
                func, path, lineno = match.group(2), match.group(3), match.group(4)
                name = Path(path).name
                if not keep_files or name in keep_files:
                    current["frames"].append(f"{func} ({name}:{lineno})")
    return blocks
