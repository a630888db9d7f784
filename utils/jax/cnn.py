"""The seed's CIFAR-10 CNN in plain JAX, and a hand-written training step (imports JAX and optax).

No Flax, no Keras: parameters are a dict of arrays (a *pytree*), the model is a pure function
``apply(params, images) -> logits`` built from ``jax.lax`` primitives, and one training step is
``jax.value_and_grad`` of the loss followed by an optax (Adam) update, compiled with ``jax.jit``.
The layers are those of ``utils.keras.models.seed_cnn`` and ``utils.flops.seed_cnn_costs``:
Conv(32, 3x3, ReLU) -> MaxPool(2) -> Conv(64, 3x3, ReLU) -> MaxPool(2) -> Conv(64, 3x3, ReLU)
-> Flatten -> Dense(64, ReLU) -> Dense(10), NHWC input 32x32x3, 'valid' padding as Keras'.
Notebook 03 defines these functions in a runnable cell; ``tests/jax/test_jax_cnn.py`` keeps that
cell and this file identical. :func:`gradient_reduction_sizes` and :func:`sum_tolerance` give the
tolerance of a 1-vs-N devices comparison (notebooks 02 and 03).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "CONV_FILTERS",
    "DENSE_UNITS",
    "apply",
    "gradient_reduction_sizes",
    "init_params",
    "loss_fn",
    "make_train_step",
    "matmul_input_dtype",
    "sum_tolerance",
]

Params = dict[str, dict[str, jax.Array]]
CONV_FILTERS = (32, 64, 64)
DENSE_UNITS = (64, 10)


def glorot_uniform(key: jax.Array, shape: tuple[int, ...], fan_in: int, fan_out: int) -> jax.Array:
    """Keras' default kernel initializer: uniform in +-sqrt(6 / (fan_in + fan_out))."""
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    return jax.random.uniform(key, shape, jnp.float32, -limit, limit)


def init_params(key: jax.Array, num_classes: int = 10) -> Params:
    """Weights as Keras initialises them: Glorot-uniform kernels, zero biases (122,570 numbers)."""
    keys = jax.random.split(key, 5)
    params: Params = {}
    channels = 3
    for i, filters in enumerate(CONV_FILTERS):  # conv kernels are HWIO: (3, 3, in, out)
        shape = (3, 3, channels, filters)
        kernel = glorot_uniform(keys[i], shape, 9 * channels, 9 * filters)
        params[f"conv{i + 1}"] = {"w": kernel, "b": jnp.zeros(filters)}
        channels = filters
    features = 4 * 4 * channels  # 32 -conv-> 30 -pool-> 15 -conv-> 13 -pool-> 6 -conv-> 4
    for i, units in enumerate((DENSE_UNITS[0], num_classes)):
        kernel = glorot_uniform(keys[3 + i], (features, units), features, units)
        params[f"dense{i + 1}"] = {"w": kernel, "b": jnp.zeros(units)}
        features = units
    return params


def conv(x: jax.Array, layer: dict[str, jax.Array]) -> jax.Array:
    """3x3 'valid' convolution, stride 1, NHWC input and HWIO kernel, plus bias."""
    y = jax.lax.conv_general_dilated(
        x, layer["w"], window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )  # fmt: skip
    return y + layer["b"]


def max_pool(x: jax.Array) -> jax.Array:
    """2x2 max pooling, stride 2 ('valid': an odd last row/column is dropped, as in Keras)."""
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def apply(params: Params, images: jax.Array) -> jax.Array:
    """Logits ``(batch, 10)`` for float images ``(batch, 32, 32, 3)`` in [0, 1]."""
    x = max_pool(jax.nn.relu(conv(images, params["conv1"])))
    x = max_pool(jax.nn.relu(conv(x, params["conv2"])))
    x = jax.nn.relu(conv(x, params["conv3"]))
    x = x.reshape(x.shape[0], -1)  # Flatten
    x = jax.nn.relu(x @ params["dense1"]["w"] + params["dense1"]["b"])
    return x @ params["dense2"]["w"] + params["dense2"]["b"]


def loss_fn(params: Params, images: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy on integer labels (Keras' SparseCategoricalCrossentropy)."""
    logits = apply(params, images)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def make_train_step(optimizer: optax.GradientTransformation) -> Callable[..., Any]:
    """``step(params, opt_state, images, labels) -> (params, opt_state, loss)``; jit it yourself."""

    def train_step(params, opt_state, images, labels):
        loss, grads = jax.value_and_grad(loss_fn)(params, images, labels)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, loss

    return train_step


def gradient_reduction_sizes(batch: int) -> dict[str, int]:
    """How many products each layer's weight gradient sums: batch x output positions per image.

    A convolution's kernel gradient adds one term per image and per output pixel (30x30, 13x13,
    4x4 for the three convolutions), a dense layer's one per image.
    """
    return {
        "conv1": batch * 30 * 30,
        "conv2": batch * 13 * 13,
        "conv3": batch * 4 * 4,
        "dense1": batch,
        "dense2": batch,
    }


def sum_tolerance(n: int, dtype: str, scale: float, k: float = 4.0) -> float:
    """How far two sums of ``n`` terms in another order may drift: ``k * sqrt(n) * eps * scale``.

    Rounding errors of a sum grow like ``sqrt(n) * eps`` (the probabilistic bound, Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2nd ed., secs. 2.8, 4.2 and 4.5; the worst
    case is ``n * eps``), relative to the size of the terms (``scale``: the largest |gradient|
    of the layer). ``eps`` is that of the dtype the operands are multiplied in: float32 on a CPU or
    GPU, bfloat16 for float32 matmuls at a TPU's default precision. ``k = 4`` covers the spread.
    """
    return float(k * np.sqrt(n) * jnp.finfo(dtype).eps * scale)


def matmul_input_dtype(backend: str, precision: str | None = None) -> str:
    """The dtype a float32 matmul/convolution rounds its inputs to on ``backend``.

    A TPU at the default precision (``jax_default_matmul_precision`` unset, "default" or
    "bfloat16") multiplies float32 operands in one bfloat16 pass; a CPU computes in float32 and
    ignores the setting (checked by ``tests/jax/test_jax_data_parallel.py``).
    """
    if backend == "tpu" and precision in (None, "default", "bfloat16", "fastest"):
        return "bfloat16"
    return "float32"
