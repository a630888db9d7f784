"""Notebook 07's records in ``tf.data``: the same decode and augmentation as its Grain pipeline.

A record (``utils.jax.grain_pipeline.encode``) is one label byte followed by the image as PNG.
:func:`augment` is the TensorFlow twin of ``utils.jax.grain_pipeline.augment_batch``: a random
crop (60-100 % of the area, aspect 3/4-4/3) resized back bilinearly, a random flip, scaling to
[0, 1], on a batch.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["MIN_CROP_AREA", "augment", "decode"]

MIN_CROP_AREA = 0.6


def decode(record: tf.Tensor, shape: tuple[int, int, int] = (32, 32, 3)) -> dict[str, tf.Tensor]:
    """``image`` uint8 of ``shape`` and ``label`` int32 of one record."""
    label = tf.io.decode_raw(tf.strings.substr(record, 0, 1), tf.uint8)[0]
    png = tf.strings.substr(record, 1, tf.strings.length(record) - 1)
    image = tf.ensure_shape(tf.io.decode_png(png, channels=shape[2]), shape)
    return {"image": image, "label": tf.cast(label, tf.int32)}


def augment(batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Random crop resized back, random flip, scale to [0, 1], on a batch ``(B, H, W, C)``."""
    images = tf.cast(batch["image"], tf.float32)
    n, size = tf.shape(images)[0], images.shape[1:3]  # static: decode fixed the shape
    area = tf.random.uniform([n], MIN_CROP_AREA, 1.0)
    aspect = tf.exp(tf.random.uniform([n], np.log(3 / 4), np.log(4 / 3)))
    h = tf.minimum(tf.sqrt(area / aspect), 1.0)
    w = tf.minimum(tf.sqrt(area * aspect), 1.0)
    y0, x0 = tf.random.uniform([n]) * (1.0 - h), tf.random.uniform([n]) * (1.0 - w)
    boxes = tf.stack([y0, x0, y0 + h, x0 + w], axis=1)
    out = tf.image.crop_and_resize(images, boxes, tf.range(n), crop_size=size) / 255.0
    flip = tf.random.uniform([n]) < 0.5
    out = tf.where(flip[:, None, None, None], tf.reverse(out, axis=[2]), out)
    return {"image": out, "label": batch["label"]}
