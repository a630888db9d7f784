"""Tests for utils.tf.tfrecords: exact round trips, exactly-once reading, loud failures."""

from __future__ import annotations

import json
import math
import os
from collections import Counter

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from utils.tf import tfrecords  # noqa: E402

N = 203  # not a multiple of the shard count: shards differ in size


@pytest.fixture(scope="module")
def arrays() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(N, 8, 8, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=N).astype(np.int64)
    return images, labels


@pytest.fixture()
def shards(tmp_path, arrays) -> str:
    tfrecords.write_shards(*arrays, tmp_path, num_shards=5)
    return os.fspath(tmp_path)


@pytest.mark.parametrize("parse_batches", [False, True])
def test_round_trip_is_exact(tmp_path, arrays, parse_batches):
    images, labels = arrays
    paths = tfrecords.write_shards(images, labels, tmp_path, num_shards=4)
    assert [os.path.basename(p) for p in paths] == [
        f"train-0000{i}-of-00004.tfrecord" for i in range(4)
    ]
    got_images, got_labels, got_index = tfrecords.read_arrays(
        tmp_path, parse_batches=parse_batches, batch_size=16, cycle_length=3, deterministic=False
    )
    np.testing.assert_array_equal(got_index, np.arange(N))
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


def test_deterministic_interleave_order_is_by_blocks_of_16(shards):
    manifest = tfrecords.load_manifest(shards)
    ds = tfrecords.read_dataset(manifest, batch_size=1, parse_batches=False, cycle_length=2)
    order = [int(ex["index"][0]) for ex in ds.take(17)]
    # Shard k holds indices k, k+5, k+10, ...: a block of 16 from shard 0, then shard 1.
    assert order == [5 * i for i in range(16)] + [1]


def test_sharding_by_host_splits_files(shards):
    manifest = tfrecords.load_manifest(shards)
    seen: Counter[int] = Counter()
    for host in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=host)
        ds = tfrecords.read_dataset(manifest, batch_size=8, input_context=ctx)
        seen.update(int(i) for batch in ds for i in batch["index"])
    assert seen == Counter(range(N))


def test_truncated_shard_fails_the_size_check_naming_the_file(shards):
    path = tfrecords.load_manifest(shards).files[0]
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) - 10)
    with pytest.raises(tfrecords.ShardError, match="train-00000-of-00005.tfrecord.*truncated"):
        tfrecords.read_arrays(shards)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_shard_fails_while_reading_naming_the_file(shards, damage):
    manifest = tfrecords.load_manifest(shards)
    path = manifest.files[2]
    with open(path, "r+b") as fh:
        if damage == "truncate":
            fh.truncate(os.path.getsize(path) - 10)
        else:  # one byte flipped inside a record's payload
            fh.seek(os.path.getsize(path) // 2)
            byte = fh.read(1)
            fh.seek(-1, os.SEEK_CUR)
            fh.write(bytes([byte[0] ^ 0xFF]))
    manifest["shards"][2]["bytes"] = os.path.getsize(path)  # the size check agrees: read anyway
    ds = tfrecords.read_dataset(manifest, batch_size=32)
    with pytest.raises(tfrecords.ShardError, match="train-00002-of-00005.tfrecord.*damaged"):
        list(tfrecords.iterate_checked(ds, manifest))


def test_failed_write_leaves_no_complete_looking_shard(tmp_path, arrays, monkeypatch):
    images, labels = arrays
    real_encode = tfrecords.encode_example
    calls = {"n": 0}

    def failing_encode(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 60:  # in the middle of shard 1 (shards of ~41 records)
            raise OSError("disk full (injected)")
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(tfrecords, "encode_example", failing_encode)
    with pytest.raises(OSError, match="injected"):
        tfrecords.write_shards(images, labels, tmp_path, num_shards=5)
    names = [n for n in os.listdir(tmp_path) if n.endswith(".tfrecord")]
    assert names == ["train-00000-of-00005.tfrecord"]  # the finished shard only
    with pytest.raises(tfrecords.ShardError, match="manifest.json not found"):
        tfrecords.load_manifest(tmp_path)


def test_rewrite_replaces_old_manifest(tmp_path, arrays):
    images, labels = arrays
    tfrecords.write_shards(images, labels, tmp_path, num_shards=3)
    tfrecords.write_shards(images[:10], labels[:10], tmp_path, num_shards=2)
    got_images, _, _ = tfrecords.read_arrays(tmp_path)
    np.testing.assert_array_equal(got_images, images[:10])


@pytest.mark.parametrize("text", ["{", "[]", "{}", '{"image_shape": [8, 8], "shards": []}'])
def test_malformed_manifest_is_a_shard_error(shards, text):
    with open(os.path.join(shards, tfrecords.MANIFEST), "w") as fh:
        fh.write(text)
    with pytest.raises(tfrecords.ShardError, match="malformed"):
        tfrecords.load_manifest(shards)


def test_manifest_lists_every_shard_with_its_size(shards):
    doc = json.loads(open(os.path.join(shards, tfrecords.MANIFEST)).read())
    assert sum(s["records"] for s in doc["shards"]) == N and doc["image_shape"] == [8, 8, 3]
    for s in doc["shards"]:
        assert os.path.getsize(os.path.join(shards, s["file"])) == s["bytes"]


@pytest.mark.parametrize(
    ("total_mb", "hosts", "cycle", "expected"),
    [
        (5, 1, 4, 4),  # tiny: as few as cycle_length allows
        (60, 1, 4, 6),  # 6 shards of 10 MB
        (1_000, 1, 4, 10),  # medium: ~10 per host (100 MB each)
        (2_000, 1, 4, 10),  # 10 of exactly 200 MB: the cap is not exceeded
        (10_000, 1, 4, 50),  # big: the 200 MB cap wins over ~10 per host
        (10_000, 4, 4, 52),  # ... rounded up to a multiple of the hosts
        (100, 8, 4, 32),  # many hosts: hosts x cycle_length wins
    ],
)
def test_recommended_num_shards(total_mb, hosts, cycle, expected):
    got = tfrecords.recommended_num_shards(total_mb * 2**20, hosts=hosts, cycle_length=cycle)
    assert got == expected


@pytest.mark.parametrize("hosts", [1, 4])
def test_recommended_shards_stay_within_the_size_bounds_for_a_big_data_set(hosts):
    total = 150 * 10**9  # an ImageNet-sized set
    n = tfrecords.recommended_num_shards(total, hosts=hosts)
    assert 10 * 2**20 <= total / n <= 200 * 2**20
    assert n == hosts * math.ceil(math.ceil(total / (200 * 2**20)) / hosts)  # no more than needed
