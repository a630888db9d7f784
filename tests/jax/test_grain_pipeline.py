"""Tests for utils.jax.grain_pipeline: reads the TFRecord shards exactly, augments like tf.data."""

from __future__ import annotations

import numpy as np
import pytest

gp = pytest.importorskip("utils.jax.grain_pipeline", exc_type=ImportError)
tf = pytest.importorskip("tensorflow")

from utils.tf import tfrecords  # noqa: E402


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(40, 8, 8, 3), dtype=np.uint8)
    labels = np.arange(40) % 10
    out = tmp_path_factory.mktemp("shards")
    tfrecords.write_shards(images, labels, out, num_shards=4)
    return out, images, labels


def test_source_and_decode_give_back_exactly_what_was_written(shards):
    out, images, labels = shards
    source = gp.TFRecordSource(out)
    assert len(source) == 40
    got = [gp.decode(source[i]) for i in range(len(source))]
    order = np.array([g["index"] for g in got])
    assert sorted(order.tolist()) == list(range(40))
    for g in got:
        assert np.array_equal(g["image"], images[g["index"]]) and g["label"] == labels[g["index"]]


def test_load_decoded_reads_every_record_once_in_order(shards):
    out, images, labels = shards
    got = gp.load_decoded(gp.TFRecordSource(out), threads=4)
    order = got["index"]
    assert sorted(order.tolist()) == list(range(40))
    assert np.array_equal(got["image"], images[order])
    assert np.array_equal(got["label"], labels[order])


def test_truncated_shard_is_named(shards, tmp_path):
    out, _, _ = shards
    path = sorted(out.glob("*.tfrecord"))[0]
    broken = tmp_path / path.name
    broken.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(ValueError, match="truncated"):
        gp.tfrecord_index(broken)


def test_augment_full_box_without_flip_is_the_identity():
    """With the whole image as the box and no flip, the resize must give back the pixels."""

    class NoCropRng:
        def uniform(self, low=0.0, high=1.0, size=None):
            n = size
            if low == 0.6 or (high == 1.0 and low not in (0.0,)):
                return np.ones(n)  # area 1
            if low < 0:  # log aspect: 0 -> aspect 1
                return np.zeros(n)
            return np.ones(n)  # offsets * 0, and "flip" draws 1.0 (not < 0.5)

    images = np.random.default_rng(1).integers(0, 256, (3, 6, 6, 3), dtype=np.uint8)
    batch = {"image": images, "label": np.arange(3), "index": np.arange(3)}
    out = gp.augment_batch(batch, NoCropRng())
    np.testing.assert_allclose(out["image"], images / 255.0, atol=1e-6)
