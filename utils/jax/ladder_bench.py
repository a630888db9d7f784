"""``make bench``: the training-speed ladder on Keras 3 + JAX (the free TPUs' stack), with verdicts.

``KERAS_BACKEND=jax python -m utils.jax.ladder_bench [--images N] [--rounds R]`` climbs the rungs of
:mod:`utils.keras.ladder` on the offline stand-in data, measured with :func:`utils.compare.compare`
(interleaved rounds, the peak at each rung's dtype measured every round: the jitted matmul of
:mod:`utils.jax.peak` on a CPU, the published peak on a TPU), and prints the table and a verdict
per step. Importing this module imports JAX and Keras: run it in its own process.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from functools import partial

from utils import compare, data, mfu, runtime
from utils.jax import peak as jax_peak


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The training-speed ladder on Keras + JAX")
    parser.add_argument("--images", type=int, default=1_100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if os.environ.get("KERAS_BACKEND") != "jax":
        parser.error("run with KERAS_BACKEND=jax (Keras reads it once, at its first import)")
    import jax

    from utils.keras import ladder

    rt = runtime.detect()
    tpu = rt.tpu.generation if rt.accelerator == "tpu" and rt.tpu else None
    measure = partial(jax_peak.matmul_peak, 1024)  # measure(dtype): a jitted 1024x1024 matmul
    peaks = mfu.choose_peaks(measure, tpu_generation=tpu, chips=jax.device_count())
    cifar = data.load_cifar10(source="standin", subset=args.images, normalize=True)
    rungs = ladder.build_rungs(
        ladder.ladder_specs(128), cifar.x_train, cifar.y_train.astype("int32")
    )
    print(f"JAX ladder on {jax.devices()[0].platform}: {len(rungs)} rungs, {args.rounds} rounds")
    variants = [r.variant() for r in rungs]
    result = compare.compare(variants, rounds=args.rounds, warmup=1, peaks=peaks)
    print(ladder.report(result, rungs, cifar.x_test, cifar.y_test.astype("int32")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
