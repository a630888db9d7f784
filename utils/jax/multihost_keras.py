"""One "host" of a data-parallel Keras 3 job on the JAX backend (notebook 08).

    python -m utils.jax.multihost_keras --out DIR [--steps 12 --global-batch 64]

The Keras spelling of ``utils.jax.multihost_worker``: ``keras.distribution.initialize`` joins
the job (it calls ``jax.distributed.initialize``), ``DataParallel`` spans every process's
devices, and each process passes ``model.fit`` only its own rows of every global batch
(``auto_shard_dataset=False``: Keras shards only ``tf.data`` input itself). Writes
``DIR/keras-<rank>.npz`` (loss, final weights). Importing this module imports JAX and Keras.
"""

import argparse
import os
from pathlib import Path

from utils.jax import multihost_env

multihost_env.prepare()  # rehearsal: CPU devices (overrides JAX_PLATFORMS); no-op on a slice
os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from utils import data  # noqa: E402
from utils.keras import models  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--global-batch", type=int, default=64)
    parser.add_argument("--train-images", type=int, default=512)
    args = parser.parse_args(argv)

    if multihost_env.is_rehearsal():  # the launcher's variables; on a slice: initialize()
        job = multihost_env.launcher_args()
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        keras.distribution.initialize(
            job["coordinator_address"], job["num_processes"], job["process_id"]
        )
    else:
        keras.distribution.initialize()
    num_processes, rank = jax.process_count(), jax.process_index()
    distribution = keras.distribution.DataParallel(
        devices=keras.distribution.list_devices(), auto_shard_dataset=False
    )
    keras.distribution.set_distribution(distribution)

    images, labels = data.make_standin(args.train_images, seed=0)
    x_all = data.to_float(images).reshape(len(images), -1)
    per_process = args.global_batch // num_processes  # this process's rows of each global batch:
    steps = np.arange(args.steps)[:, None] * args.global_batch + rank * per_process
    rows = (steps + np.arange(per_process)).ravel() % len(x_all)
    x_mine, y_mine = x_all[rows], labels[rows].astype(np.int32)

    keras.utils.set_random_seed(0)
    model = models.mlp(x_all.shape[1])
    model.compile(
        keras.optimizers.SGD(0.05, momentum=0.9),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(x_mine, y_mine, batch_size=per_process, epochs=1, shuffle=False, verbose=0)
    weights = np.concatenate(
        [np.asarray(v.value.addressable_data(0)).ravel() for v in model.trainable_variables]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez(args.out / f"keras-{rank}.npz", loss=history.history["loss"], weights=weights)
    multihost_env.leave()


if __name__ == "__main__":
    main()
