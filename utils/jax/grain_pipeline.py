"""The tuned input pipeline of notebook 07, written with Grain instead of tf.data.

Grain (https://google-grain.readthedocs.io) is the input library of the JAX stack and is
preinstalled on Colab's and Kaggle's TPU images, where TensorFlow is missing (Colab) or has no
TPU support (Kaggle). Its pipeline code is numpy only, but ``import grain`` (0.2.18) imports JAX
(without starting a backend), so this module lives in :mod:`utils.jax`. It reads the
*same* workload as :mod:`utils.tf.input_bench`: the PNG ``tf.train.Example`` records of the
TFRecord shards written by :func:`utils.tf.tfrecords.write_shards`, found through their
``manifest.json``, with the same simulated storage latency and the same per-example work:

- :class:`TFRecordSource`: random access to every record (Grain's data-source protocol:
  ``__len__`` and ``__getitem__``). The TFRecord framing (length, CRC, data, CRC) is indexed once
  with plain file reads; each read of a record sleeps ``record_latency_s``, and the first read of
  each file in a process also ``open_latency_s`` (the file then stays open, as a reader's does).
- :func:`decode`: parse the ``tf.train.Example`` (a minimal protobuf reader, :func:`parse_example`)
  and decode the PNG (Pillow).
- :func:`augment_batch`: a random crop (60-100 % of the area, aspect 3/4-4/3) resized back to the
  image size with bilinear interpolation, a random flip, scaling to float32 in [0, 1]: what
  ``input_bench.transform_stage`` does with ``tf.image.crop_and_resize``, in numpy.

:func:`tuned_pipeline` chains them the Grain way: a global shuffle of record *indices* (a new
order every epoch, no shuffle buffer), reads and decodes on ``threads`` threads, batch, augment,
prefetch. Grain has no ``cache`` stage: a pipeline over storage reads it again every epoch. For a
data set that fits in memory, Grain's way is to read and decode it once into arrays
(:func:`load_decoded`, itself a threaded Grain pipeline) and build the pipeline on those
(``tuned_pipeline(..., in_memory=True)``): later epochs then only shuffle, batch and augment,
like the tf.data pipeline after its ``cache()``. Notebook 07 measures both.
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

__all__ = [
    "TFRecordSource",
    "augment_batch",
    "count",
    "decode",
    "load_decoded",
    "parse_example",
    "tfrecord_index",
    "tuned_pipeline",
]


def tfrecord_index(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """``(offset, length)`` of every record's data in a TFRecord file (no CRC check).

    The framing: an 8-byte little-endian length, a 4-byte CRC of it, the data, a 4-byte CRC.

    Raises:
        ValueError: the file ends inside a record (a truncated copy).
    """
    out = []
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        pos = 0
        while pos < size:
            header = fh.read(12)
            if len(header) < 12:
                raise ValueError(f"{path}: truncated record header at byte {pos}")
            (length,) = struct.unpack("<Q", header[:8])
            if pos + 12 + length + 4 > size:
                raise ValueError(f"{path}: truncated record at byte {pos}")
            out.append((pos + 12, length))
            pos += 12 + length + 4
            fh.seek(pos)
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


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: varints and length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def parse_example(buf: bytes) -> dict[str, list[Any]]:
    """A ``tf.train.Example`` as ``{name: [bytes...] or [int...]}`` (bytes and int64 features).

    Example = {1: Features}; Features = {1: map entry {1: key, 2: Feature}};
    Feature = {1: BytesList {1: bytes}, 3: Int64List {1: packed or single varints}}.
    """
    out: dict[str, list[Any]] = {}
    for n1, _, features in _fields(buf):
        if n1 != 1:
            continue
        for n2, _, entry in _fields(features):
            if n2 != 1:
                continue
            name, feature = "", b""
            for n3, _, v in _fields(entry):
                if n3 == 1:
                    name = v.decode()
                elif n3 == 2:
                    feature = v
            values: list[Any] = []
            for kind, _, lst in _fields(feature):
                for n4, wire, v in _fields(lst):
                    if n4 != 1:
                        continue
                    if kind == 1:
                        values.append(bytes(v))
                    elif kind == 3 and wire == 0:
                        values.append(v)
                    elif kind == 3:  # packed int64s
                        pos = 0
                        while pos < len(v):
                            x, pos = _varint(v, pos)
                            values.append(x - (1 << 64) if x >= 1 << 63 else x)
            out[name] = values
    return out


class TFRecordSource:
    """Random access to the records of a manifest's shards, with simulated storage latency.

    ``manifest_dir``: the folder of ``manifest.json`` (as written by ``write_shards``).
    """

    def __init__(
        self,
        manifest_dir: str | os.PathLike[str],
        *,
        open_latency_s: float = 0.0,
        record_latency_s: float = 0.0,
    ) -> None:
        with open(os.path.join(manifest_dir, "manifest.json"), encoding="utf-8") as fh:
            manifest = json.load(fh)
        self.image_shape = tuple(int(d) for d in manifest["image_shape"])
        self.files = [os.path.join(manifest_dir, s["file"]) for s in manifest["shards"]]
        self._where: list[tuple[int, int, int]] = []  # (file, offset, length)
        for f, path in enumerate(self.files):
            self._where += [(f, off, n) for off, n in tfrecord_index(path)]
        self.open_latency_s = open_latency_s
        self.record_latency_s = record_latency_s
        self._opened: set[int] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._where)

    def __getitem__(self, index: int) -> bytes:
        f, offset, length = self._where[index]
        wait = self.record_latency_s
        with self._lock:
            if f not in self._opened:
                self._opened.add(f)
                wait += self.open_latency_s
        time.sleep(wait)
        with open(self.files[f], "rb") as fh:
            fh.seek(offset)
            return fh.read(length)

    def __repr__(self) -> str:
        return f"TFRecordSource({len(self.files)} shards, {len(self)} records)"


def decode(record: bytes) -> dict[str, Any]:
    """Parse one PNG example: ``image`` uint8 (H, W, C), ``label`` and ``index`` ints."""
    from PIL import Image  # Pillow ships with matplotlib, a core dependency

    features = parse_example(record)
    with Image.open(io.BytesIO(features["image"][0])) as img:
        image = np.asarray(img, dtype=np.uint8)
    if image.ndim == 2:
        image = image[..., None]
    return {"image": image, "label": features["label"][0], "index": features["index"][0]}


def augment_batch(
    batch: dict[str, np.ndarray], rng: np.random.Generator, *, min_area: float = 0.6
) -> dict[str, np.ndarray]:
    """Random crop (``min_area``-100 % of the area) resized back bilinearly, flip, scale to [0, 1].

    The numpy twin of ``input_bench.random_resized_crop_and_flip`` on a batch ``(B, H, W, C)``
    (the corner convention of ``tf.image.crop_and_resize``: box edges map to pixel centres).
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
    """Every record of ``source`` read and decoded once, on ``threads`` threads, as arrays.

    ``image`` uint8 ``(N, H, W, C)``, ``label`` int64, ``index`` int64, in record order.
    """
    ds = grain.MapDataset.source(source).map(decode)
    examples = list(ds.to_iter_dataset(grain.ReadOptions(num_threads=threads)))
    return {k: np.stack([e[k] for e in examples]) for k in ("image", "label", "index")}


class _Rows:
    """Random access to the rows of decoded arrays (a Grain data source)."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays

    def __len__(self) -> int:
        return len(self.arrays["label"])

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.arrays.items()}


def tuned_pipeline(
    source: TFRecordSource,
    *,
    batch_size: int,
    seed: int = 0,
    threads: int = 16,
    epochs: int | None = None,
    shuffle: bool = True,
    in_memory: bool = False,
    prefetch_batches: int = 2,
) -> grain.IterDataset:
    """The course's tuned pipeline in Grain: shuffle indices, read + decode on threads, batch,
    augment, prefetch. ``epochs=None`` repeats forever (each epoch in a new order).
    ``in_memory=True`` first reads and decodes every record (:func:`load_decoded`, here, before the
    pipeline is returned), then serves the decoded rows: storage is read once, not every epoch.

    The chain, to copy::

        grain.MapDataset.source(source).seed(seed).shuffle().repeat(epochs).map(decode)
            .to_iter_dataset(grain.ReadOptions(num_threads=threads, prefetch_buffer_size=...))
            .batch(batch_size, drop_remainder=True).random_map(augment_batch)
        -> grain.experimental.ThreadPrefetchIterDataset(..., prefetch_buffer_size=2)
    """
    rows = _Rows(load_decoded(source, threads=threads)) if in_memory else source
    ds = grain.MapDataset.source(rows).seed(seed)
    if shuffle:
        ds = ds.shuffle()  # a global shuffle of indices: a new order every epoch, no buffer
    ds = ds.repeat(epochs)
    if not in_memory:
        ds = ds.map(decode)
    it = ds.to_iter_dataset(
        grain.ReadOptions(num_threads=threads, prefetch_buffer_size=2 * batch_size)
    )  # reads and decodes on `threads` threads, ahead of the consumer
    it = it.batch(batch_size, drop_remainder=True).random_map(augment_batch)
    return grain.experimental.ThreadPrefetchIterDataset(it, prefetch_buffer_size=prefetch_batches)


def count(batch: dict[str, np.ndarray]) -> int:
    """Examples in a batch (for :func:`utils.throughput.epoch_runner`)."""
    return len(batch["label"])
