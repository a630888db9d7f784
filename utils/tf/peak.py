"""The matmul that MFU divides by, built with TensorFlow: a ``tf.function`` at the training's dtype.

``utils.mfu.measured_peak`` times it (the one way the course measures a peak); this module only
builds the operation, through the same framework and compile path as the training it is
compared with: ``jit_compile=False`` for Keras' ``fit`` on a CPU (Keras' ``"auto"`` leaves XLA
off there) and for a plain ``tf.function`` loop, ``jit_compile=True`` for an XLA-compiled step.
On a TPU the course divides by the published peak (``utils.mfu.peak_flops``) instead.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from utils.mfu import measured_peak


def matmul(
    n: int = 1024, dtype: str = "float32", *, jit_compile: bool = False
) -> Callable[[], object]:
    """A zero-argument callable doing one ``(n, n) @ (n, n)`` at ``dtype`` and waiting for it.

    The product runs inside a ``tf.function`` (``jit_compile`` as the training compiles); the
    product is summed to one number (n^2 additions against 2 n^3 FLOPs: nothing for a compiler to
    skip, almost nothing extra) and fetched, so the call returns only once the work is done.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    a = tf.cast(tf.random.stateless_uniform((n, n), seed=(0, 1), minval=-1.0, maxval=1.0), dtype)
    b = tf.cast(tf.random.stateless_uniform((n, n), seed=(2, 3), minval=-1.0, maxval=1.0), dtype)

    @tf.function(jit_compile=jit_compile)
    def product(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.cast(tf.linalg.matmul(x, y), tf.float32))

    return lambda: product(a, b).numpy()


def matmul_peak(
    n: int = 1024, dtype: str = "float32", *, jit_compile: bool = False, repeats: int = 3
) -> Callable[[], float]:
    """A callable measuring that matmul's FLOP/s now: pass it to ``compare(peaks=...)``."""
    fn = matmul(n, dtype, jit_compile=jit_compile)
    return lambda: measured_peak(fn, n, repeats=repeats)
