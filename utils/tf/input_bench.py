"""Notebook 07's records in ``tf.data``: TFRecord shards, and the ladder of the seed's techniques.

A record (``utils.jax.grain_pipeline.encode``) is one label byte followed by the image as PNG.

- :func:`write_tfrecords`: the records as a few TFRecord shards (record ``i`` in shard
  ``i % shards``), so ``interleave`` has files to read side by side.
- :func:`decode`: one record -> ``image`` uint8 ``(H, W, C)`` and ``label`` int32.
- :func:`augment`: the TensorFlow twin of ``utils.jax.grain_pipeline.augment_batch`` (a random
  crop of 60-100 % of the area, aspect 3/4-4/3, resized back bilinearly, a random flip), on one
  example or a batch; uint8 in, uint8 out: the model scales to [0, 1] on the device.
- :class:`Chain` and :data:`LADDER`: the tuning ladder as data, one technique switched on per
  step (a test checks that consecutive steps differ in exactly one field);
  :meth:`Chain.build` makes the ``tf.data`` pipeline a step describes; :data:`PAYS_WHEN` says
  when each step's technique pays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

__all__ = [
    "AUTOTUNE",
    "LADDER",
    "MIN_CROP_AREA",
    "PAYS_WHEN",
    "Chain",
    "augment",
    "decode",
    "write_tfrecords",
]

MIN_CROP_AREA = 0.6
AUTOTUNE = tf.data.AUTOTUNE


def write_tfrecords(records: Sequence[bytes], folder: str, shards: int) -> list[str]:
    """``records`` as ``shards`` TFRecord files in ``folder`` (record i in shard i % shards)."""
    paths = [f"{folder}/train-{s:05d}-of-{shards:05d}.tfrecord" for s in range(shards)]
    for s, path in enumerate(paths):
        with tf.io.TFRecordWriter(path) as writer:
            for record in records[s::shards]:
                writer.write(record)
    return paths


def decode(record: tf.Tensor, shape: tuple[int, int, int] = (32, 32, 3)) -> dict[str, tf.Tensor]:
    """``image`` uint8 of ``shape`` and ``label`` int32 of one record."""
    label = tf.io.decode_raw(tf.strings.substr(record, 0, 1), tf.uint8)[0]
    png = tf.strings.substr(record, 1, tf.strings.length(record) - 1)
    image = tf.ensure_shape(tf.io.decode_png(png, channels=shape[2]), shape)
    return {"image": image, "label": tf.cast(label, tf.int32)}


def augment(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Random crop resized back, random flip: one image ``(H, W, C)`` or a batch ``(B, H, W, C)``,
    uint8 in and out (rounded)."""
    one = example["image"].shape.rank == 3
    images = tf.cast(example["image"][None] if one else example["image"], tf.float32)
    n, size = tf.shape(images)[0], images.shape[1:3]  # static: decode fixed the shape
    area = tf.random.uniform([n], MIN_CROP_AREA, 1.0)
    aspect = tf.exp(tf.random.uniform([n], np.log(3 / 4), np.log(4 / 3)))
    h = tf.minimum(tf.sqrt(area / aspect), 1.0)
    w = tf.minimum(tf.sqrt(area * aspect), 1.0)
    y0, x0 = tf.random.uniform([n]) * (1.0 - h), tf.random.uniform([n]) * (1.0 - w)
    boxes = tf.stack([y0, x0, y0 + h, x0 + w], axis=1)
    out = tf.image.crop_and_resize(images, boxes, tf.range(n), crop_size=size)
    flip = tf.random.uniform([n]) < 0.5
    out = tf.where(flip[:, None, None, None], tf.reverse(out, axis=[2]), out)
    out = tf.saturate_cast(tf.round(out), tf.uint8)
    return {"image": out[0] if one else out, "label": example["label"]}


@dataclass(frozen=True)
class Chain:
    """One step of the ladder: which of the seed's techniques the ``tf.data`` chain uses.

    Off, everything is the naive chain: the files read one after another, ``map`` one example
    at a time in one thread, no cache, nothing ready ahead, the default options, and the
    augmentation per example. ``cache`` keeps the *decoded* images, before the random
    augmentation, so every epoch draws new crops and flips.
    """

    interleave: bool = False  # files read side by side: interleave(num_parallel_calls=AUTOTUNE)
    parallel_map: bool = False  # map(num_parallel_calls=AUTOTUNE): examples on a thread pool
    cache: bool = False  # cache() after decode: later epochs skip reading and decoding
    prefetch: bool = False  # prefetch(AUTOTUNE): batches made while the step runs
    options: bool = False  # tf.data.Options: autotune on, deterministic=False
    per_batch: bool = False  # batch, then augment whole batches (vectorised)
    augment: bool = True  # False: the host ships the cached images; the chip augments them

    def build(self, files: Sequence[str], batch: int, *, records: int, seed: int = 0):
        """One epoch, shuffled (a buffer of ``records``: all of them), in whole batches."""
        calls = AUTOTUNE if self.parallel_map else None
        if self.interleave:
            ds = tf.data.Dataset.from_tensor_slices(list(files)).interleave(
                tf.data.TFRecordDataset, cycle_length=len(files), num_parallel_calls=AUTOTUNE
            )
        else:
            ds = tf.data.TFRecordDataset(list(files))
        ds = ds.map(decode, num_parallel_calls=calls)
        if self.cache:
            ds = ds.cache()
        ds = ds.shuffle(records, seed=seed)
        if not self.augment:
            ds = ds.batch(batch, drop_remainder=True)
        elif self.per_batch:
            ds = ds.batch(batch, drop_remainder=True).map(augment, num_parallel_calls=calls)
        else:
            ds = ds.map(augment, num_parallel_calls=calls).batch(batch, drop_remainder=True)
        if self.prefetch:
            ds = ds.prefetch(AUTOTUNE)
        if self.options:
            options = tf.data.Options()
            options.autotune.enabled = True
            options.deterministic = False
            ds = ds.with_options(options)
        return ds


_FAST = {"interleave": True, "parallel_map": True, "cache": True}  # steps 4 to 7 have these on
LADDER: tuple[tuple[str, Chain], ...] = (
    ("1 naive chain", Chain()),
    ("2 interleave files", Chain(interleave=True)),
    ("3 parallel map", Chain(interleave=True, parallel_map=True)),
    ("4 cache decoded", Chain(**_FAST)),
    ("5 prefetch", Chain(**_FAST, prefetch=True)),
    ("6 options", Chain(**_FAST, prefetch=True, options=True)),
    ("7 per-batch augment", Chain(**_FAST, prefetch=True, options=True, per_batch=True)),
)
"""The ladder, one technique switched on per step, in the order the seed teaches them."""

PAYS_WHEN: dict[str, str] = {
    "2 interleave files": "each read waits, as on cloud storage; files just written here are read "
    "from memory, so its threads have nothing to overlap and only add hand-offs",
    "3 parallel map": "the host has idle cores for the extra calls",
    "4 cache decoded": "reading and decoding cost more than replaying the cache",
    "5 prefetch": "the consumer is busy between batches, as a training loop is; a timing loop "
    "that asks for the next batch at once leaves it little to overlap",
    "6 options": "elements take uneven time, so handing them over in order makes the fast wait",
    "7 per-batch augment": "a call's overhead outweighs the work on one image",
}
"""For each step after the first: when its technique pays (printed where a step did not)."""
