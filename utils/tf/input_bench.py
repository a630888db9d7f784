"""Notebook 07's tf.data workload and its pipelines: the same work, scheduled differently (TF).

The workload (:func:`make_workload`) says what it simulates:

- **Storage latency, simulated**: examples live in PNG TFRecord shards on the local disk. Each
  read request of :data:`RECORDS_PER_READ` records sleeps ``records x record_latency_s``, the
  first of a file also ``open_latency_s``, in a ``tf.py_function`` like the guide's
  ``ArtificialDataset``. Sleeping threads use no CPU, like threads waiting for a bucket; every
  pipeline runs with a private pool of :data:`SIMULATION_THREADS` threads
  (:func:`simulation_options`), so sleeping readers do not block TensorFlow's shared pool.
- **Compute, real**: parse, PNG decode, a random crop resized back, a random flip, scaling to
  float32 in [0, 1].

:data:`LADDER` applies the seed text's techniques one at a time (:func:`build_pipeline`);
:func:`guide_pipeline` is the tf.data guide's optimized pipeline; :func:`tuned_pipeline` the
course's. Timing is :mod:`utils.throughput` (single runs) and :mod:`utils.compare` (verdicts).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import tensorflow as tf

from utils.tf import tfrecords
from utils.timeline import STAMP_PREFIX

AUTOTUNE = tf.data.AUTOTUNE
SIMULATION_THREADS = 32
RECORDS_PER_READ = 16  # real readers fetch buffers, not single records
MIN_CROP_AREA = 0.6  # random crops keep 60-100 % of the image area
Features = dict[str, tf.Tensor]


@dataclass(frozen=True)
class Workload:
    """Sharded PNG TFRecords plus the simulated storage latencies and the batch size."""

    manifest: tfrecords.Manifest
    open_latency_s: float
    record_latency_s: float
    batch_size: int

    @property
    def num_examples(self) -> int:
        """Examples per epoch."""
        return sum(self.manifest.counts)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(H, W, C)`` of the stored and of the produced images."""
        return self.manifest.image_shape

    @property
    def storage_wait_s(self) -> float:
        """Simulated storage waiting of one epoch when files are read one after another."""
        opens = len(self.manifest.files) * self.open_latency_s
        return opens + self.num_examples * self.record_latency_s

    def describe(self) -> str:
        """One paragraph: what is simulated and what is real."""
        files = len(self.manifest.files)
        return (
            f"{self.num_examples} examples {self.image_shape} in {files} PNG TFRecord shards. "
            f"Simulated storage: {self.open_latency_s * 1e3:g} ms to open a file, "
            f"{self.record_latency_s * 1e3:g} ms per record, {RECORDS_PER_READ} records per "
            f"request ({self.storage_wait_s:.2f} s of waiting per epoch if nothing overlaps). "
            "Real compute per example: parse, PNG decode, random crop + resize, flip, scale. "
            f"Batches of {self.batch_size}."
        )


def make_workload(
    images: np.ndarray,
    labels: np.ndarray,
    out_dir: str | os.PathLike[str],
    *,
    num_shards: int,
    open_latency_s: float,
    record_latency_s: float,
    batch_size: int,
) -> Workload:
    """Write ``images`` as PNG shards in ``out_dir`` and describe the workload built on them."""
    tfrecords.write_shards(images, labels, out_dir, num_shards=num_shards)
    manifest = tfrecords.load_manifest(out_dir)
    return Workload(manifest, open_latency_s, record_latency_s, batch_size)


def simulation_options() -> tf.data.Options:
    """Options every pipeline gets: a private thread pool for the sleeping readers."""
    options = tf.data.Options()
    options.threading.private_threadpool_size = SIMULATION_THREADS
    return options


def timed(stage: str, fn: Callable[[Features], Features]) -> Callable[[Features], Features]:
    """Wrap a dict-in, dict-out stage so its output carries a ``t_<stage>`` stamp (start, end)
    from ``tf.timestamp()``, repeated per element for a batch (:mod:`utils.timeline`)."""

    def wrapper(features: Features) -> Features:
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            out = dict(fn({k: tf.identity(v) for k, v in features.items()}))
        with tf.control_dependencies(tf.nest.flatten(out)):
            stamp = tf.stack([start, tf.timestamp()])
        index = out.get("index", out.get("record"))  # says how many elements there are
        if index.shape.rank == 1:
            stamp = tf.tile(stamp[tf.newaxis], [tf.shape(index)[0], 1])
        return {**out, STAMP_PREFIX + stage: stamp}

    return wrapper


def read_stage(wl: Workload, stamp: bool) -> Callable[[tf.Tensor], tf.data.Dataset]:
    """Per file: a dataset of ``{"record": bytes}`` that pays the simulated storage latency."""

    def wait(request: tf.Tensor, records: tf.Tensor) -> tf.Tensor:
        first = wl.open_latency_s if int(request) == 0 else 0.0
        time.sleep(first + int(records) * wl.record_latency_s)
        return request

    def read(features: Features) -> Features:
        records = features["record"]
        done = tf.py_function(wait, [features["request"], tf.size(records)], tf.int64)
        with tf.control_dependencies([done]):
            return {"record": tf.identity(records)}

    stage = timed("read", read) if stamp else read

    def read_file(path: tf.Tensor) -> tf.data.Dataset:
        requests = tf.data.TFRecordDataset(path).batch(RECORDS_PER_READ).enumerate()
        return requests.map(lambda i, r: stage({"request": i, "record": r})).unbatch()

    return read_file


def decode_stage(wl: Workload) -> Callable[[Features], Features]:
    """Parse and PNG-decode one record or a batch of records (a batch: one parse call)."""

    def decode(features: Features) -> Features:
        rest = {k: v for k, v in features.items() if k != "record"}
        return {**rest, **tfrecords.parse(features["record"], image_shape=wl.image_shape)}

    return decode


def transform_stage(wl: Workload) -> Callable[[Features], Features]:
    """Random crop resized back, random flip, scale to [0, 1]: per example or per batch."""
    size = list(wl.image_shape[:2])

    def transform(features: Features) -> Features:
        image = features["image"]
        single = image.shape.rank == 3
        images = tf.cast(image[tf.newaxis] if single else image, tf.float32)
        n = tf.shape(images)[0]
        area = tf.random.uniform([n], MIN_CROP_AREA, 1.0)
        aspect = tf.exp(tf.random.uniform([n], np.log(3 / 4), np.log(4 / 3)))
        h = tf.minimum(tf.sqrt(area / aspect), 1.0)
        w = tf.minimum(tf.sqrt(area * aspect), 1.0)
        y0, x0 = tf.random.uniform([n]) * (1.0 - h), tf.random.uniform([n]) * (1.0 - w)
        boxes = tf.stack([y0, x0, y0 + h, x0 + w], axis=1)
        out = tf.image.crop_and_resize(images, boxes, tf.range(n), crop_size=size) / 255.0
        flip = tf.random.uniform([n]) < 0.5
        out = tf.where(flip[:, None, None, None], tf.reverse(out, axis=[2]), out)
        label = tf.cast(features["label"], tf.int32)
        return {**features, "image": out[0] if single else out, "label": label}

    return transform


@dataclass(frozen=True)
class PipelineConfig:
    """Which techniques a pipeline uses; :func:`build_pipeline` turns it into a dataset."""

    name: str
    prefetch: bool = False
    parallel_map: bool = False
    cycle_length: int = 0  # 0: read files one after the other (flat_map)
    vectorize: bool = False  # batch before map
    cache: bool = False
    repeat: bool = False  # one iterator over all epochs (how the ladder iterates the row)
    options: bool = False  # autotune on, deterministic=False
    shuffle: bool = False
    note: str = ""


def build_pipeline(wl: Workload, cfg: PipelineConfig, *, stamp: bool = False) -> tf.data.Dataset:
    """The workload's dataset with the techniques of ``cfg``; ``stamp`` adds timeline stamps.

    Elements are dicts ``image`` float32 ``(B, H, W, C)``, ``label`` int32, ``index`` int64.
    """
    par = AUTOTUNE if cfg.parallel_map else None
    det = None if not cfg.options else False  # None: follow Options (deterministic by default)
    decode, transform = decode_stage(wl), transform_stage(wl)
    if stamp:
        decode, transform = timed("decode", decode), timed("transform", transform)
    files = tf.data.Dataset.from_tensor_slices(wl.manifest.files)
    read_file = read_stage(wl, stamp)
    if cfg.cycle_length:
        ds = files.interleave(
            read_file,
            cycle_length=cfg.cycle_length,
            block_length=16,
            num_parallel_calls=AUTOTUNE,
            deterministic=det,
        )
    else:
        ds = files.flat_map(read_file)
    batch = wl.batch_size
    if cfg.vectorize:
        ds = ds.batch(batch).map(decode, num_parallel_calls=par, deterministic=det)
        if cfg.cache or cfg.shuffle:
            ds = ds.unbatch()  # cache and shuffle single examples
    else:
        ds = ds.map(decode, num_parallel_calls=par, deterministic=det)
    if cfg.cache:
        ds = ds.cache()
    if cfg.shuffle:
        ds = ds.shuffle(wl.num_examples, reshuffle_each_iteration=True)
    if cfg.vectorize:
        if cfg.cache or cfg.shuffle:
            ds = ds.batch(batch, drop_remainder=True)
        ds = ds.map(transform, num_parallel_calls=par, deterministic=det)
    else:
        ds = ds.map(transform, num_parallel_calls=par, deterministic=det).batch(batch)
    if cfg.prefetch:
        ds = ds.prefetch(AUTOTUNE)
    ds = ds.with_options(simulation_options())
    if cfg.options:
        options = tf.data.Options()
        options.autotune.enabled = True
        options.deterministic = False
        ds = ds.with_options(options)
    return ds


def _ladder(*steps: tuple[str, str, dict[str, Any]]) -> tuple[PipelineConfig, ...]:
    """Cumulative configs: each step is the previous config plus the flags it names."""
    configs = [PipelineConfig(steps[0][0], note=steps[0][1])]
    for name, note, flags in steps[1:]:
        configs.append(replace(configs[-1], name=name, note=note, **flags))
    return tuple(configs)


#: The seed text's techniques, applied one at a time (each row keeps the previous ones).
LADDER: tuple[PipelineConfig, ...] = _ladder(
    ("naive", "from_tensor_slices(files), read one file after another, map, batch", {}),
    ("+ prefetch", "prefetch(tf.data.AUTOTUNE)", {"prefetch": True}),
    ("+ parallel map", "map(num_parallel_calls=AUTOTUNE)", {"parallel_map": True}),
    ("+ interleave", "interleave(cycle_length=4, block_length=16, AUTOTUNE)", {"cycle_length": 4}),
    ("+ batch before map", "batch, then parse and transform whole batches", {"vectorize": True}),
    ("+ cache", "cache() decoded uint8 examples, augment after it", {"cache": True}),
    ("+ repeat", "repeat(): one iterator for all epochs", {"repeat": True}),
    ("+ Options", "Options: autotune.enabled, deterministic=False", {"options": True}),
)
#: The course's tuned pipeline: the ladder's last row, more files open than cores (reading is
#: latency-bound, not CPU-bound), and a full shuffle of the cached examples (training needs it).
TUNED = replace(
    LADDER[-1],
    name="course tuned",
    cycle_length=16,
    shuffle=True,
    note="+ cycle_length=16 (latency-bound reads) + shuffle(all cached examples)",
)


def naive_pipeline(wl: Workload, *, stamp: bool = False) -> tf.data.Dataset:
    """The seed's steps as written: sequential reads, per-example map, batch."""
    return build_pipeline(wl, LADDER[0], stamp=stamp)


def tuned_pipeline(wl: Workload, *, stamp: bool = False, shuffle: bool = True) -> tf.data.Dataset:
    """The course's tuned pipeline (:data:`TUNED`), optionally without its shuffle."""
    return build_pipeline(wl, replace(TUNED, shuffle=shuffle), stamp=stamp)


def guide_pipeline(wl: Workload) -> tf.data.Dataset:
    """The tf.data guide's optimized pipeline on this workload: ``interleave(AUTOTUNE)`` ->
    ``batch`` -> ``map(decode)`` -> ``cache`` -> ``map(augment)`` -> ``prefetch``; no shuffle."""
    files = tf.data.Dataset.from_tensor_slices(wl.manifest.files)
    return (
        files.interleave(read_stage(wl, False), num_parallel_calls=AUTOTUNE)
        .batch(wl.batch_size, drop_remainder=True)
        .map(decode_stage(wl), num_parallel_calls=AUTOTUNE)
        .cache()
        .map(transform_stage(wl), num_parallel_calls=AUTOTUNE)
        .prefetch(AUTOTUNE)
        .with_options(simulation_options())
    )


def cache_growth_bytes(placement: str, n: int) -> int:
    """Resident-memory growth of filling a ``cache()`` placed ``"before"`` or ``"after"`` the
    seed's 224x224 resize (:func:`utils.tf.pipelines.seed_preprocess`), on ``n`` random images.

    Meaningful in a fresh process only: a long-running one first reuses memory it freed.
    """
    import psutil

    from utils.tf.pipelines import seed_preprocess

    images = np.random.default_rng(0).integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    ds = tf.data.Dataset.from_tensor_slices((images, np.zeros(n, np.int64)))
    ds = (
        ds.cache().map(seed_preprocess)
        if placement == "before"
        else ds.map(seed_preprocess).cache()
    )
    for _ in ds.take(1):  # build everything once, so only the cache remains to grow
        pass
    before = psutil.Process().memory_info().rss
    for _ in ds:
        pass
    return psutil.Process().memory_info().rss - before
