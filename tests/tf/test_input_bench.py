"""Tests for utils.tf.input_bench: tf.data decodes notebook 07's records as Grain does, and
augments a batch like ``utils.jax.grain_pipeline.augment_batch`` (shapes, range, labels)."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from utils.jax import grain_pipeline as gp  # noqa: E402
from utils.tf import input_bench as bp  # noqa: E402


def test_decode_reads_what_encode_wrote():
    images = np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    records = np.array([gp.encode(im, 7 + i) for i, im in enumerate(images)], dtype=object)
    ds = tf.data.Dataset.from_tensor_slices(records).map(bp.decode)
    for i, got in enumerate(ds):
        assert np.array_equal(got["image"].numpy(), images[i]) and int(got["label"]) == 7 + i


def test_augment_keeps_shape_range_and_labels():
    images = np.random.default_rng(1).integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
    batch = {"image": tf.constant(images), "label": tf.range(6)}
    out = tf.data.Dataset.from_tensors(batch).map(bp.augment).get_single_element()
    assert out["image"].shape == (6, 32, 32, 3) and out["image"].dtype == tf.float32
    assert 0.0 <= float(tf.reduce_min(out["image"])) and float(tf.reduce_max(out["image"])) <= 1.0
    assert out["label"].numpy().tolist() == list(range(6))
