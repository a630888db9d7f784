"""Keras 3 on JAX, set up so that it cannot silently run somewhere else.

Core module: importing it loads no framework (every ``jax``/``keras`` import is inside a
function), so a notebook calls :func:`configure` *before* Keras or JAX is imported, which is the
only moment their settings can still take effect:

- ``KERAS_BACKEND`` is read once, when ``keras`` is first imported. If Keras is already loaded
  with another backend, only a kernel restart helps: :func:`configure` says so.
- ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (N simulated CPU devices) is read once,
  when JAX starts its CPU backend. If JAX already sees another device count, :func:`check_devices`
  says so instead of letting the notebook run on one device while claiming eight.

Then, with JAX imported:

- :func:`check_devices`: the devices JAX sees agree with the runtime (a TPU that JAX cannot see is
  an error, not a quiet CPU run);
- :func:`check_batch` / :func:`drop_remainder`: the global batch splits evenly over the devices and
  every step has the same static shape;
- :func:`epoch_timer`: a Keras callback that times each epoch (first epoch = trace + compile);
- :func:`train_steps_child`: the body of a side-by-side benchmark run in a fresh process per
  backend (``utils.fresh_process``): one framework per process.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

from utils import simulated_devices as simulated

__all__ = [
    "KerasJaxSetupError",
    "check_batch",
    "check_devices",
    "configure",
    "drop_remainder",
    "epoch_timer",
    "train_steps_child",
]

_DEVICE_FLAG = simulated.FLAG
_DEVICE_FLAG_RE = re.compile(re.escape(_DEVICE_FLAG) + r"=\S*")
RESTART = (
    "Restart the kernel (Colab: Runtime > Restart session; Jupyter: Kernel > Restart) and run "
    "this notebook from the top, so its set-up cells run before anything imports Keras or JAX."
)


class KerasJaxSetupError(RuntimeError):
    """Keras or JAX cannot be set up as asked in this process; the message says what to do."""


def _keras_backend_loaded(modules: Mapping[str, Any]) -> str | None:
    """The backend of an already imported Keras 3, or None if Keras is not imported."""
    keras = modules.get("keras")
    if keras is None:
        return None
    try:
        return str(keras.config.backend())
    except AttributeError:  # Keras 2 (tf.keras era) or a half-imported module
        return "unknown (not Keras 3)"


def configure(
    simulated_devices: int | None,
    *,
    backend: str = "jax",
    env: MutableMapping[str, str] | None = None,
    modules: Mapping[str, Any] | None = None,
) -> list[str]:
    """Set ``KERAS_BACKEND`` and the simulated CPU device count before Keras/JAX are imported.

    Args:
        simulated_devices: how many CPU devices JAX should simulate (``None`` or 1: leave the
            CPU as one device). Only affects JAX's CPU platform: on a TPU or GPU the flag is
            harmless, and the accelerator's own devices are what training uses.
        backend: the Keras backend to select.
        env: the environment to change (default ``os.environ``).
        modules: the loaded modules (default ``sys.modules``); tests pass fakes.

    Returns:
        Lines worth printing: what was changed and why (empty when nothing needed saying).

    Raises:
        KerasJaxSetupError: Keras is already imported with another backend.
        ValueError: ``simulated_devices`` below 1.
    """
    env = os.environ if env is None else env
    modules = sys.modules if modules is None else modules
    notes: list[str] = []
    if simulated_devices is not None and simulated_devices < 1:
        raise ValueError(f"simulated_devices must be >= 1 (or None), got {simulated_devices}")

    loaded = _keras_backend_loaded(modules)
    if loaded is not None and loaded != backend:
        raise KerasJaxSetupError(
            f"Keras is already imported in this kernel with the {loaded!r} backend, and a "
            f"backend is chosen once per process: this notebook needs {backend!r}. {RESTART}"
        )
    previous = env.get("KERAS_BACKEND")
    if previous and previous != backend and loaded is None:
        notes.append(
            f"KERAS_BACKEND was {previous!r}; set to {backend!r} for this kernel (Keras is not "
            "imported yet, so this takes effect)."
        )
    env["KERAS_BACKEND"] = backend
    # Keras imports TensorFlow, when it is installed, even on the JAX backend (model.save calls
    # serialize_keras_object, which asks `tf.available`); TF's import then prints a oneDNN banner
    # to stderr. This kernel computes nothing with TF, so its oneDNN kernels are off.
    env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

    if simulated_devices is not None and simulated_devices > 1:
        try:  # one rule for simulated devices, shared with notebook 03
            simulated.request(simulated_devices, env=env, modules=modules)
        except simulated.JaxAlreadyImported:
            notes.append(
                "jax was imported before XLA_FLAGS was set: the device count may not change; "
                "check_devices() will tell."
            )
    else:
        flags = _DEVICE_FLAG_RE.sub("", env.get("XLA_FLAGS", "")).split()
        if flags:
            env["XLA_FLAGS"] = " ".join(flags)
        else:
            env.pop("XLA_FLAGS", None)
    return notes


def check_devices(
    accelerator: str,
    simulated_devices: int | None,
    *,
    devices: list[Any] | None = None,
    tpu_label: str = "",
) -> list[Any]:
    """The devices JAX trains on, checked against what the runtime should give.

    Args:
        accelerator: ``runtime.detect().accelerator`` (``"tpu"``, ``"gpu"`` or ``"cpu"``).
        simulated_devices: the count asked from :func:`configure` (used on a CPU only).
        devices: JAX's devices (default ``jax.devices()``); tests pass fakes.
        tpu_label: how to name the TPU in messages (e.g. ``"v5e-1"``).

    Raises:
        KerasJaxSetupError: a TPU or GPU was detected but JAX sees only CPU devices, or JAX sees a
            different number of CPU devices than asked (it was imported before ``XLA_FLAGS``).
    """
    if devices is None:
        import jax  # noqa: PLC0415 - only after configure() has set XLA_FLAGS

        devices = jax.devices()
    platforms = sorted({d.platform for d in devices})
    if accelerator in ("tpu", "gpu") and platforms == ["cpu"]:
        what = f"TPU {tpu_label}".strip() if accelerator == "tpu" else "GPU"
        remedy = (
            "The usual causes: jax installed without TPU support (`pip install 'jax[tpu]'`), or "
            "another process holds the TPU (libtpu allows one: a TensorFlow or torch_xla kernel "
            "still running, see /tmp/libtpu_lockfile)."
            if accelerator == "tpu"
            else "jax is installed without CUDA support (`pip install 'jax[cuda12]'`)."
        )
        raise KerasJaxSetupError(
            f"This runtime has a {what}, but JAX sees only {len(devices)} CPU device(s): training "
            f"here would run on the CPU. {remedy} Then restart the runtime."
        )
    if platforms == ["cpu"]:
        want = simulated_devices or 1
        if len(devices) != want:
            raise KerasJaxSetupError(
                f"JAX sees {len(devices)} CPU device(s), but {want} were asked for: jax was "
                f"imported (or its CPU backend started) before XLA_FLAGS={_DEVICE_FLAG}={want} "
                f"could take effect, or XLA_FLAGS was changed by hand. {RESTART}"
            )
    return list(devices)


def check_batch(global_batch: int, devices: int) -> int:
    """The per-device batch of ``global_batch`` split over ``devices``.

    The same rule as :func:`utils.simulated_devices.per_device_batch` (notebook 03 uses it).

    Raises:
        ValueError: the device count does not divide the global batch (naming both numbers and
            the nearest batches that work), or either is not positive.
    """
    return simulated.per_device_batch(global_batch, devices)


def drop_remainder(*arrays: Any, batch: int) -> tuple[Any, ...]:
    """The arrays cut to a whole number of ``batch``-sized steps (static shapes, one program).

    Raises:
        ValueError: fewer samples than one batch, or arrays of different lengths.
    """
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"arrays have different lengths: {sorted(lengths)}")
    (n,) = lengths
    keep = n // batch * batch
    if keep == 0:
        raise ValueError(
            f"{n} samples make no full batch of {batch}: use more data or a smaller batch"
        )
    return tuple(a[:keep] for a in arrays)


def epoch_timer() -> Any:
    """A Keras callback timing each epoch (imports Keras).

    ``.train_s``: training time of each epoch, up to the start of validation (first epoch =
    trace + compile + training); ``.epoch_s``: each epoch's wall time, validation included.
    """
    import keras  # noqa: PLC0415

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.train_s: list[float] = []
            self.epoch_s: list[float] = []
            self._start = 0.0
            self._in_epoch = False

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self._start = time.perf_counter()
            self._in_epoch = True

        def on_test_begin(self, logs: Any = None) -> None:
            if self._in_epoch and len(self.train_s) == len(self.epoch_s):
                self.train_s.append(time.perf_counter() - self._start)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            elapsed = time.perf_counter() - self._start
            if len(self.train_s) == len(self.epoch_s):  # no validation this epoch
                self.train_s.append(elapsed)
            self.epoch_s.append(elapsed)
            self._in_epoch = False

    return EpochTimer()


def train_steps_child(
    way: str,
    *,
    train_images: int,
    batch: int,
    steps_per_execution: int,
    steady_epochs: int = 2,
    seed: int = 0,
) -> dict[str, float]:
    """Train the seed CNN one of three ways in *this* process and time it (run it in a fresh one).

    ``way``: ``"tf_seed"`` (TensorFlow backend, ``fit`` on numpy with Keras' default compile, as
    the seed), ``"tf_course"`` (TensorFlow backend, ``tf.data`` with ``drop_remainder``,
    ``jit_compile=True``, ``steps_per_execution``), ``"jax"`` (JAX backend, ``fit`` on numpy,
    ``jit_compile=True``, ``steps_per_execution``). ``KERAS_BACKEND`` must already be set to match.
    Same stand-in data, batch, float32 and number of steps for all three. Returns first-epoch
    time (trace + compile + one epoch), steady step time, images/s and the final training loss.
    """
    import numpy as np  # noqa: PLC0415

    from utils import data  # noqa: PLC0415

    want = "jax" if way == "jax" else "tensorflow"
    import keras  # noqa: PLC0415

    if keras.config.backend() != want:
        raise KerasJaxSetupError(
            f"way {way!r} needs KERAS_BACKEND={want}, got {keras.config.backend()}"
        )
    from utils.keras import models  # noqa: PLC0415

    cifar = data.load_cifar10(source="standin", subset=train_images, normalize=True, seed=seed)
    x, y = drop_remainder(cifar.x_train, cifar.y_train, batch=batch)
    steps = len(x) // batch
    np.random.seed(seed)
    model = models.seed_cnn()
    rng = np.random.default_rng(seed)  # same initial weights for every way
    model.set_weights(
        [rng.normal(0, 0.05, w.shape).astype(np.float32) for w in model.get_weights()]
    )
    kwargs: dict[str, Any] = {}
    if way != "tf_seed":
        kwargs = {"jit_compile": True, "steps_per_execution": steps_per_execution}
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **kwargs,
    )
    if way == "tf_course":
        import tensorflow as tf  # noqa: PLC0415

        def dataset() -> Any:
            ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=seed)
            return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

        def fit(epochs: int) -> Any:
            return model.fit(dataset(), epochs=epochs, verbose=0)
    else:

        def fit(epochs: int) -> Any:
            return model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=True, verbose=0)

    start = time.perf_counter()
    fit(1)
    first_epoch_s = time.perf_counter() - start
    start = time.perf_counter()
    history = fit(steady_epochs)
    steady_s = time.perf_counter() - start
    step_s = steady_s / (steady_epochs * steps)
    return {
        "first_epoch_s": first_epoch_s,
        "compile_s": max(first_epoch_s - steps * step_s, 0.0),
        "step_s": step_s,
        "images_per_s": batch / step_s,
        "final_loss": float(history.history["loss"][-1]),
        "steps": float(steps * (1 + steady_epochs)),
    }
