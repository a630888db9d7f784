"""Tests for utils.tf.tfrecords: exact round trips, exactly-once reading, loud failures."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
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


@pytest.mark.parametrize("encoding", ["png", "raw"])
@pytest.mark.parametrize("parse", ["single", "batch"])
def test_round_trip_is_exact(tmp_path, arrays, encoding, parse):
    images, labels = arrays
    paths = tfrecords.write_shards(images, labels, tmp_path, num_shards=4, encoding=encoding)
    assert [os.path.basename(p) for p in paths] == [
        f"train-0000{i}-of-00004.tfrecord" for i in range(4)
    ]
    got_images, got_labels, got_index = tfrecords.read_arrays(
        tmp_path, parse=parse, batch_size=16, cycle_length=3, block_length=5
    )
    np.testing.assert_array_equal(got_index, np.arange(N))
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


@pytest.mark.parametrize("deterministic", [True, False])
def test_interleaved_reading_covers_every_record_once(shards, deterministic):
    manifest = tfrecords.load_manifest(shards)
    assert sum(manifest.counts) == N and len(manifest.files) == 5
    ds = tfrecords.read_dataset(
        manifest,
        parse="single",
        cycle_length=2,
        block_length=3,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    seen = Counter(int(ex["index"]) for ex in ds)
    assert seen == Counter(range(N))


def test_deterministic_interleave_order_is_by_blocks(shards):
    manifest = tfrecords.load_manifest(shards)
    ds = tfrecords.read_dataset(manifest, parse="single", cycle_length=2, block_length=3)
    order = [int(ex["index"]) for ex in ds.take(9)]
    # Shard k holds indices k, k+5, k+10, ...: blocks of 3 from shard 0, then shard 1, then 0.
    assert order == [0, 5, 10, 1, 6, 11, 15, 20, 25]


def test_sharding_by_host_splits_files(shards):
    manifest = tfrecords.load_manifest(shards)
    seen: Counter[int] = Counter()
    for host in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=host)
        ds = tfrecords.read_dataset(manifest, parse="single", input_context=ctx)
        seen.update(int(ex["index"]) for ex in ds)
    assert seen == Counter(range(N))


def _first_shard(data_dir: str) -> str:
    return tfrecords.load_manifest(data_dir).files[0]


def test_truncated_shard_fails_the_size_check_naming_the_file(shards):
    path = _first_shard(shards)
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) - 10)
    with pytest.raises(tfrecords.ShardError, match="train-00000-of-00005.tfrecord.*truncated"):
        tfrecords.read_arrays(shards)


def test_truncated_shard_read_directly_names_the_file(shards):
    path = _first_shard(shards)
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) - 10)
    with pytest.raises(tfrecords.ShardError, match="train-00000-of-00005.tfrecord.*damaged"):
        tfrecords.verify_shard(path)


def test_corrupted_shard_fails_while_reading_naming_the_file(shards):
    manifest = tfrecords.load_manifest(shards)
    path = manifest.files[2]
    with open(path, "r+b") as fh:  # same size, one byte flipped inside a record's payload
        fh.seek(os.path.getsize(path) // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(tfrecords.ShardError, match="train-00002-of-00005.tfrecord.*damaged"):
        tfrecords.read_arrays(shards)


def test_shard_cut_at_a_record_boundary_is_not_a_short_epoch(shards, arrays):
    """A shard replaced by a shorter but valid one: sizes updated, counts still checked."""
    manifest = tfrecords.load_manifest(shards)
    path = manifest.files[1]
    records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    with tf.io.TFRecordWriter(path) as writer:
        for record in records[:-1]:
            writer.write(record)
    manifest["shards"][1]["bytes"] = os.path.getsize(path)  # fool the size check
    ds = tfrecords.read_dataset(manifest, batch_size=32)
    with pytest.raises(tfrecords.ShardError, match="train-00001-of-00005.tfrecord.*holds"):
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
    names = sorted(os.listdir(tmp_path))
    assert names == ["train-00000-of-00005.tfrecord"]  # the finished shard only: no tmp file
    assert tfrecords.MANIFEST not in names
    with pytest.raises(tfrecords.ShardError, match="manifest.json not found"):
        tfrecords.load_manifest(tmp_path)


def test_rewrite_replaces_old_manifest(tmp_path, arrays):
    images, labels = arrays
    tfrecords.write_shards(images, labels, tmp_path, num_shards=3)
    tfrecords.write_shards(images[:10], labels[:10], tmp_path, num_shards=2)
    got_images, _, _ = tfrecords.read_arrays(tmp_path)
    np.testing.assert_array_equal(got_images, images[:10])


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
    assert got % hosts == 0


@pytest.mark.parametrize("hosts", [1, 4])
def test_recommended_shards_stay_within_the_size_bounds_for_a_big_data_set(hosts):
    total = 150 * 10**9  # an ImageNet-sized set
    n = tfrecords.recommended_num_shards(total, hosts=hosts)
    assert 10 * 2**20 <= total / n <= 200 * 2**20
    assert n % hosts == 0
    assert n == hosts * math.ceil(math.ceil(total / (200 * 2**20)) / hosts)  # no more than needed


def test_recommended_num_shards_rejects_a_cap_below_the_floor():
    with pytest.raises(ValueError, match="min_shard_bytes <= max_shard_bytes"):
        tfrecords.recommended_num_shards(10**9, min_shard_bytes=2**20, max_shard_bytes=2**19)


# --------------------------------------------------------------------------------------------
# Issue 16: litter of killed writers, superseded shards, malformed manifests
# --------------------------------------------------------------------------------------------


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(proc.stdout)


def test_stale_temporaries_of_killed_writers_are_cleaned(tmp_path, arrays):
    """Before: a killed writer's .tmp-PID file stayed forever."""
    images, labels = arrays
    dead = _dead_pid()
    stale = [f"train-00001-of-00003.tfrecord.tmp-{dead}", f"{tfrecords.MANIFEST}.tmp-{dead}"]
    live = f"train-00002-of-00003.tfrecord.tmp-{os.getppid()}"  # a running writer's
    foreign = f"notes.txt.tmp-{dead}"  # not ours: left alone
    for name in [*stale, live, foreign]:
        (tmp_path / name).write_bytes(b"partial")
    tfrecords.write_shards(images, labels, tmp_path, num_shards=3)
    names = set(os.listdir(tmp_path))
    assert not names & set(stale)
    assert live in names and foreign in names
    np.testing.assert_array_equal(tfrecords.read_arrays(tmp_path)[0], images)


def test_rewrite_with_fewer_shards_removes_the_superseded_ones(tmp_path, arrays):
    """Before: the old 5 shards stayed next to the new 2, and a train-* glob read both."""
    images, labels = arrays
    tfrecords.write_shards(images, labels, tmp_path, num_shards=5)
    (tmp_path / "train-notes.txt").write_text("a user's file, not a shard")
    tfrecords.write_shards(images[:10], labels[:10], tmp_path, num_shards=2)
    glob = sorted(p.name for p in tmp_path.glob("train-*.tfrecord"))
    assert glob == ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert (tmp_path / "train-notes.txt").exists()
    # Another prefix in the same folder is another data set: untouched.
    tfrecords.write_shards(images[:4], labels[:4], tmp_path / "x", num_shards=1, prefix="test")
    tfrecords.write_shards(images[:4], labels[:4], tmp_path / "x", num_shards=2, prefix="train")
    assert (tmp_path / "x" / "test-00000-of-00001.tfrecord").exists()


def test_failed_rewrite_keeps_nothing_half_new(tmp_path, arrays, monkeypatch):
    """The superseded shards go only after a successful write (the manifest is gone before)."""
    images, labels = arrays
    tfrecords.write_shards(images, labels, tmp_path, num_shards=5)

    def boom(*args, **kwargs):
        raise OSError("disk full (injected)")

    monkeypatch.setattr(tfrecords, "encode_example", boom)
    with pytest.raises(OSError, match="injected"):
        tfrecords.write_shards(images, labels, tmp_path, num_shards=2)
    assert len(list(tmp_path.glob("train-*-of-00005.tfrecord"))) == 5  # not deleted early
    assert tfrecords.MANIFEST not in os.listdir(tmp_path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a JSON object"),
        ("{}", "missing encoding, image_shape, shards"),
        (None, "shards[0].records"),
        ("file:../../etc/passwd", "is not a file name in this folder"),
        ("shape:[8, 8]", "image_shape"),
        ("encoding:jpeg", "encoding 'jpeg'"),
    ],
)
def test_malformed_manifest_is_a_shard_error(shards, text, problem):
    """Before: a raw JSONDecodeError or KeyError."""
    path = os.path.join(shards, tfrecords.MANIFEST)
    doc = json.loads(open(path).read())
    if text is None:
        del doc["shards"][0]["records"]
        text = json.dumps(doc)
    elif text.startswith("file:"):
        doc["shards"][0]["file"] = text[5:]
        text = json.dumps(doc)
    elif text.startswith("shape:"):
        doc["image_shape"] = json.loads(text[6:])
        text = json.dumps(doc)
    elif text.startswith("encoding:"):
        doc["encoding"] = text[9:]
        text = json.dumps(doc)
    with open(path, "w") as fh:
        fh.write(text)
    with pytest.raises(tfrecords.ShardError, match="malformed") as info:
        tfrecords.load_manifest(shards)
    assert problem in str(info.value) and "Write the shards again" in str(info.value)
    with pytest.raises(tfrecords.ShardError):
        tfrecords.read_arrays(shards)
