"""Training helpers for the Keras notebooks (imports TensorFlow and Keras).

- :class:`EpochTimer` (the course's one Keras epoch timer, from :mod:`utils.keras.timing`).
- :func:`make_dataset_fn`: the ``dataset_fn(input_context)`` that
  ``strategy.distribute_datasets_from_function`` wants: each input pipeline takes its own shard of
  the examples and batches them at the per-replica batch size.
- :func:`make_train_loop`: a custom training loop that runs several steps per ``tf.function`` call
  (``tf.range`` over a step count passed as a tensor, so a new count does not retrace).
- :func:`train_replicated` and :func:`max_weight_difference`: the proof that synchronous data
  parallelism is one big batch split across replicas (same weights with 1 and with N replicas).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import keras
import numpy as np
import tensorflow as tf

from utils.keras.timing import EpochTimer, EpochTiming
from utils.tf.pipelines import make_dataset

__all__ = [
    "EpochTimer",
    "EpochTiming",
    "TrainLoop",
    "make_dataset_fn",
    "make_train_loop",
    "max_weight_difference",
    "per_replica_view",
    "train_replicated",
]

# --------------------------------------------------------------------------------------------
# Distributed input for a custom loop
# --------------------------------------------------------------------------------------------


def make_dataset_fn(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    global_batch_size: int,
    training: bool,
    seed: int = 0,
) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """A ``dataset_fn`` for ``strategy.distribute_datasets_from_function``.

    Each input pipeline (one per host/worker) keeps every ``num_input_pipelines``-th example
    starting at its ``input_pipeline_id`` (no example in two shards, none lost), and batches at
    the *per-replica* batch size ``global_batch_size // num_replicas_in_sync``; the strategy
    hands consecutive batches of a pipeline to its replicas.
    """

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        per_replica = ctx.get_per_replica_batch_size(global_batch_size)
        step = ctx.num_input_pipelines
        return make_dataset(
            images[ctx.input_pipeline_id :: step],
            labels[ctx.input_pipeline_id :: step],
            batch_size=per_replica,
            training=training,
            seed=seed + ctx.input_pipeline_id,
            drop_remainder=True,
        )

    return dataset_fn


# --------------------------------------------------------------------------------------------
# A custom training loop with several steps per call
# --------------------------------------------------------------------------------------------


@dataclass
class TrainLoop:
    """What :func:`make_train_loop` builds: the compiled loop, its metrics and a trace counter."""

    run: Callable[[object, tf.Tensor], None]
    loss: keras.metrics.Mean
    accuracy: keras.metrics.SparseCategoricalAccuracy
    traces: list[int] = field(default_factory=list)

    @property
    def trace_count(self) -> int:
        """How many times ``run`` was traced (Python ran its body): should stay at 1."""
        return len(self.traces)

    def reset(self) -> None:
        """Zero the metrics (e.g. at the start of an epoch)."""
        self.loss.reset_state()
        self.accuracy.reset_state()


def make_train_loop(
    strategy: tf.distribute.Strategy,
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    *,
    global_batch_size: int,
) -> TrainLoop:
    """Build ``loop.run(iterator, steps)``: ``steps`` synchronous training steps in one call.

    Inside: ``strategy.run(step)`` on every replica; each replica's loss is
    ``tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)`` (a sum over its share
    divided by the *global* batch), so the optimizer's all-reduce (a sum over replicas) yields the
    mean gradient of the whole global batch. ``steps`` must be a tensor: a Python int would be a
    new constant, and so a new trace, for every value.
    Create ``model`` and ``optimizer`` under ``strategy.scope()``.
    """
    with strategy.scope():
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        loss_metric = keras.metrics.Mean(name="loss")
        acc_metric = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
        if not optimizer.built:
            # Create the optimizer's slots now: variables created inside the first call of a
            # tf.function make it trace a second time.
            optimizer.build(model.trainable_variables)
    loop = TrainLoop(run=None, loss=loss_metric, accuracy=acc_metric)  # type: ignore[arg-type]

    def step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = loss_fn(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        acc_metric.update_state(labels, logits)
        return loss

    @tf.function
    def run(iterator: object, steps: tf.Tensor) -> None:
        loop.traces.append(1)  # Python side effect: happens once per trace, not per call
        for _ in tf.range(steps):
            images, labels = next(iterator)
            per_replica_loss = strategy.run(step, args=(images, labels))
            # Each replica's loss is already divided by the global batch: summing gives the mean.
            loss_metric.update_state(strategy.reduce("SUM", per_replica_loss, axis=None))

    loop.run = run
    return loop


# --------------------------------------------------------------------------------------------
# 1 replica versus N replicas: the same training
# --------------------------------------------------------------------------------------------


def train_replicated(
    strategy: tf.distribute.Strategy,
    model_fn: Callable[[], keras.Model],
    initial_weights: Sequence[np.ndarray],
    images: np.ndarray,
    labels: np.ndarray,
    *,
    global_batch_size: int,
    steps: int,
    learning_rate: float = 0.01,
) -> list[np.ndarray]:
    """Train a fresh ``model_fn()`` from ``initial_weights`` for ``steps`` steps under ``strategy``.

    Batches are the consecutive, unshuffled global batches of ``images`` (float32 in [0, 1]) and
    ``labels``, split across replicas by ``experimental_distribute_dataset``. Plain SGD keeps the
    update a simple function of the gradient. Returns the final weights as numpy arrays.
    """
    with strategy.scope():
        model = model_fn()
        model.set_weights(list(initial_weights))
        optimizer = keras.optimizers.SGD(learning_rate=learning_rate)
    n = global_batch_size * steps
    ds = tf.data.Dataset.from_tensor_slices(
        (images[:n].astype(np.float32), labels[:n].astype(np.int32))
    ).batch(global_batch_size, drop_remainder=True)
    iterator = iter(strategy.experimental_distribute_dataset(ds))
    loop = make_train_loop(strategy, model, optimizer, global_batch_size=global_batch_size)
    loop.run(iterator, tf.constant(steps))
    return [np.asarray(w) for w in model.get_weights()]


def max_weight_difference(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Largest absolute element-wise difference between two lists of weight arrays."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} vs {len(b)} weight arrays")
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(a, b, strict=True)
    )


def per_replica_view(
    strategy: tf.distribute.Strategy,
    model: keras.Model,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    global_batch_size: int,
) -> dict[str, np.ndarray]:
    """One global batch, seen replica by replica (no update is applied).

    Returns ``indices`` (replicas x per-replica batch: which examples each replica got),
    ``local_grad`` (each replica's gradient of the last layer's bias, from its share, scaled by
    the global batch) and ``all_reduced`` (their sum over replicas, what every replica applies).
    """
    n = global_batch_size
    ds = tf.data.Dataset.from_tensor_slices(
        (images[:n].astype(np.float32), labels[:n].astype(np.int32), tf.range(n))
    ).batch(n, drop_remainder=True)
    batch = next(iter(strategy.experimental_distribute_dataset(ds)))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    bias = model.trainable_variables[-1]

    def local(x: tf.Tensor, y: tf.Tensor, idx: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x)), global_batch_size=n)
        return idx, tape.gradient(loss, bias)

    @tf.function
    def run(b: tuple) -> tuple:
        idx, grad = strategy.run(local, args=b)
        return idx, grad, strategy.reduce("SUM", grad, axis=None)

    idx, grad, total = run(batch)
    idx_list = strategy.experimental_local_results(idx)
    grad_list = strategy.experimental_local_results(grad)
    return {
        "indices": np.stack([np.asarray(i) for i in idx_list]),
        "local_grad": np.stack([np.asarray(g) for g in grad_list]),
        "all_reduced": np.asarray(total),
    }
