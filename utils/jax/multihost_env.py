"""How a multi-host JAX worker joins its job: the same two calls on a TPU slice and in a rehearsal.

    from utils.jax import multihost_env
    multihost_env.prepare()             # before ``import jax``
    import jax
    multihost_env.initialize(timeout_s=300)

**On a TPU slice** (every worker started with ``gcloud ... ssh --worker=all``, or a GKE Job)
nothing here is needed: :func:`initialize` calls ``jax.distributed.initialize()`` with no
arguments, and JAX finds the coordinator, the process count and this process's id itself (from
the TPU VM's metadata server, or ``TPU_WORKER_HOSTNAMES`` / ``TPU_WORKER_ID`` on GKE).

**In the rehearsal** (``utils.launcher`` starting processes on 127.0.0.1, its stand-in for the
TPU runtime) the launcher's variables ``COURSE_COORDINATOR``, ``COURSE_NUM_PROCESSES`` and
``COURSE_PROCESS_ID`` are translated into ``initialize``'s arguments, with gloo for the CPU
collectives. :func:`prepare` then also puts JAX on the CPU with ``SIMULATED_DEVICES`` devices per
process (and XLA's patient-collective flags, :mod:`utils.simulated_devices`), overriding a preset
``JAX_PLATFORMS`` on purpose: a rehearsal on a TPU VM must not grab its chips (libtpu allows one
process), and it says so when it overrides one.

This module does not import JAX at import time (so :func:`prepare` can run first) and does not
depend on ``utils.launcher``: a worker that uses it runs unchanged where the launcher is absent.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from utils import simulated_devices

LAUNCHER_VARS = ("COURSE_COORDINATOR", "COURSE_NUM_PROCESSES", "COURSE_PROCESS_ID")
LOOPBACK = "127.0.0.1"


class StartupError(RuntimeError):
    """The launcher's variables are incomplete or wrong (named in the message)."""


def is_rehearsal(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``utils.launcher`` started this process (any of its variables is set)."""
    environ = os.environ if environ is None else environ
    return any(k in environ for k in LAUNCHER_VARS)


def launcher_args(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``jax.distributed.initialize`` arguments from the launcher's variables, checked.

    Raises :class:`StartupError` naming the variable that is missing or wrong: a bad value is
    a clear error before JAX waits for peers that will never come.
    """
    environ = os.environ if environ is None else environ
    missing = [k for k in LAUNCHER_VARS if k not in environ]
    if missing:
        raise StartupError(f"rehearsal environment incomplete: {', '.join(missing)} not set")
    coordinator = environ["COURSE_COORDINATOR"]
    host, sep, port = coordinator.rpartition(":")
    if not sep or not port.isdigit():
        raise StartupError(f"COURSE_COORDINATOR is {coordinator!r}, not host:port")
    if host != LOOPBACK:
        raise StartupError(f"COURSE_COORDINATOR host is {host!r}: a rehearsal uses only {LOOPBACK}")
    try:
        n, rank = int(environ["COURSE_NUM_PROCESSES"]), int(environ["COURSE_PROCESS_ID"])
    except ValueError as exc:
        raise StartupError(
            f"COURSE_NUM_PROCESSES/COURSE_PROCESS_ID must be integers: {exc}"
        ) from exc
    if n < 1 or not 0 <= rank < n:
        raise StartupError(f"COURSE_PROCESS_ID {rank} is outside 0..{n - 1}")
    return {"coordinator_address": coordinator, "num_processes": n, "process_id": rank}


def prepare(
    devices: int | None = None,
    environ: MutableMapping[str, str] | None = None,
    modules: Mapping[str, object] | None = None,
    say: Callable[[str], None] = print,
) -> bool:
    """Before ``import jax``: in a rehearsal, CPU platform and simulated devices; else nothing.

    ``devices``: simulated CPU devices per process (default ``SIMULATED_DEVICES``, else
    ``simulated_devices.default_count`` over the job's processes: 8 in all). XLA's
    patient-collective flags are added wherever jaxlib accepts them, also with one device per
    process (the processes' collectives wait on each other too). Returns whether this is a
    rehearsal. A preset ``JAX_PLATFORMS`` other than ``cpu`` is
    overridden deliberately (and ``say`` reports it): the rehearsal's "hosts" are CPU processes.
    """
    environ = os.environ if environ is None else environ
    if not is_rehearsal(environ):
        return False
    preset = environ.get("JAX_PLATFORMS")
    if preset not in (None, "", "cpu"):
        say(f"rehearsal: JAX_PLATFORMS={preset!r} overridden with 'cpu' (simulated hosts)")
    environ["JAX_PLATFORMS"] = "cpu"
    if devices is None:
        processes = int(environ.get("COURSE_NUM_PROCESSES") or 1)
        wanted = environ.get("SIMULATED_DEVICES") or str(simulated_devices.default_count(processes))
        devices = int(wanted) if wanted.strip().isdigit() else wanted
    simulated_devices.check_count(devices, "SIMULATED_DEVICES")
    modules = sys.modules if modules is None else modules
    simulated_devices.request(
        devices, env=environ, modules=modules, patient=simulated_devices.accepts_patience()
    )
    return True


def initialize(
    timeout_s: int = 300,
    environ: Mapping[str, str] | None = None,
    distributed: Any = None,
    config: Any = None,
) -> dict[str, Any]:
    """Join the job; returns the arguments passed to ``jax.distributed.initialize``.

    Rehearsal: the launcher's coordinator, count and id, gloo for CPU collectives. Elsewhere
    (a TPU slice): no arguments, JAX reads them from the TPU runtime. ``distributed`` and
    ``config`` default to ``jax.distributed`` and ``jax.config`` (tests pass fakes).
    """
    environ = os.environ if environ is None else environ
    if distributed is None or config is None:
        import jax

        distributed = jax.distributed if distributed is None else distributed
        config = jax.config if config is None else config
    kwargs: dict[str, Any] = {"initialization_timeout": int(timeout_s)}
    if is_rehearsal(environ):
        kwargs.update(launcher_args(environ))
        config.update("jax_cpu_collectives_implementation", "gloo")  # CPU across processes
    distributed.initialize(**kwargs)
    return kwargs
