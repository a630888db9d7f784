"""One worker of a TensorFlow ``MultiWorkerMirroredStrategy`` job (notebook 08).

    TF_CONFIG='{"cluster": {"worker": [...]}, "task": {"type": "worker", "index": I}}' \\
        python -m utils.tf.multiworker --out DIR [--try-fit]

A custom ``strategy.run`` loop over ``distribute_datasets_from_function`` (works); each worker
writes ``DIR/worker-<index>.npz`` with its losses and final weights. Then, with ``--try-fit``,
Keras 3 ``model.fit`` under the same strategy, which fails (keras-team/keras#20585): the worker
writes the error's type and message to ``DIR/fit-error-<index>.txt`` and exits 0, so the
notebook can show it. Imports TensorFlow.
"""

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # the rehearsal runs on CPU
os.environ["KERAS_BACKEND"] = "tensorflow"  # explicit: a preset "jax" would break the strategy

from utils import data, tf_cluster  # noqa: E402

# Check TF_CONFIG before TensorFlow reads it: a bad one otherwise hangs or fails deep inside.
TF_CONFIG = tf_cluster.parse_tf_config(os.environ.get("TF_CONFIG"))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from utils.keras import models  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--try-fit", action="store_true")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--global-batch", type=int, default=64)
    parser.add_argument("--train-images", type=int, default=512)
    args = parser.parse_args(argv)
    index = TF_CONFIG["task"]["index"]
    args.out.mkdir(parents=True, exist_ok=True)

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG, joins the others
    images, labels = data.make_standin(args.train_images, seed=0)
    x_all = data.to_float(images).reshape(len(images), -1)
    y_all = labels.astype(np.int32)

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        # Per-worker input: this pipeline keeps every n-th example (its shard), batched per replica.
        ds = tf.data.Dataset.from_tensor_slices((x_all, y_all))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        return ds.repeat().batch(ctx.get_per_replica_batch_size(args.global_batch), True)

    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = models.mlp(x_all.shape[1])
        optimizer = keras.optimizers.SGD(0.05, momentum=0.9)

    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step(it):
        def step(x, y):
            with tf.GradientTape() as tape:
                per_example = loss_fn(y, model(x, training=True))
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=args.global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            pairs = zip(grads, model.trainable_variables, strict=True)
            optimizer.apply_gradients(pairs)  # the all-reduce across workers happens here
            return loss

        return strategy.reduce("SUM", strategy.run(step, args=next(it)), axis=None)

    losses = [float(train_step(iterator)) for _ in range(args.steps)]
    for i, loss in enumerate(losses):
        print(f"worker {index} step {i} loss {loss:.6f}", flush=True)
    weights = np.concatenate([np.asarray(v).ravel() for v in model.trainable_variables])
    np.savez(args.out / f"worker-{index}.npz", losses=np.array(losses), weights=weights)

    if args.try_fit:  # the same model and data through Keras 3 model.fit
        try:
            model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            ds = dataset_fn(tf.distribute.InputContext()).take(args.steps)
            model.fit(ds, epochs=1, verbose=0)
            message = "model.fit ran without an error"
        except Exception as exc:  # noqa: BLE001 (the error is what we came to show)
            message = f"{type(exc).__name__}: {exc}"
        (args.out / f"fit-error-{index}.txt").write_text(message)


if __name__ == "__main__":
    main()
