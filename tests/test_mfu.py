from __future__ import annotations

import pytest

from utils import flops, mfu


def test_training_flops_counts_backward_per_layer_and_skips_first_input_gradient() -> None:
    conv = flops.conv2d_cost((8, 8, 3), 4, 3, batch=2)
    pool = flops.maxpool2d_cost(conv.output_shape[1:], 2, batch=2)
    dense = flops.dense_cost(4 * 3 * 3, 5, batch=2)
    total = mfu.training_flops([conv, pool, dense])
    assert total == 2 * conv.flops + 2 * pool.flops + 3 * dense.flops
    assert total != 3 * (conv.flops + pool.flops + dense.flops)


def test_mfu_and_peaks() -> None:
    assert mfu.peak_flops(tpu_generation="v5e", chips=8) == pytest.approx(8 * 197e12)
    assert mfu.mfu(1e9, 0.01, 200e9) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="v9"):
        mfu.peak_flops(tpu_generation="v9")
    with pytest.raises(ValueError, match="known: v2"):
        mfu.peak_flops(tpu_generation="v5e", chips=0)
    with pytest.raises(ValueError):
        mfu.mfu(1e9, 0.0, 1e9)


def test_published_peaks_per_generation() -> None:
    """Each generation's own figure (Cloud TPU docs); a swap between two of them fails here."""
    assert mfu.PUBLISHED_PEAK_TFLOPS == {
        "v2": 46.0,
        "v3": 123.0,
        "v4": 275.0,
        "v5e": 197.0,
        "v5p": 459.0,
        "v6e": 918.0,
        "tpu7x": 2307.0,
    }
    assert mfu.peak_flops(tpu_generation="v6e", chips=2) == 2 * 918e12
    assert mfu.peak_flops(tpu_generation="V5P") == 459e12


def test_choose_peaks_publishes_on_a_tpu_and_measures_elsewhere() -> None:
    """The one choice of the peak: a TPU's published figure x chips for every dtype (a float32
    matmul runs through the bf16 MXU), anywhere else the measurement ``measure(dtype)`` builds."""
    built = []

    def measure(dtype: str):
        built.append(dtype)
        return lambda: 1e9

    tpu = mfu.choose_peaks(measure, tpu_generation="v5e", chips=8)
    assert {k: f() for k, f in tpu.items()} == {"float32": 8 * 197e12, "bfloat16": 8 * 197e12}
    assert built == []  # nothing measured on a TPU with a published figure
    cpu = mfu.choose_peaks(measure, tpu_generation=None)
    assert {k: f() for k, f in cpu.items()} == {"float32": 1e9, "bfloat16": 1e9}
    assert mfu.choose_peaks(measure, tpu_generation="v99")["float32"]() == 1e9  # unknown: measure
    assert built == ["float32", "bfloat16"] * 2
