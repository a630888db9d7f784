"""The matmul that MFU divides by, built with JAX: jitted, at the training's dtype, on its device.

``utils.mfu.measured_peak`` times it (the one way the course measures a peak); this module only
builds the operation, so the peak goes through the same framework and compile path (XLA) as a
JAX or Keras-on-JAX training step.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from utils.mfu import measured_peak


def matmul(n: int = 1024, dtype: str = "float32") -> Callable[[], object]:
    """A zero-argument callable doing one jitted ``(n, n) @ (n, n)`` at ``dtype`` and waiting."""
    key_a, key_b = jax.random.split(jax.random.key(0))
    a = jax.random.normal(key_a, (n, n), dtype=dtype)
    b = jax.random.normal(key_b, (n, n), dtype=dtype)
    product = jax.jit(jnp.matmul)
    return lambda: product(a, b).block_until_ready()


def matmul_peak(n: int = 1024, dtype: str = "float32", repeats: int = 3) -> Callable[[], float]:
    """A callable measuring that matmul's FLOP/s now: pass it to ``compare(peaks=...)``."""
    fn = matmul(n, dtype)
    return lambda: measured_peak(fn, n, repeats=repeats)
