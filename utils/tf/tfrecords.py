"""Sharded TFRecord files of images: write atomically, read back fast, fail loudly (imports TF).

A data set on disk (or in a bucket) is a folder of *shards*, ``<prefix>-00003-of-00016.tfrecord``,
each a sequence of serialized ``tf.train.Example`` records with the features of :data:`FEATURES`,
plus a ``manifest.json`` that lists every shard with its record count and size in bytes.

Writing is atomic per shard: each shard is written under a temporary name and renamed when it is
complete, and the manifest is written last. A crash leaves at worst a ``.tmp-PID`` file and no
manifest, never a complete-looking shard with records missing. The next write in that folder
removes such temporaries of writers that no longer run (local folders; on a bucket they are left
alone, since the writer may run on another host), and once its manifest is in place it deletes
the shards of the same prefix that the manifest does not list (a rewrite with fewer shards), so
a ``train-*`` glob sees only the current shards.

Reading (:func:`read_dataset`) interleaves several shards at once (``cycle_length`` files open,
``block_length`` records from each in turn, ``num_parallel_calls`` reader threads), checks each
shard's record count against the manifest, and parses either one record at a time
(``parse_single_example``) or a batch at a time (``parse_example``: batch before map).

A damaged shard is an error, never a silently short epoch: the file size is checked against the
manifest before reading (:func:`check_shards`); TensorFlow's ``DataLossError`` ("truncated record",
"corrupted record") and the record-count check surface while iterating, and
:func:`iterate_checked` (or :func:`verify_shard`) turns them into a :class:`ShardError` that names
the shard and says what to do.

How many shards (the rule of thumb of https://www.tensorflow.org/tutorials/load_data/tfrecord):
about 10 shards per host that reads, each at least 10 MB and ideally 100 MB or more; and at least
``hosts x cycle_length`` shards, so every reader thread of every host has a file of its own.
The course caps a shard at 200 MiB (tens to hundreds of MB), so a big data set gets more shards.
:func:`recommended_num_shards` computes it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
MANIFEST = "manifest.json"
SHARD_SUFFIX = ".tfrecord"

#: The declared schema of every record: image bytes (PNG, lossless, or raw uint8), label, and the
#: example's index in the source arrays (lets a test or a timeline follow each example).
FEATURES: dict[str, tf.io.FixedLenFeature] = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "index": tf.io.FixedLenFeature([], tf.int64),
}

Encoding = Literal["png", "raw"]

__all__ = [
    "FEATURES",
    "MANIFEST",
    "Manifest",
    "ShardError",
    "check_shards",
    "decode_images",
    "encode_example",
    "iterate_checked",
    "load_manifest",
    "parse_batch",
    "parse_single",
    "read_arrays",
    "read_dataset",
    "recommended_num_shards",
    "shard_name",
    "verify_shard",
    "write_shards",
]


class ShardError(RuntimeError):
    """A shard is missing, truncated or corrupted. The message names the file and the remedy."""


def _remedy(path: str) -> str:
    return (
        f"Re-create it (utils.tf.tfrecords.write_shards) or copy it again from the source, "
        f"or delete {os.path.basename(path)} and its line in {MANIFEST} to train without it."
    )


# --------------------------------------------------------------------------------------------
# Planning and writing
# --------------------------------------------------------------------------------------------


def recommended_num_shards(
    total_bytes: int,
    *,
    hosts: int = 1,
    cycle_length: int = 4,
    min_shard_bytes: int = 10 * 2**20,
    max_shard_bytes: int = 200 * 2**20,
) -> int:
    """Shard count by the rule of thumb: >= 10x as many files as hosts, >= hosts x cycle_length,
    10-200 MB each.

    The count target (10 files per reading host: the TFRecord guide's "at least 10 times as
    many files as there are hosts reading data") is bounded by size on both sides. The floor
    wins over the target for a small data set (fewer, bigger shards, since every file open costs
    a round trip),
    but never below ``hosts x cycle_length``, so that each host can shard by file and keep
    ``cycle_length`` files open. The ceiling wins for a big one: at least
    ``ceil(total_bytes / max_shard_bytes)`` shards, so no shard outgrows "tens to hundreds of MB"
    (a 150 GB set gets ~700 shards, not 10 of 14 GB). The result is a multiple of ``hosts``, so
    every host reads the same number of shards.
    """
    if (
        total_bytes < 0
        or hosts < 1
        or cycle_length < 1
        or min_shard_bytes < 1
        or max_shard_bytes < min_shard_bytes
    ):
        raise ValueError(
            "total_bytes >= 0, hosts >= 1, cycle_length >= 1, "
            "1 <= min_shard_bytes <= max_shard_bytes"
        )
    target = 10 * hosts
    by_size = max(1, total_bytes // min_shard_bytes)
    by_count = max(min(target, by_size), hosts * cycle_length)
    shards = max(by_count, math.ceil(total_bytes / max_shard_bytes))
    return hosts * math.ceil(shards / hosts)


def shard_name(prefix: str, shard: int, num_shards: int) -> str:
    """``train-00003-of-00016.tfrecord``: sorts correctly and shows when a shard is missing."""
    return f"{prefix}-{shard:05d}-of-{num_shards:05d}{SHARD_SUFFIX}"


def _bytes_feature(value: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64_feature(value: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def encode_example(
    image: np.ndarray, label: int, index: int, *, encoding: Encoding = "png"
) -> bytes:
    """One serialized ``tf.train.Example`` with the features of :data:`FEATURES`.

    ``png`` is lossless (the round trip is exact) and costs a real decode when read, like the
    JPEG/PNG files of a real data set; ``raw`` stores the uint8 pixels as they are (no decode
    cost, bigger files, and a batch of them decodes with one vectorised ``decode_raw``).
    """
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3:
        raise ValueError(f"image must be uint8 (H, W, C); got {image.dtype} {image.shape}")
    if encoding == "png":
        data = tf.io.encode_png(image).numpy()
    elif encoding == "raw":
        data = image.tobytes()
    else:
        raise ValueError(f"encoding must be 'png' or 'raw'; got {encoding!r}")
    features = {
        "image": _bytes_feature(data),
        "label": _int64_feature(label),
        "index": _int64_feature(index),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _write_one_shard(path: str, records: Iterable[bytes]) -> int:
    """Write ``records`` to ``path`` via a temporary file and an atomic rename; return the count."""
    tmp = f"{path}.tmp-{os.getpid()}"
    count = 0
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            for record in records:
                writer.write(record)
                count += 1
        # On a local disk the rename is atomic. On GCS a rename is a copy then a delete: still
        # no half-written object under the final name, which is what matters to a reader.
        tf.io.gfile.rename(tmp, path, overwrite=True)
    except BaseException:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
        raise
    return count


_TMP_PATTERN = re.compile(r"^(?P<base>.+)\.tmp-(?P<pid>\d+)$")


def _pid_running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _shard_pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(prefix)}-\d{{5}}-of-\d{{5}}{re.escape(SHARD_SUFFIX)}$")


def remove_stale_temporaries(out_dir: str | os.PathLike[str], prefix: str = "train") -> list[str]:
    """Delete ``.tmp-PID`` files of killed writers (shards of ``prefix`` and the manifest).

    Only in a local folder, and only when process PID is not running on this machine (a live
    writer's temporary is left alone). Returns the paths removed.
    """
    out = os.fspath(out_dir)
    if "://" in out or not os.path.isdir(out):
        return []
    shard = _shard_pattern(prefix)
    removed = []
    for name in os.listdir(out):
        m = _TMP_PATTERN.match(name)
        if not m or not (shard.match(m["base"]) or m["base"] == MANIFEST):
            continue
        if not _pid_running(int(m["pid"])):
            path = os.path.join(out, name)
            try:
                os.remove(path)
                removed.append(path)
            except FileNotFoundError:
                pass
    return removed


def _remove_superseded(out: str, prefix: str, keep: Iterable[str]) -> list[str]:
    """Delete shards of ``prefix`` in ``out`` that are not in ``keep`` (basenames)."""
    keep = set(keep)
    shard = _shard_pattern(prefix)
    removed = []
    for path in tf.io.gfile.glob(os.path.join(out, f"{prefix}-*{SHARD_SUFFIX}")):
        name = os.path.basename(path)
        if shard.match(name) and name not in keep:
            tf.io.gfile.remove(path)
            removed.append(path)
    return removed


def write_shards(
    images: np.ndarray,
    labels: np.ndarray,
    out_dir: str | os.PathLike[str],
    *,
    num_shards: int,
    prefix: str = "train",
    encoding: Encoding = "png",
) -> list[str]:
    """Write ``images``/``labels`` as ``num_shards`` TFRecord shards plus a manifest.

    Example ``i`` goes to shard ``i % num_shards`` (every shard gets a mix of the whole array, so
    reading a few shards first does not mean reading one class first). Returns the shard paths.
    Existing shards with the same prefix are replaced; the manifest is written last, atomically;
    then shards of the same prefix from an earlier write that it does not list are deleted, and
    so are temporaries that killed writers left (see :func:`remove_stale_temporaries`).
    """
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim != 4 or images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 (N, H, W, C); got {images.dtype} {images.shape}")
    if labels.shape != (len(images),):
        raise ValueError(f"labels must be ({len(images)},); got {labels.shape}")
    if not 1 <= num_shards <= max(1, len(images)):
        raise ValueError(f"num_shards must be in [1, {len(images)}]; got {num_shards}")
    out = os.fspath(out_dir)
    tf.io.gfile.makedirs(out)
    remove_stale_temporaries(out, prefix)
    manifest_path = os.path.join(out, MANIFEST)
    if tf.io.gfile.exists(manifest_path):  # the old manifest would describe the old shards
        tf.io.gfile.remove(manifest_path)

    paths, shards = [], []
    for shard in range(num_shards):
        path = os.path.join(out, shard_name(prefix, shard, num_shards))
        rows = range(shard, len(images), num_shards)
        count = _write_one_shard(
            path, (encode_example(images[i], labels[i], i, encoding=encoding) for i in rows)
        )
        size = tf.io.gfile.stat(path).length
        shards.append({"file": os.path.basename(path), "records": count, "bytes": size})
        paths.append(path)

    manifest = {
        "features": {name: spec.dtype.name for name, spec in FEATURES.items()},
        "encoding": encoding,
        "image_shape": list(images.shape[1:]),
        "num_examples": len(images),
        "shards": shards,
    }
    tmp = f"{manifest_path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, "w") as fh:
        fh.write(json.dumps(manifest, indent=1))
    tf.io.gfile.rename(tmp, manifest_path, overwrite=True)
    # Only now, with the new data set complete: an earlier write's extra shards would match a
    # train-* glob (the manifest reader never looks at them, a glob does).
    _remove_superseded(out, prefix, (s["file"] for s in shards))
    return paths


# --------------------------------------------------------------------------------------------
# Manifest and checks
# --------------------------------------------------------------------------------------------


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
    """Read ``manifest.json``; a missing one means an unfinished or foreign write (ShardError)."""
    root = os.fspath(data_dir)
    path = os.path.join(root, MANIFEST)
    if not tf.io.gfile.exists(path):
        raise ShardError(
            f"{path} not found: the shards in {root} were not written completely by "
            "utils.tf.tfrecords.write_shards (it writes the manifest last). Write them again."
        )
    try:
        with tf.io.gfile.GFile(path) as fh:
            doc = json.loads(fh.read())
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise ShardError(_malformed(path, f"not valid JSON: {err}")) from err
    if problem := _manifest_problem(doc):
        raise ShardError(_malformed(path, problem))
    manifest = Manifest(doc)
    manifest.root = root
    return manifest


def _malformed(path: str, problem: str) -> str:
    return (
        f"{path} is malformed ({problem}): it was cut short, edited, or not written by "
        "utils.tf.tfrecords.write_shards. Write the shards again."
    )


def _manifest_problem(doc: Any) -> str | None:
    """What is wrong with a parsed manifest, or None."""
    if not isinstance(doc, dict):
        return f"expected a JSON object, found {type(doc).__name__}"
    missing = [k for k in ("encoding", "image_shape", "shards") if k not in doc]
    if missing:
        return f"missing {', '.join(missing)}"
    if doc["encoding"] not in ("png", "raw"):
        return f"encoding {doc['encoding']!r} is not 'png' or 'raw'"
    shape = doc["image_shape"]
    if not (
        isinstance(shape, list)
        and len(shape) == 3
        and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
    ):
        return f"image_shape {shape!r} is not [H, W, C] of positive integers"
    if not isinstance(doc["shards"], list):
        return "shards is not a list"
    for i, entry in enumerate(doc["shards"]):
        if not isinstance(entry, dict):
            return f"shards[{i}] is not an object"
        name = entry.get("file")
        if not isinstance(name, str) or name in ("", ".", "..") or os.path.basename(name) != name:
            return f"shards[{i}].file {name!r} is not a file name in this folder"
        for key in ("records", "bytes"):
            value = entry.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                return f"shards[{i}].{key} {value!r} is not a count >= 0"
    return None


def check_shards(manifest: Manifest) -> None:
    """Cheap check before reading: every shard exists and has the size the manifest recorded."""
    for entry, path in zip(manifest["shards"], manifest.files, strict=True):
        if not tf.io.gfile.exists(path):
            raise ShardError(f"Shard {path} is missing. {_remedy(path)}")
        size = tf.io.gfile.stat(path).length
        if size != entry["bytes"]:
            raise ShardError(
                f"Shard {path} has {size} bytes, the manifest says {entry['bytes']}: it was "
                f"truncated or changed after writing. {_remedy(path)}"
            )


def _tf_reason(err: tf.errors.OpError) -> str:
    """TensorFlow's message without the op and function names around it."""
    text = re.sub(r"\{\{[^}]*\}\}", "", err.message)
    text = re.sub(r"\[Op:[^\]]*\].*$", "", text, flags=re.S).strip()
    what, sep, why = text.partition("' failed with ")
    return f"{what.strip()} ({why.strip()})" if sep else text


def verify_shard(path: str, expected_records: int | None = None) -> int:
    """Read every record of one shard (CRCs checked); return the count or raise ShardError."""
    count = 0
    try:
        for _ in tf.data.TFRecordDataset(path):
            count += 1
    except tf.errors.NotFoundError as err:
        raise ShardError(f"Shard {path} is missing. {_remedy(path)}") from err
    except tf.errors.DataLossError as err:
        raise ShardError(
            f"Shard {path} is damaged after {count} intact records: {_tf_reason(err)} "
            f"(a truncated copy or a corrupted byte). {_remedy(path)}"
        ) from err
    if expected_records is not None and count != expected_records:
        raise ShardError(
            f"Shard {path} holds {count} records, the manifest says {expected_records}. "
            f"{_remedy(path)}"
        )
    return count


def iterate_checked(dataset: tf.data.Dataset, manifest: Manifest) -> Iterator[Any]:
    """Iterate ``dataset`` (built by :func:`read_dataset`); translate read errors to ShardError.

    TensorFlow reports a damaged record without the file name ("truncated record at 1234").
    On such an error every shard is verified in turn, so the error names the damaged one.
    """
    try:
        yield from dataset
    except (tf.errors.DataLossError, tf.errors.FailedPreconditionError) as err:
        for path, count in zip(manifest.files, manifest.counts, strict=True):
            verify_shard(path, count)  # raises ShardError naming the first damaged shard
        raise ShardError(
            f"Reading {manifest.root} failed ({_tf_reason(err)}), yet every shard verifies; "
            "was a shard replaced while reading?"
        ) from err


# --------------------------------------------------------------------------------------------
# Parsing and reading
# --------------------------------------------------------------------------------------------


def decode_images(data: tf.Tensor, *, encoding: Encoding, image_shape: Sequence[int]) -> tf.Tensor:
    """Decode image bytes, one string or a batch of strings, to uint8 with a static shape."""
    shape = list(image_shape)
    if encoding == "raw":  # vectorised: one op for the whole batch
        flat = tf.io.decode_raw(data, tf.uint8)
        return tf.reshape(flat, tf.concat([tf.shape(data), shape], axis=0))
    if data.shape.rank == 0:
        return tf.ensure_shape(tf.io.decode_png(data, channels=shape[-1]), shape)
    # PNG has no batched decoder: map_fn loops inside one graph call (no per-record overhead).
    return tf.map_fn(
        lambda d: tf.io.decode_png(d, channels=shape[-1]),
        data,
        fn_output_signature=tf.TensorSpec(shape, tf.uint8),
    )


def _parse(
    parse_fn: Callable[[tf.Tensor, dict[str, tf.io.FixedLenFeature]], dict[str, tf.Tensor]],
    serialized: tf.Tensor,
    *,
    encoding: Encoding,
    image_shape: Sequence[int],
) -> dict[str, tf.Tensor]:
    features = parse_fn(serialized, FEATURES)
    features["image"] = decode_images(features["image"], encoding=encoding, image_shape=image_shape)
    return features


def parse_single(
    serialized: tf.Tensor, *, encoding: Encoding, image_shape: Sequence[int]
) -> dict[str, tf.Tensor]:
    """Parse one record (``parse_single_example``): the seed's per-record ``parse_function``."""
    return _parse(
        tf.io.parse_single_example, serialized, encoding=encoding, image_shape=image_shape
    )


def parse_batch(
    serialized: tf.Tensor, *, encoding: Encoding, image_shape: Sequence[int]
) -> dict[str, tf.Tensor]:
    """Parse a batch of records with one ``parse_example`` call (batch before map)."""
    return _parse(tf.io.parse_example, serialized, encoding=encoding, image_shape=image_shape)


def read_dataset(
    manifest: Manifest,
    *,
    batch_size: int | None = None,
    parse: Literal["single", "batch"] = "batch",
    cycle_length: int = 4,
    block_length: int = 16,
    num_parallel_calls: int | None = AUTOTUNE,
    deterministic: bool = True,
    drop_remainder: bool = False,
    shuffle_files: bool = False,
    seed: int = 0,
    input_context: tf.distribute.InputContext | None = None,
) -> tf.data.Dataset:
    """Interleaved, parsed records: dicts ``image`` (uint8), ``label`` and ``index`` (int64).

    ``cycle_length`` shards are open at once and ``block_length`` consecutive records are taken
    from each in turn; ``num_parallel_calls`` threads fill those blocks ahead of time;
    ``deterministic=False`` lets a fast shard overtake a slow one (order varies run to run).
    ``parse="batch"`` batches the serialized records and parses each batch with one call
    (``batch_size`` required); ``parse="single"`` parses each record, then batches if asked.
    ``input_context`` (from ``distribute_datasets_from_function``) keeps this host's share of
    the shards: whole files per host, so no host reads records it throws away.
    Each shard's record count is asserted against the manifest, so a short shard fails.
    """
    if parse == "batch" and batch_size is None:
        raise ValueError("parse='batch' needs a batch_size")
    check_shards(manifest)
    files = tf.data.Dataset.from_tensor_slices(
        (manifest.files, tf.constant(manifest.counts, tf.int64))
    )
    if input_context is not None and input_context.num_input_pipelines > 1:
        files = files.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if shuffle_files:
        files = files.shuffle(len(manifest.files), seed=seed, reshuffle_each_iteration=True)

    def read_file(path: tf.Tensor, count: tf.Tensor) -> tf.data.Dataset:
        return tf.data.TFRecordDataset(path).apply(tf.data.experimental.assert_cardinality(count))

    records = files.interleave(
        read_file,
        cycle_length=cycle_length,
        block_length=block_length,
        num_parallel_calls=num_parallel_calls,
        deterministic=deterministic,
    )
    kwargs = {"encoding": manifest["encoding"], "image_shape": manifest.image_shape}
    if parse == "batch":
        records = records.batch(batch_size, drop_remainder=drop_remainder)
        return records.map(
            lambda s: parse_batch(s, **kwargs),
            num_parallel_calls=num_parallel_calls,
            deterministic=deterministic,
        )
    if parse != "single":
        raise ValueError(f"parse must be 'single' or 'batch'; got {parse!r}")
    ds = records.map(
        lambda s: parse_single(s, **kwargs),
        num_parallel_calls=num_parallel_calls,
        deterministic=deterministic,
    )
    return ds if batch_size is None else ds.batch(batch_size, drop_remainder=drop_remainder)


def read_arrays(
    data_dir: str | os.PathLike[str], **read_kwargs: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a whole sharded data set back as numpy ``(images, labels, indices)``, sorted by index.

    Any damaged shard raises :class:`ShardError` naming it. ``read_kwargs`` go to
    :func:`read_dataset` (default: batched parsing, 256 records per batch).
    """
    manifest = load_manifest(data_dir)
    read_kwargs.setdefault("batch_size", 256)
    ds = read_dataset(manifest, **read_kwargs)
    images, labels, indices = [], [], []
    for batch in iterate_checked(ds, manifest):
        images.append(batch["image"].numpy())
        labels.append(batch["label"].numpy())
        indices.append(batch["index"].numpy())
    h, w, c = manifest.image_shape
    if not indices:
        return np.zeros((0, h, w, c), np.uint8), np.zeros((0,), np.int64), np.zeros((0,), np.int64)
    index = np.concatenate(indices)
    order = np.argsort(index, kind="stable")
    return np.concatenate(images)[order], np.concatenate(labels)[order], index[order]
