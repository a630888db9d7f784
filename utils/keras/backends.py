"""The TensorFlow and JAX backends of Keras, side by side (imports Keras).

:func:`train_steps_child` is the body of notebook 02's comparison: it runs in a fresh process per
backend (:mod:`utils.fresh_process`: one framework per process), with ``KERAS_BACKEND`` set by the
parent before Keras is imported.
"""

from __future__ import annotations

import time
from typing import Any

import keras
import numpy as np

from utils import data
from utils.keras import models

__all__ = ["train_steps_child"]


def train_steps_child(
    way: str,
    *,
    train_images: int,
    batch: int,
    steps_per_execution: int,
    steady_epochs: int = 2,
    seed: int = 0,
) -> dict[str, float]:
    """Train the seed CNN one of three ways in *this* process and time it (run it in a fresh one).

    ``way``: ``"tf_seed"`` (TensorFlow backend, ``fit`` on numpy with Keras' default compile, as
    the seed), ``"tf_course"`` (TensorFlow backend, ``tf.data`` with ``drop_remainder``,
    ``jit_compile=True``, ``steps_per_execution``), ``"jax"`` (JAX backend, ``fit`` on numpy,
    ``jit_compile=True``, ``steps_per_execution``). ``KERAS_BACKEND`` must already be set to match.
    Same stand-in data, batch, float32 and number of steps for all three. Returns first-epoch
    time (trace + compile + one epoch), steady step time, images/s and the final training loss.
    """
    want = "jax" if way == "jax" else "tensorflow"
    if keras.config.backend() != want:
        raise RuntimeError(f"way {way!r} needs KERAS_BACKEND={want}, got {keras.config.backend()}")
    cifar = data.load_cifar10(source="standin", subset=train_images, normalize=True, seed=seed)
    x, y = data.drop_remainder(cifar.x_train, cifar.y_train, batch=batch)
    steps = len(x) // batch
    np.random.seed(seed)
    model = models.seed_cnn()
    rng = np.random.default_rng(seed)  # same initial weights for every way
    model.set_weights(
        [rng.normal(0, 0.05, w.shape).astype(np.float32) for w in model.get_weights()]
    )
    kwargs: dict[str, Any] = {}
    if way != "tf_seed":
        kwargs = {"jit_compile": True, "steps_per_execution": steps_per_execution}
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **kwargs,
    )
    if way == "tf_course":
        import tensorflow as tf  # the TF backend is loaded already: this costs nothing

        def dataset() -> Any:
            ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=seed)
            return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

        def fit(epochs: int) -> Any:
            return model.fit(dataset(), epochs=epochs, verbose=0)
    else:

        def fit(epochs: int) -> Any:
            return model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=True, verbose=0)

    start = time.perf_counter()
    fit(1)
    first_epoch_s = time.perf_counter() - start
    start = time.perf_counter()
    history = fit(steady_epochs)
    steady_s = time.perf_counter() - start
    step_s = steady_s / (steady_epochs * steps)
    return {
        "first_epoch_s": first_epoch_s,
        "compile_s": max(first_epoch_s - steps * step_s, 0.0),
        "step_s": step_s,
        "images_per_s": batch / step_s,
        "final_loss": float(history.history["loss"][-1]),
        "steps": float(steps * (1 + steady_epochs)),
    }
