"""tf.data input pipelines for in-memory image arrays (imports TensorFlow).

One function, :func:`make_dataset`, builds the input pipeline the training notebooks use; the
preprocessing functions it maps are public so a notebook can show them one at a time.

The order of the stages is the point of the module (see the tf.data performance guide,
https://www.tensorflow.org/guide/data_performance):

1. ``from_tensor_slices`` - one element per example, still ``uint8`` (4x smaller than float32).
2. ``cache()`` - keep the *raw* examples in memory after the first pass; whatever comes later
   (shuffle, augmentation) must differ between epochs, so it has to come after the cache.
3. ``shuffle(buffer)`` - before batching, so each epoch has different batches.
4. ``batch(batch_size, drop_remainder)`` - before ``map``: one vectorised call per batch instead
   of one small call per image (the guide's "vectorizing mapping"). ``drop_remainder=True`` gives
   every batch the same static shape, which XLA and TPUs need (a new shape means a recompile).
5. ``map(preprocess, num_parallel_calls=AUTOTUNE)`` - cast, scale to [0, 1], optional flip/crop,
   on whole batches, as many batches at a time as the autotuner finds useful.
6. ``prefetch(AUTOTUNE)`` - the input pipeline works on the next batches while the accelerator
   runs the current step.

``Options``: autotuning on (the default, stated so a reader sees it) and ``deterministic=False``
for training, so a slow batch does not hold up the faster ones behind it (the order of batches
then varies a little between runs; evaluation keeps the order).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE

# The seed text resized CIFAR-10 to 224x224 (the input size of ImageNet models such as ResNet-50).
SEED_IMAGE_SIZE = 224
# Padding (pixels per side) of the random-crop augmentation: pad to 40x40, crop back to 32x32.
CROP_PADDING = 4

__all__ = [
    "AUTOTUNE",
    "augment_batch",
    "make_dataset",
    "pipeline_options",
    "preprocess_batch",
    "scale_images",
    "seed_preprocess",
]


def seed_preprocess(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The seed text's per-example preprocessing: resize to 224x224, cast, divide by 255.

    Kept to show its cost: resizing a 32x32 CIFAR-10 image to 224x224 makes 49x more pixels to
    compute and to ship to the accelerator, which only pays off for a model built for 224x224
    inputs (the course's CNN takes 32x32). It also runs once per image (map before batch).
    ``tf.image.resize`` already returns float32 in [0, 255]; the cast is a no-op kept for clarity.
    """
    image = tf.image.resize(image, [SEED_IMAGE_SIZE, SEED_IMAGE_SIZE])
    image = tf.cast(image, tf.float32) / 255.0
    return image, label


def scale_images(images: tf.Tensor) -> tf.Tensor:
    """Cast ``uint8`` images (one image or a batch) to float32 in [0, 1]."""
    return tf.cast(images, tf.float32) * (1.0 / 255.0)


def augment_batch(images: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Random horizontal flip and random 32x32 crop of a zero-padded 40x40 image, per image.

    ``images``: a batch ``(B, H, W, C)`` of any dtype (run it on ``uint8``: less data to move).
    ``seed``: shape ``(2,)`` integer tensor; stateless random ops make the result a pure function
    of (images, seed), so a pipeline that feeds a fresh seed per batch is reproducible.

    Vectorised: one op per batch, a different flip and crop offset per image (``tf.image.
    random_crop`` on a batch would cut every image at the same place).
    """
    flip_seed, crop_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))
    images = tf.image.stateless_random_flip_left_right(images, seed=flip_seed)
    shape = tf.shape(images)
    batch, height, width = shape[0], shape[1], shape[2]
    pad = CROP_PADDING
    padded = tf.pad(images, [[0, 0], [pad, pad], [pad, pad], [0, 0]])
    offsets = tf.random.stateless_uniform(
        [batch, 2], seed=crop_seed, minval=0, maxval=2 * pad + 1, dtype=tf.int32
    )
    rows = offsets[:, :1] + tf.range(height)[tf.newaxis, :]  # (B, H) row indices per image
    cols = offsets[:, 1:] + tf.range(width)[tf.newaxis, :]  # (B, W)
    cropped = tf.gather(padded, rows, axis=1, batch_dims=1)  # (B, H, W + 2 pad, C)
    cropped = tf.gather(cropped, cols, axis=2, batch_dims=1)  # (B, H, W, C)
    # Keep whatever static shape the input had (batch size, 32, 32, 3): XLA wants it.
    return tf.ensure_shape(cropped, images.shape)


def preprocess_batch(
    images: tf.Tensor,
    labels: tf.Tensor,
    seed: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """The course's batch preprocessing: optional augmentation, then float32 in [0, 1].

    Augmentation (when ``seed`` is given) runs on the ``uint8`` batch, before the cast. Labels
    become int32 (what Keras' sparse losses and TPUs handle natively; int64 is emulated on TPU).
    """
    if seed is not None:
        images = augment_batch(images, seed)
    return scale_images(images), tf.cast(labels, tf.int32)


def pipeline_options(*, training: bool) -> tf.data.Options:
    """The ``tf.data.Options`` of the course's pipelines.

    ``autotune.enabled``: the runtime sizes every ``AUTOTUNE`` parallelism and buffer (on by
    default; the seed's ``experimental_optimization.autotune`` is the old spelling).
    ``deterministic``: False for training (elements may come out of parallel stages in the order
    they finish), True for evaluation.
    """
    options = tf.data.Options()
    options.autotune.enabled = True
    options.deterministic = not training
    return options


def make_dataset(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    batch_size: int,
    training: bool,
    cache: bool = True,
    shuffle_buffer: int | None = None,
    augment: bool = False,
    seed: int = 0,
    drop_remainder: bool | None = None,
) -> tf.data.Dataset:
    """The course's tuned input pipeline for in-memory images (see the module docstring).

    Args:
        images: ``uint8`` array ``(N, H, W, C)`` (CIFAR-10: ``(N, 32, 32, 3)``).
        labels: integer array ``(N,)``.
        batch_size: examples per batch (the *global* batch when a strategy distributes it).
        training: shuffle, optionally augment, drop the last partial batch, allow reordering.
        cache: cache the raw examples in memory after the first epoch. With numpy arrays the data
            is already in memory and caching costs one more copy; it is here so the same recipe
            works when the source is files (TFRecords), where it saves re-reading every epoch.
        shuffle_buffer: examples held by ``shuffle``; ``None`` = the whole dataset (a perfect
            shuffle; the buffer holds ``uint8`` examples, about 150 MB for CIFAR-10's 50,000).
            A small buffer only mixes neighbours (notebook 07 shows it).
        augment: random flip and crop per image (training only).
        seed: seeds shuffling and augmentation; each epoch still differs from the previous one.
        drop_remainder: ``None`` = ``training``. True gives a static batch dimension.

    Returns:
        A dataset of ``(images float32 (B, H, W, C) in [0, 1], labels int32 (B,))``.
    """
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim != 4:
        raise ValueError(f"images must be (N, H, W, C); got shape {images.shape}")
    if labels.shape != (images.shape[0],):
        raise ValueError(f"labels must be ({images.shape[0]},); got shape {labels.shape}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    if augment and not training:
        raise ValueError("augment=True only makes sense with training=True")
    if drop_remainder is None:
        drop_remainder = training

    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    if cache:
        ds = ds.cache()
    if training:
        buffer = len(images) if shuffle_buffer is None else shuffle_buffer
        if buffer < 1:
            raise ValueError(f"shuffle_buffer must be >= 1; got {buffer}")
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if augment:
        # A fresh (2,) seed per batch from a seeded random stream, new values every epoch.
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(
            2, drop_remainder=True
        )
        ds = tf.data.Dataset.zip((ds, seeds)).map(
            lambda batch, s: preprocess_batch(batch[0], batch[1], s),
            num_parallel_calls=AUTOTUNE,
            deterministic=not training,
        )
    else:
        ds = ds.map(preprocess_batch, num_parallel_calls=AUTOTUNE, deterministic=not training)
    ds = ds.prefetch(AUTOTUNE)
    return ds.with_options(pipeline_options(training=training))
