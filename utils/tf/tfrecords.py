"""Sharded TFRecord files of PNG images: write atomically, read back fast, fail loudly (TF).

A data set is a folder of *shards*, ``train-00003-of-00016.tfrecord``, each a sequence of
serialized ``tf.train.Example`` records with the features of :data:`FEATURES`, plus a
``manifest.json`` listing every shard with its record count and size in bytes. Each shard is
written under a temporary name and renamed when complete, and the manifest is written last, so a
crash never leaves a complete-looking shard with records missing.

A damaged shard is an error, never a silently short epoch: :func:`check_shards` compares file
sizes with the manifest before reading, and :func:`iterate_checked` turns TensorFlow's
``DataLossError`` ("truncated record at 1234", no file name) into a :class:`ShardError` that
names the damaged shard.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
MANIFEST = "manifest.json"

#: Every record: PNG image bytes (lossless), label, and the example's index in the source arrays.
FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "index": tf.io.FixedLenFeature([], tf.int64),
}


class ShardError(RuntimeError):
    """A shard or the manifest is missing or damaged. The message names the file."""


def recommended_num_shards(
    total_bytes: int,
    *,
    hosts: int = 1,
    cycle_length: int = 4,
    min_shard_bytes: int = 10 * 2**20,
    max_shard_bytes: int = 200 * 2**20,
) -> int:
    """The TFRecord guide's rule of thumb: 10 files per reading host, each >= 10 MB.

    For a small data set the size floor wins over the count (every file open costs a round
    trip), but never below ``hosts x cycle_length`` (each reader thread needs a file); a big
    one gets more files so none outgrows ``max_shard_bytes``. A multiple of ``hosts``.
    """
    by_count = max(min(10 * hosts, max(1, total_bytes // min_shard_bytes)), hosts * cycle_length)
    shards = max(by_count, math.ceil(total_bytes / max_shard_bytes))
    return hosts * math.ceil(shards / hosts)


def encode_example(image: np.ndarray, label: int, index: int) -> bytes:
    """One serialized ``tf.train.Example``: the image as PNG, its label and index."""
    png = tf.io.encode_png(np.asarray(image, np.uint8)).numpy()
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
        "index": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(index)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_shards(
    images: np.ndarray,
    labels: np.ndarray,
    out_dir: str | os.PathLike[str],
    *,
    num_shards: int,
    prefix: str = "train",
) -> list[str]:
    """Write uint8 ``images`` (N, H, W, C) and ``labels`` as ``num_shards`` shards + manifest.

    Example ``i`` goes to shard ``i % num_shards`` (each shard mixes the whole array). Each file
    is written under a temporary name and renamed when complete; the manifest comes last.
    Returns the shard paths.
    """
    if not 1 <= num_shards <= len(images):
        raise ValueError(f"num_shards must be in [1, {len(images)}]; got {num_shards}")
    out = os.fspath(out_dir)
    tf.io.gfile.makedirs(out)
    if tf.io.gfile.exists(manifest := os.path.join(out, MANIFEST)):
        tf.io.gfile.remove(manifest)  # it describes the old shards
    paths, shards = [], []
    for shard in range(num_shards):
        path = os.path.join(out, f"{prefix}-{shard:05d}-of-{num_shards:05d}.tfrecord")
        rows = range(shard, len(images), num_shards)
        with tf.io.TFRecordWriter(path + ".tmp") as writer:
            for i in rows:
                writer.write(encode_example(images[i], labels[i], i))
        tf.io.gfile.rename(path + ".tmp", path, overwrite=True)
        size = tf.io.gfile.stat(path).length
        shards.append({"file": os.path.basename(path), "records": len(rows), "bytes": size})
        paths.append(path)
    doc = {"image_shape": list(np.shape(images)[1:]), "shards": shards}
    with tf.io.gfile.GFile(manifest + ".tmp", "w") as fh:
        fh.write(json.dumps(doc, indent=1))
    tf.io.gfile.rename(manifest + ".tmp", manifest, overwrite=True)
    return paths


class Manifest(dict):
    """The parsed ``manifest.json`` plus the folder it came from (``.root``)."""

    root: str

    @property
    def files(self) -> list[str]:
        """Full paths of the shards, in manifest order."""
        return [os.path.join(self.root, s["file"]) for s in self["shards"]]

    @property
    def counts(self) -> list[int]:
        """Records per shard, in manifest order."""
        return [int(s["records"]) for s in self["shards"]]

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(H, W, C)`` of every image."""
        h, w, c = self["image_shape"]
        return int(h), int(w), int(c)


def load_manifest(data_dir: str | os.PathLike[str]) -> Manifest:
    """Read ``manifest.json``; a missing or malformed one raises :class:`ShardError`."""
    root = os.fspath(data_dir)
    path = os.path.join(root, MANIFEST)
    if not tf.io.gfile.exists(path):
        raise ShardError(
            f"{path} not found: the shards in {root} were not written completely "
            "(write_shards writes the manifest last). Write them again."
        )
    manifest = Manifest()
    try:
        with tf.io.gfile.GFile(path) as fh:
            manifest.update(json.loads(fh.read()))
        manifest.root = root
        _ = manifest.image_shape, manifest.files, manifest.counts  # each raises if malformed
    except (ValueError, TypeError, KeyError) as err:  # JSONDecodeError is a ValueError
        raise ShardError(f"{path} is malformed ({err!r}): write the shards again.") from err
    return manifest


def check_shards(manifest: Manifest) -> None:
    """Before reading: every shard exists and has the size the manifest recorded."""
    for entry, path in zip(manifest["shards"], manifest.files, strict=True):
        size = tf.io.gfile.stat(path).length if tf.io.gfile.exists(path) else None
        if size != entry["bytes"]:
            raise ShardError(
                f"Shard {path} has {size} bytes, the manifest says {entry['bytes']}: it is "
                "missing, truncated or changed. Write it again or copy it again from the source."
            )


def iterate_checked(dataset: tf.data.Dataset, manifest: Manifest) -> Iterator[Any]:
    """Iterate ``dataset``; on a damaged record, read every shard and name the damaged one."""
    try:
        yield from dataset
    except tf.errors.DataLossError as err:
        for path, expected in zip(manifest.files, manifest.counts, strict=True):
            count = 0
            try:
                for _ in tf.data.TFRecordDataset(path):
                    count += 1
            except tf.errors.DataLossError as bad:
                reason = re.sub(r"\{\{.*?\}\}|'|\[Op:.*", "", bad.message, flags=re.S).strip()
                raise ShardError(
                    f"Shard {path} is damaged after {count} of {expected} records ({reason}). "
                    "Write it again or copy it again from the source."
                ) from err
        raise ShardError(f"Reading {manifest.root} failed, yet every shard reads: {err}") from err


def parse(serialized: tf.Tensor, *, image_shape: Sequence[int]) -> dict[str, tf.Tensor]:
    """Parse one record, or a batch with one ``parse_example`` call; images decoded to uint8."""
    shape, channels = list(image_shape), image_shape[-1]
    if serialized.shape.rank == 0:
        features = tf.io.parse_single_example(serialized, FEATURES)
        image = tf.io.decode_png(features["image"], channels=channels)
        return {**features, "image": tf.ensure_shape(image, shape)}
    features = tf.io.parse_example(serialized, FEATURES)
    images = tf.map_fn(  # PNG has no batched decoder: a loop inside one graph call
        lambda d: tf.io.decode_png(d, channels=channels),
        features["image"],
        fn_output_signature=tf.TensorSpec(shape, tf.uint8),
    )
    return {**features, "image": images}


def read_dataset(
    manifest: Manifest,
    *,
    batch_size: int,
    parse_batches: bool = True,
    cycle_length: int = 4,
    deterministic: bool = True,
    drop_remainder: bool = False,
    input_context: tf.distribute.InputContext | None = None,
) -> tf.data.Dataset:
    """Batches of dicts ``image`` (uint8), ``label`` and ``index`` (int64), shards interleaved.

    ``cycle_length`` shards are open at once, 16 records taken from each in turn, filled ahead by
    AUTOTUNE threads; ``deterministic=False`` lets a fast shard overtake a slow one.
    ``parse_batches``: batch, then parse each batch with one call (the guide's vectorised map);
    False: parse each record (``parse_single_example``), then batch. ``input_context`` keeps this
    host's share of the shards (whole files per host).
    """
    check_shards(manifest)
    files = tf.data.Dataset.from_tensor_slices(manifest.files)
    if input_context is not None:
        files = files.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    ds = files.interleave(
        tf.data.TFRecordDataset,
        cycle_length=cycle_length,
        block_length=16,
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )

    def parsed(records: tf.data.Dataset) -> tf.data.Dataset:
        return records.map(
            lambda s: parse(s, image_shape=manifest.image_shape),
            num_parallel_calls=AUTOTUNE,
            deterministic=deterministic,
        )

    if parse_batches:
        return parsed(ds.batch(batch_size, drop_remainder=drop_remainder))
    return parsed(ds).batch(batch_size, drop_remainder=drop_remainder)


def read_arrays(data_dir: str | os.PathLike[str], **read_kwargs: Any) -> tuple[np.ndarray, ...]:
    """A whole data set as numpy ``(images, labels, indices)``, sorted by index; ``read_kwargs``
    go to :func:`read_dataset` (default: 256 per batch). A damaged shard raises ShardError."""
    manifest = load_manifest(data_dir)
    ds = read_dataset(manifest, **{"batch_size": 256, **read_kwargs})
    batches = list(iterate_checked(ds, manifest))
    index = np.concatenate([b["index"].numpy() for b in batches])
    order = np.argsort(index, kind="stable")
    images = np.concatenate([b["image"].numpy() for b in batches])
    labels = np.concatenate([b["label"].numpy() for b in batches])
    return images[order], labels[order], index[order]
