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


@pytest.mark.parametrize("shuffle_buffer", [None, 7])
def test_training_epoch_is_a_permutation(arrays, shuffle_buffer):
    images, labels = arrays
    ds = pipelines.make_dataset(
        images,
        labels,
        batch_size=BATCH,
        training=True,
        drop_remainder=False,
        shuffle_buffer=shuffle_buffer,
    )
    first_x, first_y = _epoch(ds)
    second_x, second_y = _epoch(ds)
    for x, y in ((first_x, first_y), (second_x, second_y)):
        assert Counter(y.tolist()) == Counter(labels.tolist())  # each example exactly once
        np.testing.assert_allclose(x, images[y].astype(np.float32) / 255.0, rtol=1e-6)
    assert not np.array_equal(first_y, labels)  # shuffled ...
    assert not np.array_equal(first_y, second_y)  # ... differently each epoch


def test_augmented_images_are_flips_and_crops_of_their_source(arrays):
    images, labels = arrays
    ds = pipelines.make_dataset(
        images, labels, batch_size=BATCH, training=True, augment=True, drop_remainder=False
    )
    x, y = _epoch(ds)
    assert Counter(y.tolist()) == Counter(labels.tolist())
    pad = pipelines.CROP_PADDING
    changed = 0
    for out, idx in zip(x[:40], y[:40], strict=True):
        out = np.rint(out * 255.0).astype(np.uint8)  # back to the source's exact values
        src = np.pad(images[idx], [(pad, pad), (pad, pad), (0, 0)])
        candidates = [
            view[r : r + 32, c : c + 32]
            for view in (src, src[:, ::-1])
            for r in range(2 * pad + 1)
            for c in range(2 * pad + 1)
        ]
        assert any(np.array_equal(out, cand) for cand in candidates), f"example {idx}"
        changed += not np.array_equal(out, images[idx])
    assert changed > 20  # most images were actually moved or flipped


def test_augment_batch_is_a_function_of_its_seed(arrays):
    batch = tf.constant(arrays[0][:16])
    seed = tf.constant([1, 2], dtype=tf.int64)
    a = pipelines.augment_batch(batch, seed).numpy()
    b = pipelines.augment_batch(batch, seed).numpy()
    c = pipelines.augment_batch(batch, tf.constant([3, 4], dtype=tf.int64)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.uint8 and a.shape == (16, 32, 32, 3)


def test_seed_preprocess_resizes_to_224():
    image = tf.fill([32, 32, 3], tf.constant(255, tf.uint8))
    out, label = pipelines.seed_preprocess(image, tf.constant(3))
    assert out.shape == (224, 224, 3) and out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), 1.0)
    assert int(label) == 3


def test_options_deterministic_only_for_evaluation():
    assert pipelines.pipeline_options(training=True).deterministic is False
    assert pipelines.pipeline_options(training=False).deterministic is True
    assert pipelines.pipeline_options(training=True).autotune.enabled is True


def test_bad_arguments_raise(arrays):
    images, labels = arrays
    with pytest.raises(ValueError, match="labels"):
        pipelines.make_dataset(images, labels[:-1], batch_size=8, training=True)
    with pytest.raises(ValueError, match="augment"):
        pipelines.make_dataset(images, labels, batch_size=8, training=False, augment=True)
    with pytest.raises(ValueError, match="images"):
        pipelines.make_dataset(images[0], labels[:1], batch_size=8, training=True)
