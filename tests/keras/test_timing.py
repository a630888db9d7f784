"""utils.keras.timing: the one Keras epoch timer and its stated steady-epoch statistic."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from utils.keras import timing  # noqa: E402


def test_steady_epochs_are_the_median_of_epochs_after_the_first() -> None:
    # Mean and median differ here (one slow steady epoch): the stated statistic is the median.
    assert timing.steady((10.0, 1.0, 1.0, 7.0)) == 1.0
    assert timing.steady((4.0,)) == 4.0
    summary = timing.EpochTiming((10.0, 1.0, 1.0, 7.0), images_per_epoch=100)
    assert summary.steady_epoch_s == 1.0 and summary.compile_overhead_s == 9.0
    with pytest.raises(ValueError):
        timing.steady(())


def test_train_time_stops_where_validation_starts() -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = timing.EpochTimer(images_per_epoch=32)
    x, y = np.ones((32, 4)), np.zeros(32)
    model.fit(x, y, epochs=2, batch_size=8, verbose=0, validation_data=(x, y), callbacks=[timer])
    assert len(timer.train_s) == len(timer.epoch_s) == 2
    assert all(0 < t <= e for t, e in zip(timer.train_s, timer.epoch_s, strict=True))
    assert timer.summary().epoch_s == tuple(timer.epoch_s)
