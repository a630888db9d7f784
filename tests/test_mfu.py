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
    assert mfu.peak_flops(measured_flops=150e9) == 150e9
    assert mfu.mfu(1e9, 0.01, 200e9) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="v9"):
        mfu.peak_flops(tpu_generation="v9")
    with pytest.raises(ValueError, match="measured_flops"):
        mfu.peak_flops()
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
