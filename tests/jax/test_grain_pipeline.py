"""Tests for utils.jax.grain_pipeline: records round-trip, the slow source waits, augmentation
keeps the pixels when it neither crops nor flips, and Grain reads ArrayRecord shards of them."""

from __future__ import annotations

import time

import numpy as np
import pytest

from utils.jax import grain_pipeline as gp


def test_encode_decode_round_trip():
    images = np.random.default_rng(0).integers(0, 256, (5, 8, 8, 3), dtype=np.uint8)
    for i, image in enumerate(images):
        got = gp.decode(gp.encode(image, label=i + 3))
        assert np.array_equal(got["image"], image) and got["label"] == i + 3


def test_slow_source_waits_on_every_read():
    source = gp.SlowSource([b"a", b"b"], latency_s=0.02)
    start = time.perf_counter()
    assert [source[0], source[1]] == [b"a", b"b"] and len(source) == 2
    assert time.perf_counter() - start >= 0.04


def test_augment_full_box_without_flip_is_the_identity():
    """With the whole image as the box and no flip, the resize must give back the pixels."""

    class NoCropRng:
        def uniform(self, low=0.0, high=1.0, size=None):
            if low == 0.6:
                return np.ones(size)  # area 1
            if low < 0:  # log aspect: 0 -> aspect 1
                return np.zeros(size)
            return np.ones(size)  # offsets * 0, and "flip" draws 1.0 (not < 0.5)

    images = np.random.default_rng(1).integers(0, 256, (3, 6, 6, 3), dtype=np.uint8)
    out = gp.augment_batch({"image": images, "label": np.arange(3)}, NoCropRng())
    assert out["image"].dtype == np.uint8 and np.array_equal(out["image"], images)
    assert out["label"].dtype == np.int32


def test_grain_reads_array_record_shards(tmp_path):
    grain = pytest.importorskip("grain")
    writer_module = pytest.importorskip("array_record.python.array_record_module")
    images = np.random.default_rng(2).integers(0, 256, (12, 8, 8, 3), dtype=np.uint8)
    path = str(tmp_path / "train.array_record")
    writer = writer_module.ArrayRecordWriter(path, "group_size:1")
    for i, image in enumerate(images):
        writer.write(gp.encode(image, i))
    writer.close()
    source = grain.sources.ArrayRecordDataSource([path])
    ds = grain.MapDataset.source(source).seed(0).shuffle().map(gp.decode)
    got = sorted(ds, key=lambda r: r["label"])
    assert [r["label"] for r in got] == list(range(12))
    assert all(np.array_equal(r["image"], images[r["label"]]) for r in got)
