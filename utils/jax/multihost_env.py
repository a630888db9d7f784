"""How a multi-host JAX worker joins its job and finds its own input files (notebook 08).

    from utils.jax import multihost_env
    multihost_env.prepare()             # before ``import jax``
    import jax
    multihost_env.initialize(timeout_s=300)
    ...                                 # the job
    multihost_env.leave()

**On a TPU slice** (the same command on every worker: ``gcloud ... ssh --worker=all``, or a GKE
Job) :func:`prepare` does nothing and :func:`initialize` calls ``jax.distributed.initialize()``
with only a timeout: JAX gets the coordinator, the process count and this process's id from the
TPU runtime. **In the rehearsal** (``utils.launcher`` on 127.0.0.1) the launcher's variables
become ``initialize``'s arguments, with gloo for the CPU collectives, and :func:`prepare` puts
JAX on the CPU with ``SIMULATED_DEVICES`` devices per process, overriding a preset
``JAX_PLATFORMS`` (a rehearsal on a TPU VM must not grab its chips) and saying so.

**Per-host input.** :func:`write_shards` writes a data set as shard files in which file ``f``
holds slot ``f`` of every global batch; :func:`my_files` gives process ``p`` of ``P`` its
consecutive share. Process ``p``'s rows are then rows ``p*B/P ... (p+1)*B/P-1`` of every global
batch ``B``: the same global batches for any process count, every example of an epoch read once.
(Grain's ``ShardByJaxProcess`` or ``tf.data``'s ``shard`` also split the examples, but which
examples meet in a global batch then depends on the process count.)

Importing this module does not import JAX, and it does not depend on ``utils.launcher``.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from utils import simulated_devices

LAUNCHER_VARS = ("COURSE_COORDINATOR", "COURSE_NUM_PROCESSES", "COURSE_PROCESS_ID")
_SHARD = "shard-{:05d}-of-{:05d}.npz"
_SHARD_RE = re.compile(r"^shard-(\d{5})-of-(\d{5})\.npz$")


def is_rehearsal(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``utils.launcher`` started this process (its variables are set)."""
    return all(k in (os.environ if environ is None else environ) for k in LAUNCHER_VARS)


def launcher_args(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``jax.distributed.initialize``'s arguments from the launcher's variables."""
    environ = os.environ if environ is None else environ
    coordinator, n, rank = (environ[k] for k in LAUNCHER_VARS)
    return {"coordinator_address": coordinator, "num_processes": int(n), "process_id": int(rank)}


def prepare(
    devices: int | None = None,
    environ: MutableMapping[str, str] | None = None,
    modules: Mapping[str, object] | None = None,
) -> bool:
    """Before ``import jax``, in a rehearsal only: the CPU platform with ``devices`` simulated
    devices per process (default ``SIMULATED_DEVICES``, else 8 in all over the job's processes)
    and XLA's patient-collective flags, and enough CPU threads for gloo (:func:`cpu_threads`).
    Returns whether this is a rehearsal."""
    environ = os.environ if environ is None else environ
    if not is_rehearsal(environ):
        return False
    if environ.get("JAX_PLATFORMS", "cpu") not in ("", "cpu"):
        print(f"rehearsal: JAX_PLATFORMS={environ['JAX_PLATFORMS']!r} overridden with 'cpu'")
    environ["JAX_PLATFORMS"] = "cpu"
    if devices is None:
        default = simulated_devices.default_count(int(environ["COURSE_NUM_PROCESSES"]))
        wanted = environ.get("SIMULATED_DEVICES") or str(default)
        devices = int(wanted) if wanted.isdigit() else wanted  # type: ignore[assignment]
    simulated_devices.check_count(devices, "SIMULATED_DEVICES")
    patient = simulated_devices.accepts_patience()  # also with 1 device: processes wait too
    modules = sys.modules if modules is None else modules
    simulated_devices.request(devices, env=environ, modules=modules, patient=patient)
    environ["PJRT_NPROC"] = str(max(cpu_threads(devices), int(environ.get("PJRT_NPROC") or 0)))
    return True


def cpu_threads(devices: int) -> int:
    """Threads for XLA's CPU pool (``PJRT_NPROC``) in a rehearsal with ``devices`` per process.

    A gloo all-reduce blocks the pool thread that runs it until the other processes arrive, and
    XLA's pool has max(cores, devices) threads. With fewer cores than devices, every thread can
    end up waiting in an all-reduce while a device's matmul waits for a free thread, in this
    process or its peer: the job deadlocks at about 0 % CPU. Twice the devices keeps half free.
    """
    return 2 * devices


def initialize(timeout_s: int = 300, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Join the job; returns the arguments given to ``jax.distributed.initialize``."""
    import jax

    kwargs: dict[str, Any] = {"initialization_timeout": int(timeout_s)}
    if is_rehearsal(environ):
        kwargs.update(launcher_args(environ))
        jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU across processes
    jax.distributed.initialize(**kwargs)
    return kwargs


def leave(linger_s: float = 1.0) -> None:
    """End the job on every process: a barrier, then ``jax.distributed.shutdown()``, except that
    process 0, which hosts the coordination service, keeps the service up ``linger_s`` longer.

    ``shutdown()`` stops the service as soon as every process has reached it, while a peer is
    still cancelling its error poll; the peer then reads the closed socket as a crashed leader
    and aborts (or hangs while aborting). Lingering lets every peer disconnect first.
    """
    import jax
    from jax._src import distributed  # the service has no public handle
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("leave")
    state = distributed.global_state
    service, state.service = getattr(state, "service", None), None
    jax.distributed.shutdown()  # the client: returns once every process has called it
    if service is not None:
        time.sleep(linger_s)
        service.shutdown()


def write_shards(
    directory: str | Path, images: np.ndarray, labels: np.ndarray, *, global_batch: int, files: int
) -> list[Path]:
    """Write ``images``/``labels`` (a whole number of global batches; ``global_batch`` a multiple
    of ``files``) as ``files`` shard files of ``ids``, ``images``, ``labels``; their paths."""
    n = len(images)
    if global_batch < 1 or n % global_batch or len(labels) != n:
        raise ValueError(f"{n} examples are not a whole number of global batches of {global_batch}")
    if files < 1 or global_batch % files:
        raise ValueError(f"global batch {global_batch} does not split into {files} equal slots")
    Path(directory).mkdir(parents=True, exist_ok=True)
    ids, slot = np.arange(n), global_batch // files
    paths = [Path(directory) / _SHARD.format(f, files) for f in range(files)]
    for f, path in enumerate(paths):
        mine = ids[(ids % global_batch) // slot == f]  # batch 0's slot f, batch 1's slot f, ...
        np.savez(path, ids=mine, images=images[mine], labels=labels[mine])
    return paths


def my_files(names: Sequence[str], process_index: int, process_count: int) -> list[str]:
    """This process's consecutive share of the shard files among ``names``; a clear error if
    they are not a complete set or do not split evenly over the processes."""
    found = sorted((m.groups(), n) for n in names if (m := _SHARD_RE.match(Path(n).name)))
    if not found:
        raise FileNotFoundError("no shard-FFFFF-of-NNNNN.npz files")
    total = int(found[0][0][1])
    if [g for g, _ in found] != [(f"{f:05d}", f"{total:05d}") for f in range(total)]:
        raise ValueError(f"incomplete shard set: {[Path(n).name for _, n in found]}")
    if total % process_count:
        raise ValueError(f"{total} files do not split evenly over {process_count} processes")
    per = total // process_count
    return [n for _, n in found[process_index * per : (process_index + 1) * per]]
