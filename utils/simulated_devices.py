"""Several XLA devices on one CPU, and the two checks that data parallelism needs.

Framework-free: this module must run *before* JAX is imported. XLA reads
``--xla_force_host_platform_device_count=N`` from ``XLA_FLAGS`` when JAX creates its CPU backend,
so the flag is useless once JAX has been imported (it may already hold the backend); then the
program would quietly run on one device. :func:`request` refuses that case loudly.

- :func:`check_count`: the one rule for a simulated device count, whichever framework reads it
  (JAX's ``XLA_FLAGS``, TensorFlow's logical CPUs, torch_xla's ``CPU_NUM_DEVICES``, the
  multi-host workers' ``SIMULATED_DEVICES``): a whole number in ``1..``:data:`MAX_COUNT`, per
  process; :func:`default_count`: the one default, :data:`DEFAULT_TOTAL` devices in all.
- :func:`request`: put the flag into ``XLA_FLAGS`` (replacing an older count), or raise
  :class:`JaxAlreadyImported` saying to restart the kernel.
- :func:`child_flags`: the same ``XLA_FLAGS`` for a fresh child process (this one may hold JAX).
- :func:`check_device_count`: after import, the devices JAX sees are the devices asked for.
- :func:`per_device_batch`: the global batch split evenly over the devices, or a clear error.

On a TPU nothing is simulated: use every chip JAX sees (the flag only affects the CPU platform).

**Patient collectives.** Simulated devices are threads sharing the host's cores. When one device's
thread reaches an all-reduce late, XLA's CPU runtime logs "may be stuck" after 20 s and *ends the
process* 40 s later (``--xla_cpu_collective_call_warn_stuck_timeout_seconds`` and
``--xla_cpu_collective_call_terminate_timeout_seconds``, defaults 20 and 40). On a shared 2-core
machine eight simulated devices were seen 20 s late in one step, so :func:`request` also raises
both limits (:data:`PATIENCE_FLAGS`) where the installed jaxlib is known to accept them (XLA aborts
on a flag it does not know).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
from collections.abc import Mapping, MutableMapping

__all__ = [
    "DEFAULT_TOTAL",
    "FLAG",
    "MAX_COUNT",
    "PATIENCE_FLAGS",
    "JaxAlreadyImported",
    "accepts_patience",
    "check_count",
    "check_device_count",
    "child_flags",
    "default_count",
    "per_device_batch",
    "request",
    "requested_count",
]

FLAG = "--xla_force_host_platform_device_count"
_FLAG_RE = re.compile(re.escape(FLAG) + r"=(\S*)")
PATIENCE_FLAGS = (
    "--xla_cpu_collective_call_warn_stuck_timeout_seconds=300",
    "--xla_cpu_collective_call_terminate_timeout_seconds=900",
)
PATIENCE_MIN_JAXLIB = (0, 10)  # verified with jaxlib 0.10.2; older releases may not know them
MAX_COUNT = 64  # simulated devices in one process: more only adds threads fighting for the cores
DEFAULT_TOTAL = 8  # the default: 8 devices in all (a v5e-8's chips), split over a job's processes


def check_count(count: object, name: str = "simulated device count") -> int:
    """``count`` if it is a whole number in ``1..MAX_COUNT`` (devices in one process).

    Raises:
        ValueError: naming ``name`` and the value (a bool, a float or a string is refused too).
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ValueError(f"{name} must be an integer >= 1 and <= {MAX_COUNT}, got {count!r}")
    return count


def default_count(processes: int = 1) -> int:
    """Simulated devices per process when none were asked for: :data:`DEFAULT_TOTAL` in all."""
    return max(1, DEFAULT_TOTAL // max(1, processes))


def accepts_patience() -> bool:
    """Whether the installed jaxlib is known to accept :data:`PATIENCE_FLAGS`."""
    try:
        version = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return False
    parts = re.findall(r"\d+", version)[:2]
    return tuple(int(p) for p in parts) >= PATIENCE_MIN_JAXLIB


class JaxAlreadyImported(RuntimeError):
    """JAX was imported before ``XLA_FLAGS`` asked for simulated devices (restart the kernel)."""


def requested_count(env: Mapping[str, str] | None = None) -> int | None:
    """The device count that ``XLA_FLAGS`` asks for (the last occurrence wins), or ``None``."""
    env = os.environ if env is None else env
    found = _FLAG_RE.findall(env.get("XLA_FLAGS", ""))
    if not found:
        return None
    try:
        return int(found[-1])
    except ValueError as err:
        raise ValueError(
            f"XLA_FLAGS has {FLAG}={found[-1]!r}: the count must be an integer"
        ) from err


def request(
    count: int,
    *,
    env: MutableMapping[str, str] | None = None,
    modules: Mapping[str, object] | None = None,
    patient: bool | None = None,
) -> str:
    """Ask XLA for ``count`` CPU devices; returns the new ``XLA_FLAGS``.

    Safe to call again with the same count after JAX is imported (a re-run set-up cell).
    ``patient`` adds :data:`PATIENCE_FLAGS` (default: when ``count > 1`` and the installed jaxlib
    is known to accept them); flags already in ``XLA_FLAGS`` with the same name are kept.

    Raises:
        ValueError: ``count`` breaks :func:`check_count`.
        JaxAlreadyImported: JAX is already imported and ``XLA_FLAGS`` did not ask for ``count``
            devices before that, so the request cannot take effect.
    """
    check_count(count)
    env = os.environ if env is None else env
    modules = sys.modules if modules is None else modules
    current = requested_count(env)
    if "jax" in modules:
        if current == count:
            return env.get("XLA_FLAGS", "")
        had = f"XLA_FLAGS asked for {current}" if current else "XLA_FLAGS did not ask for any"
        raise JaxAlreadyImported(
            f"JAX was imported before {count} simulated CPU devices were requested ({had}). "
            f"Once anything has used a device, the request cannot take effect (JAX would run on "
            f"{current or 1} device(s), not {count}), and that cannot be checked from here, so "
            "it is refused. Restart the kernel (Colab: Runtime > Restart session) and run the "
            "notebook from the top: the set-up cells must run before anything imports jax."
        )
    existing = env.get("XLA_FLAGS", "")
    if _FLAG_RE.search(existing):  # replace the count where it stands
        flags = _FLAG_RE.sub(f"{FLAG}={count}", existing).split()
    else:
        flags = [*existing.split(), f"{FLAG}={count}"]
    if patient is None:
        patient = count > 1 and accepts_patience()
    if patient:
        names = {f.split("=", 1)[0] for f in flags}
        flags += [f for f in PATIENCE_FLAGS if f.split("=", 1)[0] not in names]
    env["XLA_FLAGS"] = " ".join(flags)
    return env["XLA_FLAGS"]


def child_flags(count: int, *, patient: bool | None = None) -> str:
    """``XLA_FLAGS`` for a fresh process that should see ``count`` simulated CPU devices.

    The same flags :func:`request` would set (patient collectives included where the installed
    jaxlib accepts them), built without touching this process's environment: this process may
    have imported JAX already; the child has not.
    """
    env: dict[str, str] = {}
    return request(count, env=env, modules={}, patient=patient)


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
