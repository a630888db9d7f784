"""Keras 3 on JAX, set up so that it cannot silently run somewhere else.

Framework-free (it never imports ``jax`` or ``keras``), so a notebook calls :func:`configure`
*before* Keras or JAX is imported, which is the only moment their settings can still take effect:

- ``KERAS_BACKEND`` is read once, when ``keras`` is first imported. If Keras is already loaded
  with another backend, only a kernel restart helps: :func:`configure` says so.
- ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (N simulated CPU devices, set through
  :mod:`utils.simulated_devices`, the one rule for them) is read once, when JAX starts its CPU
  backend. If JAX already sees another device count, :func:`check_devices` says so instead of
  letting the notebook run on one device while claiming eight.

Then, with JAX imported, :func:`check_devices`: the devices JAX sees agree with the runtime (a TPU
that JAX cannot see is an error, not a quiet CPU run).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

from utils import simulated_devices as simulated

__all__ = ["KerasJaxSetupError", "check_devices", "configure"]

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
        ValueError: ``simulated_devices`` breaks ``simulated_devices.check_count`` (1..64).
    """
    env = os.environ if env is None else env
    modules = sys.modules if modules is None else modules
    notes: list[str] = []
    if simulated_devices is not None:
        simulated.check_count(simulated_devices, "simulated_devices")

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

    return notes + _device_flags(simulated_devices, env, modules)


def _device_flags(
    simulated_devices: int | None, env: MutableMapping[str, str], modules: Mapping[str, Any]
) -> list[str]:
    """Ask for ``simulated_devices`` CPU devices, or drop a device-count flag; notes to print."""
    if simulated_devices is not None and simulated_devices > 1:
        try:  # one rule for simulated devices, shared with notebook 03
            simulated.request(simulated_devices, env=env, modules=modules)
        except simulated.JaxAlreadyImported:
            return [
                "jax was imported before XLA_FLAGS was set: the device count may not change; "
                "check_devices() will tell."
            ]
        return []
    flags = _DEVICE_FLAG_RE.sub("", env.get("XLA_FLAGS", "")).split()
    if flags:
        env["XLA_FLAGS"] = " ".join(flags)
    else:
        env.pop("XLA_FLAGS", None)
    return []


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
        devices: JAX's devices (default ``jax.devices()`` of the JAX this process
            already imported); tests pass fakes.
        tpu_label: how to name the TPU in messages (e.g. ``"v5e-1"``).

    Raises:
        KerasJaxSetupError: a TPU or GPU was detected but JAX sees only CPU devices, or JAX sees a
            different number of CPU devices than asked (it was imported before ``XLA_FLAGS``).
    """
    if devices is None:
        jax = sys.modules.get("jax")  # never imported here: this module stays framework-free
        if jax is None:
            raise KerasJaxSetupError("import jax (after configure()) before check_devices()")
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
