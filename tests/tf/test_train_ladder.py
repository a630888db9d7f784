"""utils.tf.train_ladder: the TensorFlow ladder's peaks and rungs (no timing asserted)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("tensorflow")

import numpy as np  # noqa: E402

from utils import flops, mfu, roofline  # noqa: E402
from utils.tf import train_ladder  # noqa: E402


def test_each_dtype_divides_by_its_own_matmul() -> None:
    ran = []

    def builder(n: int, dtype: str):
        def fn() -> None:
            ran.append(dtype)
            time.sleep(0.001)

        return fn

    measured = train_ladder.peaks(64, builder=builder)
    assert set(measured) == {"float32", "bfloat16"}
    for key, peak in measured.items():
        ran.clear()
        assert peak() > 0
        assert set(ran) == {key}, f"the {key} peak timed a {set(ran)} matmul"


def test_peaks_measure_the_tf_matmul_and_publish_on_a_tpu() -> None:
    small = train_ladder.peaks(128)
    assert all(fn() > 0 for fn in small.values())
    tpu = train_ladder.peaks(tpu_generation="v5e", chips=4)
    assert tpu["float32"]() == tpu["bfloat16"]() == mfu.peak_flops(tpu_generation="v5e", chips=4)


def test_matmul_runs_at_the_asked_dtype() -> None:
    out = train_ladder.matmul(8, "bfloat16")()
    assert out.shape == (8, 8) and "bfloat16" in str(out.dtype)


def test_ladder_rungs_match_the_cost_model() -> None:
    x = np.zeros((300, 32, 32, 3), np.float32)
    y = np.zeros(300, np.int32)
    rungs = train_ladder.ladder_rungs(x, y, batch=32, steps_per_execution=2)
    assert len(rungs) == 6
    for r in rungs:
        c1, c2, c3, dense = r.spec.widths
        costs = flops.seed_cnn_costs(1, channels=(c1, c2, c3), dense=dense)
        assert r.model.count_params() == roofline.parameter_count(costs)
    assert [r.images for r in rungs] == [300] + [256] * 5
