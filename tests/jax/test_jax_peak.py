"""The JAX matmul that MFU divides by: right product, a positive rate, bf16 honoured."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from utils.jax import peak  # noqa: E402


def test_matmul_runs_at_the_requested_dtype_and_the_peak_is_positive():
    fn = peak.matmul(64, "bfloat16")
    out = fn()
    assert out.shape == (64, 64) and str(out.dtype) == "bfloat16"
    rate = peak.matmul_peak(64, "float32", repeats=2)()
    assert rate > 0
