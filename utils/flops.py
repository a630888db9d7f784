"""Count the work (FLOPs) and the memory traffic (bytes) of neural-network layers.

Framework-free (plain arithmetic). Conventions, used everywhere in the course:

- One multiply-add (MAC) is **2 FLOPs**; a comparison (max pooling) or an addition is 1 FLOP.
- Bytes are the *minimum* traffic: every input, weight and output element read or written once
  (a perfect cache). Real kernels move more; the roofline uses this lower bound, so a layer's
  arithmetic intensity (FLOPs / bytes) is an upper bound.
- Convolutions are also described as the matrix multiplication that ``im2col`` turns them into:
  ``(M, K) @ (K, N)`` with ``M = batch * out_h * out_w``, ``K = kh * kw * in_channels`` and
  ``N = out_channels``. That is the shape a matrix unit (a TPU's MXU) sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LayerCost:
    """Work and traffic of one layer for one batch.

    ``matmul`` is the ``(M, K, N)`` matrix-multiplication shape of the layer (``None`` for layers
    that are not matrix multiplications, such as pooling).
    """

    name: str
    flops: int
    bytes: int
    output_shape: tuple[int, ...]
    matmul: tuple[int, int, int] | None = None

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOPs per byte."""
        return self.flops / self.bytes if self.bytes else math.inf


def _out_size(size: int, kernel: int, stride: int, padding: str) -> int:
    if padding not in ("valid", "same"):
        raise ValueError(f"padding must be 'valid' or 'same', got {padding!r}")
    return (size - kernel) // stride + 1 if padding == "valid" else -(-size // stride)


def _weighted(
    name: str, mkn: tuple[int, int, int], inputs: int, shape: tuple, bias: bool, dtype_bytes: int
) -> LayerCost:
    """A layer that is one ``(m, k) @ (k, n)`` over ``inputs`` input elements, ``+ bias``."""
    m, k, n = mkn
    weights = k * n + (n if bias else 0)
    flops = 2 * m * k * n + (m * n if bias else 0)
    return LayerCost(name, flops, dtype_bytes * (inputs + weights + m * n), shape, mkn)


def conv2d_cost(
    input_shape: tuple[int, int, int],
    filters: int,
    kernel: int | tuple[int, int],
    *,
    batch: int = 1,
    stride: int = 1,
    padding: str = "valid",
    bias: bool = True,
    dtype_bytes: int = 4,
    name: str = "conv2d",
) -> LayerCost:
    """A 2-D convolution on NHWC input ``(height, width, channels)``.

    FLOPs = 2 * outputs * (kh * kw * in_channels) (+ one addition per output for the bias).
    Bytes = input + weights (+ bias) + output, each once.
    """
    h, w, c = input_shape
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    oh, ow = _out_size(h, kh, stride, padding), _out_size(w, kw, stride, padding)
    mkn = (batch * oh * ow, kh * kw * c, filters)
    return _weighted(name, mkn, batch * h * w * c, (batch, oh, ow, filters), bias, dtype_bytes)


def dense_cost(
    in_features: int,
    units: int,
    *,
    batch: int = 1,
    bias: bool = True,
    dtype_bytes: int = 4,
    name: str = "dense",
) -> LayerCost:
    """A fully connected layer: ``(batch, in) @ (in, units)`` (+ bias)."""
    mkn = (batch, in_features, units)
    return _weighted(name, mkn, batch * in_features, (batch, units), bias, dtype_bytes)


def maxpool2d_cost(
    input_shape: tuple[int, int, int],
    pool: int = 2,
    *,
    batch: int = 1,
    dtype_bytes: int = 4,
    name: str = "maxpool2d",
) -> LayerCost:
    """Max pooling with a square window and stride = window ('valid' padding).

    Each output takes ``pool*pool - 1`` comparisons (counted as FLOPs).
    """
    h, w, c = input_shape
    oh, ow = h // pool, w // pool
    outputs = batch * oh * ow * c
    traffic = dtype_bytes * (batch * h * w * c + outputs)
    return LayerCost(name, outputs * (pool * pool - 1), traffic, (batch, oh, ow, c))


def elementwise_cost(
    elements: int,
    *,
    inputs: int = 1,
    flops_per_element: int = 1,
    dtype_bytes: int = 4,
    name: str = "elementwise",
) -> LayerCost:
    """An elementwise op (ReLU, add, ...): reads ``inputs`` arrays, writes one."""
    traffic = dtype_bytes * elements * (inputs + 1)
    return LayerCost(name, elements * flops_per_element, traffic, (elements,))


def seed_cnn_costs(
    batch: int = 1,
    *,
    dtype_bytes: int = 4,
    channels: tuple[int, int, int] = (32, 64, 64),
    dense: int = 64,
    num_classes: int = 10,
) -> list[LayerCost]:
    """Costs of the seed's CIFAR-10 CNN (``utils.keras.models.seed_cnn``), layer by layer.

    Conv2D(c1, 3x3, relu) -> MaxPool(2) -> Conv2D(c2, 3x3, relu) -> MaxPool(2) ->
    Conv2D(c3, 3x3, relu) -> Flatten -> Dense(dense, relu) -> Dense(num_classes), on 32x32x3
    inputs; the seed has ``channels=(32, 64, 64), dense=64``, other widths cost the same shape
    made wider (the course's one CNN cost function). ReLUs are fused into the layer before them
    (no separate traffic), as compilers do.
    """
    kw = {"batch": batch, "dtype_bytes": dtype_bytes}
    c1, c2, c3 = channels
    layers = [conv2d_cost((32, 32, 3), c1, 3, name="conv1", **kw)]
    layers.append(maxpool2d_cost(layers[-1].output_shape[1:], 2, name="pool1", **kw))
    layers.append(conv2d_cost(layers[-1].output_shape[1:], c2, 3, name="conv2", **kw))
    layers.append(maxpool2d_cost(layers[-1].output_shape[1:], 2, name="pool2", **kw))
    layers.append(conv2d_cost(layers[-1].output_shape[1:], c3, 3, name="conv3", **kw))
    flat = math.prod(layers[-1].output_shape[1:])
    layers.append(dense_cost(flat, dense, name="dense1", **kw))
    layers.append(dense_cost(dense, num_classes, name="dense2", **kw))
    return layers
