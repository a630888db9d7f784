"""The course's tf.data input pipeline for in-memory image arrays (imports TensorFlow).

The order of the stages is the point (the tf.data performance guide,
https://www.tensorflow.org/guide/data_performance): ``from_tensor_slices`` (still ``uint8``) ->
``cache()`` (the raw examples; anything random comes after it) -> ``shuffle`` (before batching,
new batches every epoch) -> ``batch(drop_remainder)`` (a static shape for XLA) ->
``map(scale, AUTOTUNE)`` on whole batches -> ``prefetch(AUTOTUNE)``. Training allows reordering
(``deterministic=False``); evaluation keeps the order.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE

__all__ = ["make_dataset", "seed_preprocess"]


def seed_preprocess(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The seed text's per-example preprocessing: resize to 224x224, cast, divide by 255.

    Kept to show its cost: 49x the pixels of a 32x32 CIFAR-10 image, which only a model built
    for 224x224 inputs needs (the course's CNN takes 32x32), and one call per image.
    """
    image = tf.image.resize(image, [224, 224])
    image = tf.cast(image, tf.float32) / 255.0
    return image, label


def make_dataset(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    batch_size: int,
    training: bool,
    seed: int = 0,
    drop_remainder: bool | None = None,
) -> tf.data.Dataset:
    """Batches ``(images float32 (B, H, W, C) in [0, 1], labels int32 (B,))`` of uint8 arrays.

    ``batch_size`` is the *global* batch when a strategy distributes it. ``training``: shuffle
    the whole cached set (a new order every epoch, seeded by ``seed``), drop the last partial
    batch, allow reordering. ``drop_remainder``: None follows ``training``.
    """
    if np.shape(labels) != (len(images),):
        raise ValueError(f"labels must be ({len(images)},); got shape {np.shape(labels)}")
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    if training:
        ds = ds.shuffle(len(images), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=training if drop_remainder is None else drop_remainder)
    ds = ds.map(
        lambda x, y: (tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)),
        num_parallel_calls=AUTOTUNE,
        deterministic=not training,
    )
    options = tf.data.Options()
    options.autotune.enabled = True  # the default, stated
    options.deterministic = not training
    return ds.prefetch(AUTOTUNE).with_options(options)
