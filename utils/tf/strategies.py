"""Pick a ``tf.distribute`` strategy for the hardware at hand, and compile for it (imports TF).

- :func:`get_strategy`: ``TPUStrategy`` on a TPU, ``MirroredStrategy`` on several GPUs,
  ``OneDeviceStrategy`` on one GPU, the default strategy on a CPU, or ``MirroredStrategy`` over
  N virtual CPU devices so that the 8-core TPU code paths run on a laptop. A TPU that was found
  but could not be connected is an error (or, only when asked, a loud fallback), never the
  silent ``except ValueError: use the CPU`` of older tutorials. On a TPU whose TensorFlow has
  no TPU kernels (Kaggle's ``tensorflow-cpu``, or Colab's after the set-up cell installs it) it
  says so in one line and returns the CPU strategy: the notebook's CPU stand-in, labelled as
  such. Safe to re-run in a notebook.
- :func:`compile_kwargs`: the ``model.compile`` extras that suit a strategy.
- :func:`describe_strategy`, :func:`strategy_kind`: what a strategy runs on.

Connecting to the TPU itself is :mod:`utils.tf.tpu_connect`.
"""

from __future__ import annotations

import warnings
from typing import Any

from utils import bootstrap
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
    "tf_cannot_use_tpu_note",
]

DEFAULT_TPU_STEPS_PER_EXECUTION = 32
"""Training steps per host-to-TPU call that :func:`compile_kwargs` suggests on a TPU."""


class VirtualDevicesError(RuntimeError):
    """The CPU is already split into a different number of logical devices in this process."""


class CPUFallbackWarning(RuntimeWarning):
    """A TPU was found but could not be used, and ``allow_cpu_fallback=True`` chose the CPU."""


_STRATEGY_CACHE: dict[tuple[Any, ...], tf.distribute.Strategy] = {}


def _banner(lines: list[str]) -> str:
    width = max(len(line) for line in lines) + 4
    bar = "!" * width
    return "\n".join([bar, *(f"! {line.ljust(width - 4)} !" for line in lines), bar])


def _loud_fallback(reason: str) -> None:
    """Say, impossible to miss, that training will run on the CPU."""
    text = _banner(
        [
            "NOT USING THE ACCELERATOR: a TPU/GPU was found but could not be used.",
            "Training runs on the CPU, far slower (allow_cpu_fallback=True).",
            *[line for line in reason.splitlines() if line.strip()],
        ]
    )
    print(text, flush=True)
    warnings.warn(text, CPUFallbackWarning, stacklevel=3)


def _configure_virtual_cpus(n: int) -> list[str]:
    """Split the CPU into ``n`` logical devices (or check it already is); return their names.

    TensorFlow fixes its logical devices the first time it uses them; asking for the same split
    again is accepted, a different one raises :class:`VirtualDevicesError`.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is None or len(current) != n:
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
            )
        except RuntimeError as exc:
            have = len(tf.config.list_logical_devices("CPU"))
            if have != n:
                raise VirtualDevicesError(
                    f"You asked for {n} virtual CPU devices, but TensorFlow in this process "
                    f"already runs with {have} logical CPU device{'s' if have != 1 else ''} "
                    f"and cannot change that once it has started ({exc}). Restart the kernel "
                    "(Jupyter: Kernel > Restart; Colab: Runtime > Restart session) and call "
                    f"get_strategy(virtual_cpus={n}) before any other TensorFlow work, or "
                    f"ask for virtual_cpus={have} again."
                ) from None
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(names) != n:
        raise VirtualDevicesError(
            f"Asked for {n} virtual CPU devices but TensorFlow shows {len(names)}: restart the "
            "kernel and call get_strategy() before any other TensorFlow work."
        )
    return names


def _check_virtual_cpus(virtual_cpus: object) -> None:
    if virtual_cpus is not None and (
        isinstance(virtual_cpus, bool) or not isinstance(virtual_cpus, int)
    ):
        raise TypeError(
            f"virtual_cpus must be a whole number >= 1 or None, not {virtual_cpus!r} "
            f"({type(virtual_cpus).__name__}): it is how many devices to split the CPU into."
        )
    if virtual_cpus is not None:
        simulated.check_count(virtual_cpus, "virtual_cpus")  # the one rule, 1..64


def _tpu_strategy(
    tpu_address: str | None,
    timeout_s: float,
    rt: runtime_mod.Runtime,
    allow_cpu_fallback: bool,
) -> tf.distribute.Strategy | None:
    """``TPUStrategy`` (cached), or None after a loud CPU fallback; see :func:`get_strategy`."""
    key: tuple[Any, ...] = ("tpu", tpu_address)
    if key in _STRATEGY_CACHE:
        return _STRATEGY_CACHE[key]
    try:
        resolver = connect_tpu(tpu_address, timeout_s=timeout_s, runtime=rt)
    except TPUConnectionError as exc:
        if not allow_cpu_fallback:
            raise
        if exc.process_unusable:
            raise TPUConnectionError(
                exc.tried,
                f"{exc.why} The CPU fallback is refused: TensorFlow in this process is "
                "still waiting for the TPU, so training on the CPU would hang.",
                exc.fix,
                process_unusable=True,
            ) from exc
        _loud_fallback(str(exc))
        return None
    _STRATEGY_CACHE[key] = tf.distribute.TPUStrategy(resolver)
    return _STRATEGY_CACHE[key]


def get_strategy(
    *,
    virtual_cpus: int | None = None,
    allow_cpu_fallback: bool = False,
    tpu_address: str | None = None,
    timeout_s: float = 60.0,
    runtime: runtime_mod.Runtime | None = None,
) -> tf.distribute.Strategy:
    """The ``tf.distribute`` strategy for this machine. Safe to call again (results are cached).

    - TPU found (or ``tpu_address`` given): ``tf.distribute.TPUStrategy`` after
      :func:`connect_tpu`. If connecting fails, :class:`TPUConnectionError` is raised, unless
      ``allow_cpu_fallback=True``: then a banner is printed and a :class:`CPUFallbackWarning`
      issued, and the CPU path below is taken. The fallback is refused (the error is raised,
      saying to restart the runtime) when TensorFlow in this process may still be waiting for
      the TPU: a CPU run would hang there. ``connect_tpu`` tries remote addresses in a child
      process first, so this only happens when the TPU answered that probe and then stalled.
    - Several GPUs visible to TensorFlow: ``MirroredStrategy``; one GPU:
      ``OneDeviceStrategy('/gpu:0')``. A GPU that ``utils.runtime`` sees but TensorFlow does not
      (a CPU-only TensorFlow build) is treated like a failed TPU connection.
    - CPU: the default strategy (``tf.distribute.get_strategy()``), or with ``virtual_cpus=N``
      ``MirroredStrategy`` over N logical CPU devices: the same code paths as an N-core TPU
      (global batch = per-replica batch x replicas, distributed datasets, all-reduce), slowly.
      ``virtual_cpus`` is ignored when an accelerator is used.
    - TPU runtime whose TensorFlow cannot drive it (``utils.bootstrap.tf_on_tpu`` is False:
      ``tensorflow-cpu`` or plain ``tensorflow`` on a TPU VM, as on Colab and Kaggle): one
      printed line saying so, then the CPU path above, on the TPU machine's host CPU. Nothing
      is tried against the TPU, so nothing can hang or fail there.

    Args:
        virtual_cpus: split the CPU into this many devices (CPU only; >= 1).
        allow_cpu_fallback: when a TPU/GPU is found but unusable, continue on the CPU, loudly.
        tpu_address: an explicit TPU address for :func:`connect_tpu`.
        timeout_s: time limit for connecting to a TPU.
        runtime: a :class:`utils.runtime.Runtime` (default: ``detect()``).

    Raises:
        TPUConnectionError: a TPU was found but not connected, and no fallback was allowed.
        VirtualDevicesError: TensorFlow already runs with a different number of CPU devices.
        TypeError: ``virtual_cpus`` is not a whole number (e.g. ``2.5`` or ``True``).
        ValueError: ``virtual_cpus`` below 1.
    """
    _check_virtual_cpus(virtual_cpus)
    rt = runtime_mod.detect() if runtime is None else runtime

    if tpu_address is None and rt.accelerator == "tpu" and not bootstrap.tf_on_tpu(rt):
        print(tf_cannot_use_tpu_note(), flush=True)
    elif tpu_address is not None or rt.accelerator == "tpu":
        strategy = _tpu_strategy(tpu_address, timeout_s, rt, allow_cpu_fallback)
        if strategy is not None:
            return strategy
    else:
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            key = ("gpu", len(gpus))
            if key not in _STRATEGY_CACHE:
                _STRATEGY_CACHE[key] = (
                    tf.distribute.MirroredStrategy()
                    if len(gpus) > 1
                    else tf.distribute.OneDeviceStrategy("/gpu:0")
                )
            return _STRATEGY_CACHE[key]
        if rt.accelerator == "gpu":
            reason = (
                f"utils.runtime found GPU(s) {', '.join(rt.gpus)}, but TensorFlow "
                f"{tf.__version__} sees none: it was installed without CUDA support. "
                "Install `tensorflow[and-cuda]` and restart the runtime."
            )
            if not allow_cpu_fallback:
                raise RuntimeError(reason + " Or pass allow_cpu_fallback=True to use the CPU.")
            _loud_fallback(reason)

    if virtual_cpus is None:
        return tf.distribute.get_strategy()
    key = ("cpu", virtual_cpus)
    devices = _configure_virtual_cpus(virtual_cpus)
    if key not in _STRATEGY_CACHE:
        _STRATEGY_CACHE[key] = tf.distribute.MirroredStrategy(devices)
    return _STRATEGY_CACHE[key]


def tf_cannot_use_tpu_note() -> str:
    """The line :func:`get_strategy` prints on a TPU whose TensorFlow has no TPU kernels."""
    tf_dist = bootstrap.tensorflow_distribution(
        {d: bootstrap.installed_version(d) for d in bootstrap.TENSORFLOW_DISTRIBUTIONS}
    )
    found = f"{tf_dist or 'TensorFlow'} {tf.__version__}"
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
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        devices = _devices(strategy)
        on_cpu = devices and all("CPU" in d.upper().rpartition("/")[2] for d in devices)
        return "mirrored-cpu" if on_cpu else "mirrored-gpu"
    if isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return "one-device"
    if not _devices(strategy):
        return "default"
    return type(strategy).__name__


def describe_strategy(strategy: tf.distribute.Strategy) -> str:
    """One line: the strategy's class, its replica count and its devices."""
    kind = strategy_kind(strategy)
    n = strategy.num_replicas_in_sync
    devices = _devices(strategy)
    if kind == "default":
        where = "no distribution; TensorFlow places ops itself (GPU:0 if any, else CPU:0)"
    else:
        short = [d.split("/")[-1].replace("device:", "") for d in devices]
        where = "devices " + ", ".join(short)
    name = "default strategy" if kind == "default" else type(strategy).__name__
    return f"{name}: {n} replica{'s' if n != 1 else ''} in sync; {where}"


def compile_kwargs(
    strategy: tf.distribute.Strategy, *, steps_per_execution: int | None = None
) -> dict[str, Any]:
    """Recommended extra ``model.compile`` arguments for ``strategy``.

    - **TPU**: ``steps_per_execution`` (default 32) runs that many training steps per call from
      the host, hiding the host's per-step overhead, the main TPU lever for small models (the TF
      "Use TPUs" guide uses it). ``jit_compile`` is not set: a TPU compiles everything with XLA.
    - **MirroredStrategy over virtual CPU devices**: no ``steps_per_execution`` above 1. With
      TensorFlow 2.21 and Keras 3, ``fit`` then fails with ``InvalidArgumentError: You must feed
      a value for placeholder tensor 'while/.../Placeholder'`` (checked on the course's CPU
      machine). Asking for it raises ``ValueError`` rather than failing later inside ``fit``.
    - **GPU, default strategy, CPU**: ``steps_per_execution`` only if you ask for it.
      ``jit_compile`` is never forced: Keras' ``"auto"`` turns XLA off on CPU-only machines and
      under ``tf.distribute``, and on the course's 2-core CPU ``jit_compile=True`` trained the
      seed CNN about 3x slower than the default. XLA is the TPU's compiler, not a CPU speed-up.

    Returns:
        A dict to splat into ``model.compile(..., **compile_kwargs(strategy))``.
    """
    if steps_per_execution is not None and steps_per_execution < 1:
        raise ValueError(f"steps_per_execution must be >= 1, not {steps_per_execution!r}")
    kind = strategy_kind(strategy)
    if kind == "tpu":
        return {"steps_per_execution": steps_per_execution or DEFAULT_TPU_STEPS_PER_EXECUTION}
    if kind == "mirrored-cpu":
        if steps_per_execution not in (None, 1):
            raise ValueError(
                f"steps_per_execution={steps_per_execution} fails under MirroredStrategy over "
                "virtual CPU devices in TensorFlow 2.21 ('You must feed a value for placeholder "
                "tensor'); leave it at 1 on the CPU simulation and use it on the TPU."
            )
        return {}
    if steps_per_execution is not None:
        return {"steps_per_execution": steps_per_execution}
    return {}
