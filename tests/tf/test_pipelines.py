"""Tests for utils.tf.pipelines: shapes, dtypes, value range, and exactly-once epochs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from utils.tf import pipelines  # noqa: E402

N = 300  # not a multiple of the batch size, so the last partial batch matters
BATCH = 64


@pytest.fixture(scope="module")
def arrays() -> tuple[np.ndarray, np.ndarray]:
    """Random uint8 images; every image is unique, labels are its index (to track each one)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(N, 32, 32, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = 0  # pixel 0 of image i is not random: it makes every image unique
    images[:, 0, 0, 1] = np.arange(N) % 256
    images[:, 0, 0, 2] = np.arange(N) // 256
    return images, np.arange(N, dtype=np.int64)


def _epoch(ds: tf.data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds], strict=True)
    return np.concatenate(xs), np.concatenate(ys)


def test_training_spec_is_static_float_in_unit_range(arrays):
    images, labels = arrays
    ds = pipelines.make_dataset(images, labels, batch_size=BATCH, training=True)
    x_spec, y_spec = ds.element_spec
    assert x_spec.shape.as_list() == [BATCH, 32, 32, 3]  # static batch dim (drop_remainder)
    assert x_spec.dtype == tf.float32
    assert y_spec.shape.as_list() == [BATCH]
    assert y_spec.dtype == tf.int32
    x, y = _epoch(ds)
    assert len(y) == (N // BATCH) * BATCH
    assert x.min() >= 0.0 and x.max() <= 1.0
    assert x.max() > 0.9  # scaled, not all zeros


def test_eval_keeps_order_and_every_example(arrays):
    images, labels = arrays
    ds = pipelines.make_dataset(images, labels, batch_size=BATCH, training=False)
    assert ds.element_spec[0].shape.as_list() == [None, 32, 32, 3]
    x, y = _epoch(ds)
    np.testing.assert_array_equal(y, labels)
    np.testing.assert_allclose(x, images.astype(np.float32) / 255.0, rtol=1e-6)


def test_training_epoch_is_a_permutation(arrays):
    images, labels = arrays
    ds = pipelines.make_dataset(
        images, labels, batch_size=BATCH, training=True, drop_remainder=False
    )
    first_x, first_y = _epoch(ds)
    second_x, second_y = _epoch(ds)
    for x, y in ((first_x, first_y), (second_x, second_y)):
        assert Counter(y.tolist()) == Counter(labels.tolist())  # each example exactly once
        np.testing.assert_allclose(x, images[y].astype(np.float32) / 255.0, rtol=1e-6)
    assert not np.array_equal(first_y, labels)  # shuffled ...
    assert not np.array_equal(first_y, second_y)  # ... differently each epoch


def test_seed_preprocess_resizes_to_224():
    image = tf.fill([32, 32, 3], tf.constant(255, tf.uint8))
    out, label = pipelines.seed_preprocess(image, tf.constant(3))
    assert out.shape == (224, 224, 3) and out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), 1.0)
    assert int(label) == 3


def test_options_deterministic_only_for_evaluation(arrays):
    images, labels = arrays
    for training in (True, False):
        ds = pipelines.make_dataset(images, labels, batch_size=8, training=training)
        assert ds.options().deterministic is not training
        assert ds.options().autotune.enabled is True


def test_bad_labels_raise(arrays):
    images, labels = arrays
    with pytest.raises(ValueError, match="labels"):
        pipelines.make_dataset(images, labels[:-1], batch_size=8, training=True)
