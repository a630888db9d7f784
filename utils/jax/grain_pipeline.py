"""Notebook 07's workload read with Grain instead of tf.data (no TensorFlow).

Grain (https://google-grain.readthedocs.io) is the input library of the JAX stack, preinstalled on
Colab's and Kaggle's TPU images. Its pipeline code is numpy only, but ``import grain`` imports JAX,
so this module lives in :mod:`utils.jax`. It reads the PNG ``tf.train.Example`` records of the
shards written by :func:`utils.tf.tfrecords.write_shards`, with the same simulated storage
latency and the same per-example work as :mod:`utils.tf.input_bench`:

- :class:`TFRecordSource`: random access to every record (Grain's data-source protocol).
- :func:`decode`: parse the ``tf.train.Example`` (a minimal protobuf reader) and decode the PNG.
- :func:`augment_batch`: random crop resized back bilinearly, random flip, scale to [0, 1].
- :func:`load_decoded`: every record read and decoded once, on threads (Grain has no ``cache``).
"""

from __future__ import annotations

import io
import json
import os
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import grain
import numpy as np

__all__ = ["TFRecordSource", "augment_batch", "decode", "load_decoded", "tfrecord_index"]


def tfrecord_index(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """``(offset, length)`` of every record's data in a TFRecord file (no CRC check).

    Each record: an 8-byte little-endian length, its 4-byte CRC, the data, a 4-byte CRC.
    Raises ValueError when the file ends inside a record (a truncated copy).
    """
    out, pos, size = [], 0, os.path.getsize(path)
    with open(path, "rb") as fh:
        while pos < size:
            fh.seek(pos)
            (length,) = struct.unpack("<Q", fh.read(8).ljust(8, b"\0"))
            if pos + 12 + length + 4 > size:
                raise ValueError(f"{path}: truncated record at byte {pos}")
            out.append((pos + 12, length))
            pos += 12 + length + 4
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, Any]]:
    """(field number, value) of a protobuf message of varint and length-delimited fields."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        if key & 7 == 0:
            value, pos = _varint(buf, pos)
        else:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        yield key >> 3, value


def decode(record: bytes) -> dict[str, Any]:
    """Parse one record: ``image`` uint8 (H, W, C), ``label`` and ``index`` ints.

    Example {1: Features {1: entry {1: name, 2: Feature {1: BytesList | 3: Int64List {1: ...}}}}}.
    """
    from PIL import Image  # Pillow ships with matplotlib, a core dependency

    features = {}
    for _, entries in _fields(record):
        for _, entry in _fields(entries):
            fields = dict(_fields(entry))
            ((kind, values),) = _fields(fields[2])
            ((_, value),) = _fields(values)
            # an int64 list of one value: packed (bytes holding a varint) or a varint
            if kind == 3 and isinstance(value, bytes):
                value = _varint(value, 0)[0]
            features[fields[1].decode()] = value
    with Image.open(io.BytesIO(features["image"])) as img:
        image = np.asarray(img, dtype=np.uint8)
    image = image[..., None] if image.ndim == 2 else image
    return {"image": image, "label": features["label"], "index": features["index"]}


class TFRecordSource:
    """Random access to the records of a manifest's shards, with simulated storage latency:
    each read sleeps ``record_latency_s``, the first of each file also ``open_latency_s``."""

    def __init__(
        self,
        manifest_dir: str | os.PathLike[str],
        *,
        open_latency_s: float = 0.0,
        record_latency_s: float = 0.0,
    ) -> None:
        with open(os.path.join(manifest_dir, "manifest.json"), encoding="utf-8") as fh:
            shards = json.load(fh)["shards"]
        self.files = [os.path.join(manifest_dir, s["file"]) for s in shards]
        self._where = [(f, *at) for f, p in enumerate(self.files) for at in tfrecord_index(p)]
        self.open_latency_s, self.record_latency_s = open_latency_s, record_latency_s
        self._opened: set[int] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._where)

    def __getitem__(self, index: int) -> bytes:
        f, offset, length = self._where[index]
        with self._lock:
            first = f not in self._opened
            self._opened.add(f)
        time.sleep(self.record_latency_s + (self.open_latency_s if first else 0.0))
        with open(self.files[f], "rb") as fh:
            fh.seek(offset)
            return fh.read(length)

    def __repr__(self) -> str:
        return f"TFRecordSource({len(self.files)} shards, {len(self)} records)"


def augment_batch(
    batch: dict[str, np.ndarray], rng: np.random.Generator, *, min_area: float = 0.6
) -> dict[str, np.ndarray]:
    """Random crop (``min_area``-100 % of the area) resized back bilinearly, flip, scale to [0, 1].

    The numpy twin of ``input_bench.transform_stage`` on a batch ``(B, H, W, C)`` (box edges map
    to pixel centres, as in ``tf.image.crop_and_resize``).
    """
    images = batch["image"].astype(np.float32)
    b, h, w, _ = images.shape
    area = rng.uniform(min_area, 1.0, b)
    aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3), b))
    bh = np.minimum(np.sqrt(area / aspect), 1.0)
    bw = np.minimum(np.sqrt(area * aspect), 1.0)
    y0 = rng.uniform(size=b) * (1.0 - bh)
    x0 = rng.uniform(size=b) * (1.0 - bw)
    ys = (y0[:, None] + bh[:, None] * np.linspace(0, 1, h)[None]) * (h - 1)  # (B, H)
    xs = (x0[:, None] + bw[:, None] * np.linspace(0, 1, w)[None]) * (w - 1)  # (B, W)
    yl, xl = np.floor(ys).astype(int), np.floor(xs).astype(int)
    yh, xh = np.minimum(yl + 1, h - 1), np.minimum(xl + 1, w - 1)
    fy, fx = (ys - yl)[:, :, None, None], (xs - xl)[:, None, :, None]
    idx = np.arange(b)[:, None, None]

    def at(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
        return images[idx, yy[:, :, None], xx[:, None, :]]

    top = at(yl, xl) * (1 - fx) + at(yl, xh) * fx
    bottom = at(yh, xl) * (1 - fx) + at(yh, xh) * fx
    out = top * (1 - fy) + bottom * fy
    flip = rng.uniform(size=b) < 0.5
    out[flip] = out[flip, :, ::-1]
    return {
        "image": (out / 255.0).astype(np.float32),
        "label": batch["label"].astype(np.int32),
        "index": batch["index"].astype(np.int64),
    }


def load_decoded(source: TFRecordSource, *, threads: int = 16) -> dict[str, np.ndarray]:
    """Every record of ``source`` read and decoded once, on ``threads`` threads, as arrays
    ``image`` uint8 ``(N, H, W, C)``, ``label`` and ``index`` int64, in record order."""
    ds = grain.MapDataset.source(source).map(decode)
    examples = list(ds.to_iter_dataset(grain.ReadOptions(num_threads=threads)))
    return {k: np.stack([e[k] for e in examples]) for k in ("image", "label", "index")}
