"""Pick a ``tf.distribute`` strategy for the hardware at hand, and compile for it (imports TF).

- :func:`get_strategy`: ``TPUStrategy`` on a TPU, ``MirroredStrategy`` on several GPUs,
  ``OneDeviceStrategy`` on one GPU, the default strategy on a CPU, or ``MirroredStrategy`` over
  N virtual CPU devices so that the 8-chip TPU code paths run on a laptop. A TPU that was found
  but could not be connected is an error (or, only when asked, a loud fallback), never the
  silent ``except ValueError: use the CPU`` of older tutorials. Safe to re-run in a notebook.
- :func:`compile_kwargs`: the ``model.compile`` extras that suit a strategy.
- :func:`describe_strategy`, :func:`strategy_kind`: what a strategy runs on.

Connecting to the TPU itself is :mod:`utils.tf.tpu_connect`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from utils import bootstrap, results
from utils import runtime as runtime_mod
from utils import simulated_devices as simulated

# tpu_connect imports TensorFlow with its C++ start-up banners dropped (utils.native_logs).
from utils.tf.tpu_connect import TPUConnectionError, connect_tpu, tf

__all__ = [
    "CPUFallbackWarning",
    "DEFAULT_TPU_STEPS_PER_EXECUTION",
    "VirtualDevicesError",
    "compile_kwargs",
    "describe_strategy",
    "get_strategy",
    "strategy_kind",
]

DEFAULT_TPU_STEPS_PER_EXECUTION = 32
"""Training steps per host-to-TPU call that :func:`compile_kwargs` suggests on a TPU."""


class VirtualDevicesError(RuntimeError):
    """The CPU is already split into a different number of logical devices in this process."""


class CPUFallbackWarning(RuntimeWarning):
    """A TPU/GPU was found but could not be used, and ``allow_cpu_fallback=True`` chose the CPU."""


_STRATEGY_CACHE: dict[tuple[Any, ...], tf.distribute.Strategy] = {}


def _cached(key: tuple[Any, ...], make: Callable[[], tf.distribute.Strategy]):
    if key not in _STRATEGY_CACHE:
        _STRATEGY_CACHE[key] = make()
    return _STRATEGY_CACHE[key]


def _fall_back(reason: str, allow_cpu_fallback: bool, error: Exception) -> None:
    """Raise ``error``, or (when allowed) say, impossible to miss, that the CPU will train."""
    if not allow_cpu_fallback:
        raise error
    text = (
        "NOT USING THE ACCELERATOR: a TPU/GPU was found but could not be used; training runs "
        f"on the CPU, far slower (allow_cpu_fallback=True).\n{reason}"
    )
    print(f"{'!' * 80}\n{text}\n{'!' * 80}", flush=True)
    warnings.warn(text, CPUFallbackWarning, stacklevel=4)


def _virtual_cpus(n: int) -> list[str]:
    """Split the CPU into ``n`` logical devices (or check it already is); return their names.

    TensorFlow fixes its logical devices the first time it uses them: the same split again is
    accepted, a different one raises :class:`VirtualDevicesError`.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is None or len(current) != n:
        try:
            configs = [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
            tf.config.set_logical_device_configuration(cpu, configs)
        except RuntimeError:
            pass  # already initialised: the count below says whether it is the one asked for
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(names) != n:
        raise VirtualDevicesError(
            f"You asked for {n} virtual CPU devices, but TensorFlow in this process already "
            f"runs with {len(names)} logical CPU device(s) and cannot change that once it has "
            "started. Restart the kernel (Jupyter: Kernel > Restart; Colab: Runtime > Restart "
            f"session) and call get_strategy(virtual_cpus={n}) before any other TensorFlow work."
        )
    return names


def _accelerator_strategy(
    rt: runtime_mod.Runtime, allow_cpu_fallback: bool
) -> tf.distribute.Strategy | None:
    """The TPU or GPU strategy, or None for the CPU path (after a note or a loud fallback)."""
    if rt.accelerator == "tpu" and not bootstrap.tf_on_tpu(rt):
        print(_cpu_stand_in_note(), flush=True)
        return None
    if rt.accelerator == "tpu":
        try:
            return _cached(("tpu",), lambda: tf.distribute.TPUStrategy(connect_tpu()))
        except TPUConnectionError as exc:
            _fall_back(str(exc), allow_cpu_fallback, exc)
            return None
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) > 1:
        return _cached(("gpu", len(gpus)), tf.distribute.MirroredStrategy)
    if gpus:
        return _cached(("gpu", 1), lambda: tf.distribute.OneDeviceStrategy("/gpu:0"))
    if rt.accelerator == "gpu":
        reason = (
            f"utils.runtime found GPU(s) {', '.join(rt.gpus)}, but TensorFlow {tf.__version__} "
            "sees none: it was installed without CUDA support. Install `tensorflow[and-cuda]` "
            "and restart the runtime."
        )
        error = RuntimeError(reason + " Or pass allow_cpu_fallback=True to use the CPU.")
        _fall_back(reason, allow_cpu_fallback, error)
    return None


def get_strategy(
    *,
    virtual_cpus: int | None = None,
    allow_cpu_fallback: bool = False,
    runtime: runtime_mod.Runtime | None = None,
) -> tf.distribute.Strategy:
    """The ``tf.distribute`` strategy for this machine. Safe to call again (results are cached).

    - TPU found: ``TPUStrategy`` after :func:`utils.tf.tpu_connect.connect_tpu`. If that fails,
      :class:`~utils.tf.tpu_connect.TPUConnectionError`, unless ``allow_cpu_fallback=True``:
      then a banner and a :class:`CPUFallbackWarning`, and the CPU path below. A TPU whose
      TensorFlow has no TPU kernels (``utils.bootstrap.tf_on_tpu`` is False: the free TPUs as
      shipped) gets one printed line, then the CPU path on the TPU host's CPU.
    - GPUs visible to TensorFlow: ``MirroredStrategy`` (several) or ``OneDeviceStrategy``. A GPU
      ``utils.runtime`` sees but TensorFlow does not is treated like a failed TPU connection.
    - CPU: the default strategy, or with ``virtual_cpus=N`` ``MirroredStrategy`` over N logical
      CPU devices: the code paths of an N-chip TPU, slowly (ignored on an accelerator).

    Raises:
        TPUConnectionError: a TPU was found but not connected, and no fallback was allowed.
        VirtualDevicesError: TensorFlow already runs with a different number of CPU devices.
        ValueError: ``virtual_cpus`` is not a whole number from 1 to 64.
    """
    if virtual_cpus is not None:
        simulated.check_count(virtual_cpus, "virtual_cpus")
    rt = runtime_mod.detect() if runtime is None else runtime
    strategy = _accelerator_strategy(rt, allow_cpu_fallback)
    if strategy is not None:
        return strategy
    if virtual_cpus is None:
        return tf.distribute.get_strategy()
    devices = _virtual_cpus(virtual_cpus)
    return _cached(("cpu", virtual_cpus), lambda: tf.distribute.MirroredStrategy(devices))


def _cpu_stand_in_note() -> str:
    """The line :func:`get_strategy` prints on a TPU whose TensorFlow has no TPU kernels."""
    v = results.versions(bootstrap.TENSORFLOW_DISTRIBUTIONS)
    found = f"{bootstrap.tensorflow_distribution(v) or 'TensorFlow'} {tf.__version__}"
    return (
        f"CPU STAND-IN: {found} has no TPU kernels, so TensorFlow runs on this TPU machine's host "
        "CPU, not on the TPU (TPUStrategy needs tensorflow-tpu: a Cloud TPU VM with a TensorFlow "
        "image, or INSTALL_TENSORFLOW_TPU = True in the set-up cell)."
    )


def _devices(strategy: tf.distribute.Strategy) -> tuple[str, ...]:
    try:
        return tuple(strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError, AttributeError):  # the default strategy
        return ()


def strategy_kind(strategy: tf.distribute.Strategy) -> str:
    """``"tpu"``, ``"mirrored-gpu"``, ``"mirrored-cpu"``, ``"one-device"`` or ``"default"``."""
    if isinstance(strategy, tf.distribute.TPUStrategy | tf.distribute.experimental.TPUStrategy):
        return "tpu"
    devices = _devices(strategy)
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        on_cpu = devices and all("CPU" in d.upper().rpartition("/")[2] for d in devices)
        return "mirrored-cpu" if on_cpu else "mirrored-gpu"
    if isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return "one-device"
    return type(strategy).__name__ if devices else "default"


def describe_strategy(strategy: tf.distribute.Strategy) -> str:
    """One line: the strategy's class, its replica count and its devices."""
    n = strategy.num_replicas_in_sync
    if strategy_kind(strategy) == "default":
        name, where = "default strategy", "no distribution; TensorFlow places ops itself"
    else:
        short = [d.split("/")[-1].replace("device:", "") for d in _devices(strategy)]
        name, where = type(strategy).__name__, "devices " + ", ".join(short)
    return f"{name}: {n} replica{'s' if n != 1 else ''} in sync; {where}"


def compile_kwargs(
    strategy: tf.distribute.Strategy, *, steps_per_execution: int | None = None
) -> dict[str, Any]:
    """Recommended extra ``model.compile`` arguments for ``strategy``.

    - **TPU**: ``steps_per_execution`` (default 32): that many training steps per call from the
      host, hiding the host's per-step overhead. A TPU compiles everything with XLA anyway.
    - **MirroredStrategy over virtual CPU devices**: nothing above 1: with TensorFlow 2.21 and
      Keras 3, ``fit`` then fails with ``You must feed a value for placeholder tensor``; asking
      for it raises ``ValueError`` here instead.
    - **GPU, default strategy, CPU**: ``steps_per_execution`` only if asked. ``jit_compile`` is
      never forced: on the course's 2-core CPU it trained the seed CNN about 3x slower.
    """
    if steps_per_execution is not None and steps_per_execution < 1:
        raise ValueError(f"steps_per_execution must be >= 1, not {steps_per_execution!r}")
    kind = strategy_kind(strategy)
    if kind == "tpu":
        return {"steps_per_execution": steps_per_execution or DEFAULT_TPU_STEPS_PER_EXECUTION}
    if kind == "mirrored-cpu" and steps_per_execution not in (None, 1):
        raise ValueError(
            f"steps_per_execution={steps_per_execution} fails under MirroredStrategy over "
            "virtual CPU devices in TensorFlow 2.21 ('You must feed a value for placeholder "
            "tensor'); leave it at 1 on the CPU simulation and use it on the TPU."
        )
    if kind == "mirrored-cpu" or steps_per_execution is None:
        return {}
    return {"steps_per_execution": steps_per_execution}
