"""The training-speed ladder on Keras 3 + TensorFlow, for Cloud TPU VMs with a TF image.

Importing this module imports TensorFlow. The free TPUs (Colab, Kaggle) run Keras on JAX:
notebook 09 and ``make bench`` climb the ladder there (:mod:`utils.keras.ladder`). This module
climbs the *same* rungs with the TensorFlow backend, for a Cloud TPU VM whose image ships
``tensorflow-tpu`` (and for this CPU), measured the same way (:func:`utils.compare.compare`:
interleaved rounds, warm-up excluded, the peak measured in every round):

- :func:`matmul`: the TF matmul that MFU divides by on a CPU (XLA-compiled, at the training's
  dtype); :func:`peaks` turns it into ``compare(peaks=...)`` callables through
  :func:`utils.mfu.measured_peak` (the course's one peak), or the published peak on a TPU.
- :func:`ladder_rungs`: the rungs, their models built inside the strategy's scope.
- :func:`main`: ``KERAS_BACKEND=tensorflow python -m utils.tf.train_ladder`` (part of ``make
  bench``) prints the table and a verdict per step.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from utils import data, mfu

__all__ = ["ladder_rungs", "main", "matmul", "peaks"]

DTYPES = ("float32", "bfloat16")


def matmul(n: int = 1024, dtype: str = "float32") -> Callable[[], object]:
    """A zero-argument callable: one XLA-compiled ``(n, n) @ (n, n)`` at ``dtype``, waited for."""
    a = tf.random.stateless_normal((n, n), seed=(0, 1), dtype=dtype)
    b = tf.random.stateless_normal((n, n), seed=(0, 2), dtype=dtype)
    product = tf.function(tf.linalg.matmul, jit_compile=True)
    return lambda: product(a, b).numpy()


def peaks(
    n: int = 1024,
    *,
    tpu_generation: str | None = None,
    chips: int = 1,
    builder: Callable[[int, str], Callable[[], object]] = matmul,
) -> dict[str, Callable[[], float]]:
    """``{dtype: callable measuring FLOP/s now}`` for ``compare(peaks=...)``, one per dtype.

    On a TPU both dtypes divide by the published bf16 peak x chips (float32 matmuls run on the
    bf16 matrix unit); elsewhere each dtype's matmul is measured with :func:`mfu.measured_peak`.
    """
    if tpu_generation is not None:
        published = mfu.peak_flops(tpu_generation=tpu_generation, chips=chips)
        return {dtype: (lambda: published) for dtype in DTYPES}
    out = {}
    for dtype in DTYPES:
        fn = builder(n, dtype)
        out[dtype] = lambda fn=fn: mfu.measured_peak(fn, n)
    return out


def ladder_rungs(
    x: np.ndarray,
    y: np.ndarray,
    *,
    batch: int = 128,
    steps_per_execution: int = 4,
    strategy: tf.distribute.Strategy | None = None,
) -> list:
    """The ladder's rungs (:func:`utils.keras.ladder.ladder_specs`) with their models built in
    ``strategy``'s scope (default: TensorFlow's default strategy)."""
    from utils.keras import ladder  # Keras reads KERAS_BACKEND at its first import

    specs = ladder.ladder_specs(
        batch,
        steps_per_execution=steps_per_execution,
    )
    with (strategy or tf.distribute.get_strategy()).scope():
        return ladder.build_rungs(specs, x, y)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The training-speed ladder on Keras + TF")
    parser.add_argument("--images", type=int, default=1_100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        parser.error("run with KERAS_BACKEND=tensorflow (this is the TensorFlow ladder)")
    from utils.keras import ladder

    cifar = data.load_cifar10(source="standin", subset=args.images, normalize=True)
    rungs = ladder_rungs(cifar.x_train, cifar.y_train.astype("int32"))
    print(
        "TensorFlow ladder (for Cloud TPU VMs with a TF image), on",
        tf.config.list_logical_devices()[0],
    )
    result = ladder.compare_rungs(rungs, peaks=peaks(), rounds=args.rounds, warmup=1)
    print(ladder.report(result, rungs, cifar.x_test, cifar.y_test.astype("int32")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
