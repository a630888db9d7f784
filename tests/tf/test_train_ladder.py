"""Tests for utils.tf.train_ladder: the harness measures what it says (no timing asserted)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from utils import roofline  # noqa: E402
from utils.tf import train_ladder  # noqa: E402


def test_keras_models_match_the_cost_model() -> None:
    for channels, dense in (((32, 64, 64), 64), ((128, 256, 256), 256), ((128, 128, 128), 128)):
        model = train_ladder.cnn_variant(channels, dense)
        costs = roofline.cnn_costs(1, channels=channels, dense=dense)
        assert model.count_params() == roofline.parameter_count(costs)
        assert model.output_shape == (None, 10)


def test_rung_mfu_divides_by_the_peak_of_the_same_run() -> None:
    rung = train_ladder.Rung("r", images_per_s=100.0, flops_per_image=1e6, peak=1e9)
    assert rung.mfu == pytest.approx(0.1)
    other = train_ladder.Rung("r", images_per_s=100.0, flops_per_image=1e6, peak=2e9)
    assert other.mfu == pytest.approx(0.05)


def test_fit_timing_keeps_the_first_epoch_apart() -> None:
    t = train_ladder.FitTiming((5.0, 1.0, 2.0), images_per_epoch=100, steps_per_epoch=10)
    assert t.best_s == 1.0 and t.images_per_s == 100.0 and t.step_s == pytest.approx(0.1)
    assert train_ladder.FitTiming((3.0,), 30, 3).best_s == 3.0


def test_time_fit_and_host_step_run_real_fits() -> None:
    x = np.zeros((64, 32, 32, 3), np.float32)
    y = np.zeros((64,), np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16, drop_remainder=True)
    model = train_ladder._compile(train_ladder.tiny_model(), 2)
    t = train_ladder.time_fit(model, ds, steps_per_epoch=4, images_per_epoch=64, repeats=2)
    assert len(t.epoch_s) == 3 and math.isfinite(t.images_per_s) and t.images_per_s > 0
    host = train_ladder.host_step_s(
        ds, steps_per_execution=4, steps_per_epoch=4, images_per_epoch=64, repeats=1
    )
    assert host > 0
    with pytest.raises(ValueError):
        train_ladder.time_fit(model, ds, steps_per_epoch=4, images_per_epoch=64, repeats=0)
    with pytest.raises(ValueError, match="multiple"):  # spe=2 would run 4 steps per 3 counted
        train_ladder.time_fit(model, ds, steps_per_epoch=3, images_per_epoch=48, repeats=1)


def test_peak_and_bandwidth_are_positive_rates() -> None:
    assert train_ladder.matmul_peak("float32", n=128, repeats=1) > 0
    assert train_ladder.memory_bandwidth(1 << 20, repeats=1) > 0


def test_ladder_table_names_rungs_and_labels_predictions() -> None:
    pred = roofline.predict_step(
        roofline.cnn_costs(128, dtype_bytes=2), roofline.PUBLISHED["v5e"], batch=128, host_s=1e-3
    )
    rungs = [
        train_ladder.Rung("seed", 1000.0, 2.6e7, 3e10, pred),
        train_ladder.Rung("faster", 2000.0, 2.6e7, 3e10, pred, accuracy=0.5),
    ]
    table = train_ladder.ladder_table(rungs)
    assert "seed" in table and "2.00x" in table and "not measured" in table and "0.500" in table
