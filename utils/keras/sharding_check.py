"""Notebook 02's exercise, judged on simulated devices in a fresh process (imports Keras).

On a runtime with one device (Colab's v5e-1) a sharding has nothing to split, so notebook 02's check
sends the learner's choice to a fresh CPU process with 8 simulated devices and judges it there:

* :func:`describe`: a distribution as JSON: its mesh's axis names, its batch axis and its layout map
  (pattern -> axes);
* :func:`check_child`: in *this* process (JAX backend, simulated CPU devices), one float32 SGD step
  of the seed CNN under data parallelism and under the described distribution, from the same
  weights: which dense kernels are split, the largest weight difference and the tolerance of
  notebook 02's Appendix A;
* :func:`check_in_fresh_process`: runs :func:`check_child` in a fresh process
  (:mod:`utils.fresh_process`).

The mesh there gives every axis but the batch axis 2 devices (the exercise's "split in two") and the
batch axis the rest.
"""

from __future__ import annotations

import json
from typing import Any

import keras
import numpy as np

from utils import data, fresh_process, simulated_devices
from utils.keras import models

__all__ = [
    "check_child",
    "check_in_fresh_process",
    "check_spec_in_fresh_process",
    "describe",
    "mesh_shape",
]


def describe(distribution: Any) -> dict[str, Any]:
    """A Keras distribution as JSON: mesh axis names, batch axis, layout map (pattern -> axes)."""
    layout_map = getattr(distribution, "_layout_map", None)
    layouts = {}
    if layout_map is not None:
        layouts = {pattern: list(layout_map[pattern].axes) for pattern in layout_map}
    return {
        "axis_names": list(distribution.device_mesh.axis_names),
        "batch_dim_name": distribution.batch_dim_name,
        "layouts": layouts,
    }


def mesh_shape(spec: dict[str, Any], devices: int) -> tuple[int, ...]:
    """2 devices on every axis but the batch axis, the rest on the batch axis."""
    names = spec["axis_names"]
    others = 2 ** (len(names) - 1) if spec["batch_dim_name"] in names else 2 ** len(names)
    if devices % others:
        raise ValueError(f"{devices} devices do not split into {names} with 2 per non-batch axis")
    return tuple(devices // others if n == spec["batch_dim_name"] else 2 for n in names)


def _distribution(spec: dict[str, Any], devices: list[Any]) -> Any:
    if not spec["layouts"]:
        return keras.distribution.DataParallel(devices=devices)
    mesh = keras.distribution.DeviceMesh(
        mesh_shape(spec, len(devices)), spec["axis_names"], devices
    )
    layout_map = keras.distribution.LayoutMap(mesh)
    for pattern, axes in spec["layouts"].items():
        layout_map[pattern] = tuple(axes)
    return keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name=spec["batch_dim_name"]
    )


def check_child(
    spec: dict[str, Any],
    *,
    per_replica_batch: int = 32,
    learning_rate: float = 0.01,
    seed: int = 0,
) -> dict[str, Any]:
    """One SGD step under data parallelism and under ``spec`` here; the exercise's numbers."""
    import jax

    devices = jax.devices()
    batch = per_replica_batch * len(devices)
    cifar = data.load_cifar10(source="standin", subset=batch, normalize=True, seed=seed)
    x, y = cifar.x_train[:batch], cifar.y_train[:batch]
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(seed)
    initial = models.seed_cnn().get_weights()

    def train(distribution: Any) -> Any:
        keras.distribution.set_distribution(distribution)
        model = models.seed_cnn()
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=True,
        )
        model.set_weights(initial)
        with jax.default_matmul_precision("highest"):
            model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
        return model

    reference = [
        np.asarray(w) for w in train(keras.distribution.DataParallel(devices=devices)).get_weights()
    ]
    learner = train(_distribution(spec, devices))
    kernels = [w for w in learner.weights if len(w.shape) == 2]
    split = [w.path for w in kernels if w.value.addressable_shards[0].data.shape != tuple(w.shape)]

    def largest(a: list[np.ndarray], b: list[np.ndarray]) -> float:
        return max(float(np.max(np.abs(p - q))) for p, q in zip(a, b, strict=True))

    eps = float(np.finfo(np.float32).eps)
    moved = largest(reference, initial)
    largest_weight = max(float(np.max(np.abs(w))) for w in reference)
    tolerance = 4 * np.sqrt(batch * 30 * 30) * eps * moved + eps * largest_weight  # Appendix A
    return {
        "devices": len(devices),
        "mesh_shape": list(mesh_shape(spec, len(devices))) if spec["layouts"] else [len(devices)],
        "split": split,
        "kernels": len(kernels),
        "diff": largest([np.asarray(w) for w in learner.get_weights()], reference),
        "tolerance": float(tolerance),
    }


def check_in_fresh_process(
    distribution: Any, *, devices: int = 8, timeout_s: float = 600.0
) -> dict[str, Any]:
    """:func:`check_child` for ``distribution`` in a fresh CPU process with ``devices`` devices."""
    return check_spec_in_fresh_process(describe(distribution), devices=devices, timeout_s=timeout_s)


def check_spec_in_fresh_process(
    spec: dict[str, Any], *, devices: int = 8, timeout_s: float = 600.0
) -> dict[str, Any]:
    """:func:`check_child` for a :func:`describe` result, in a fresh CPU process."""
    code = (
        "import json; from utils.keras import sharding_check; print('RESULT ' + json.dumps("
        f"sharding_check.check_child(json.loads({json.dumps(spec)!r}))))"
    )
    env = {
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": simulated_devices.child_flags(devices),  # with patient collectives
        "JAX_PLATFORMS": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
    }
    return fresh_process.run_python_json(code, env=env, timeout_s=timeout_s)
