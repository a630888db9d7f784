"""Several XLA devices on one CPU, and the two checks that data parallelism needs.

Framework-free: this module must run *before* JAX is imported. XLA reads
``--xla_force_host_platform_device_count=N`` from ``XLA_FLAGS`` when JAX creates its CPU backend,
so once JAX is imported the flag may come too late and the program would quietly run on one
device; :func:`request` refuses that case loudly.

- :func:`check_count`: the one rule for a simulated device count, whichever framework reads it
  (JAX's ``XLA_FLAGS``, TensorFlow's logical CPUs, torch_xla's ``CPU_NUM_DEVICES``, the
  multi-host workers' ``SIMULATED_DEVICES``); :func:`default_count`: :data:`DEFAULT_TOTAL` in all.
- :func:`request`: the count into ``XLA_FLAGS``; :func:`child_flags`: the same for a child.
- :func:`check_device_count`: after import, JAX sees the devices asked for.
- :func:`per_device_batch`: the global batch split evenly over the devices, or a clear error.

**Patient collectives.** Simulated devices are threads sharing the host's cores. XLA's CPU runtime
ends the process when one device reaches an all-reduce 40 s after the others, which a busy 2-core
machine has seen, so :func:`request` raises that limit (:data:`PATIENCE_FLAGS`) where the
installed jaxlib accepts the flags (XLA aborts on a flag it does not know).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, MutableMapping

from utils import results

FLAG = "--xla_force_host_platform_device_count"
_FLAG_RE = re.compile(re.escape(FLAG) + r"=(\S*)")
PATIENCE_FLAGS = (
    "--xla_cpu_collective_call_warn_stuck_timeout_seconds=300",
    "--xla_cpu_collective_call_terminate_timeout_seconds=900",
)
PATIENCE_MIN_JAXLIB = (0, 10)  # verified with jaxlib 0.10.2; older releases may not know them
MAX_COUNT = 64  # simulated devices in one process: more only adds threads fighting for the cores
DEFAULT_TOTAL = 8  # the default: 8 devices in all (a v5e-8's chips), split over a job's processes


class JaxAlreadyImported(RuntimeError):
    """JAX was imported before ``XLA_FLAGS`` asked for simulated devices (restart the kernel)."""


def check_count(count: object, name: str = "simulated device count") -> int:
    """``count`` if it is an int in ``1..MAX_COUNT``, else a ValueError naming ``name``."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ValueError(f"{name} must be an integer >= 1 and <= {MAX_COUNT}, got {count!r}")
    return count


def default_count(processes: int = 1) -> int:
    """Simulated devices per process when none were asked for: :data:`DEFAULT_TOTAL` in all."""
    return max(1, DEFAULT_TOTAL // max(1, processes))


def accepts_patience() -> bool:
    """Whether the installed jaxlib is known to accept :data:`PATIENCE_FLAGS`."""
    version = results.version("jaxlib")
    if version is None:
        return False
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2]) >= PATIENCE_MIN_JAXLIB


def requested_count(env: Mapping[str, str] | None = None) -> int | None:
    """The device count that ``XLA_FLAGS`` asks for (the last occurrence wins), or ``None``."""
    found = _FLAG_RE.findall((os.environ if env is None else env).get("XLA_FLAGS", ""))
    if found and not found[-1].isdigit():
        raise ValueError(f"XLA_FLAGS has {FLAG}={found[-1]!r}: the count must be an integer")
    return int(found[-1]) if found else None


def request(
    count: int,
    *,
    env: MutableMapping[str, str] | None = None,
    modules: Mapping[str, object] | None = None,
    patient: bool | None = None,
) -> str:
    """Ask XLA for ``count`` CPU devices; returns the new ``XLA_FLAGS``.

    Safe to repeat with the same count after JAX is imported (a re-run set-up cell). ``patient``
    adds :data:`PATIENCE_FLAGS` (default: ``count > 1`` and a jaxlib that accepts them), keeping
    flags of the same name already set. Raises ValueError (:func:`check_count`), or
    :class:`JaxAlreadyImported` if JAX was imported before ``XLA_FLAGS`` asked for ``count``.
    """
    check_count(count)
    env = os.environ if env is None else env
    current, existing = requested_count(env), env.get("XLA_FLAGS", "")
    if "jax" in (sys.modules if modules is None else modules):
        if current == count:
            return existing
        had = f"XLA_FLAGS asked for {current}" if current else "XLA_FLAGS did not ask for any"
        raise JaxAlreadyImported(
            f"JAX was imported before {count} simulated CPU devices were requested ({had}), so "
            f"JAX may run on {current or 1} device(s), not {count}. Restart the kernel (Colab: "
            "Runtime > Restart session) and run the notebook from the top: the set-up cells "
            "must run before anything imports jax."
        )
    flags = _FLAG_RE.sub(f"{FLAG}={count}", existing).split()  # a count already there: replaced
    flags += [] if f"{FLAG}={count}" in flags else [f"{FLAG}={count}"]
    if (count > 1 and accepts_patience()) if patient is None else patient:
        names = {f.split("=", 1)[0] for f in flags}
        flags += [f for f in PATIENCE_FLAGS if f.split("=", 1)[0] not in names]
    env["XLA_FLAGS"] = " ".join(flags)
    return env["XLA_FLAGS"]


def child_flags(count: int, *, patient: bool | None = None) -> str:
    """``XLA_FLAGS`` for a fresh process that should see ``count`` simulated CPU devices (this
    process's environment is untouched: it may hold JAX already; the child has not)."""
    return request(count, env={}, modules={}, patient=patient)


def check_device_count(seen: int, expected: int, platform: str = "cpu") -> None:
    """Raise if JAX sees ``seen`` devices where ``expected`` were asked for."""
    if seen != expected:
        raise RuntimeError(
            f"JAX sees {seen} {platform} device(s), but {expected} were requested with "
            f"XLA_FLAGS={FLAG}={expected}. JAX was probably imported (or its CPU backend "
            "started) before the flag was set: restart the kernel and run from the top."
        )


def per_device_batch(global_batch: int, devices: int) -> int:
    """``global_batch // devices``, or a ValueError naming both numbers when it does not divide."""
    if devices < 1 or global_batch < 1:
        raise ValueError(f"need global_batch >= 1 and devices >= 1, got {global_batch}, {devices}")
    if global_batch % devices:
        lower = global_batch - global_batch % devices
        raise ValueError(
            f"global batch {global_batch} does not split evenly over {devices} devices "
            f"({global_batch} % {devices} = {global_batch % devices}): data parallelism gives "
            f"every device the same number of examples. Use a multiple of {devices}, e.g. "
            + (f"{lower} or {lower + devices}." if lower else f"{devices}.")
        )
    return global_batch // devices
