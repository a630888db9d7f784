"""``make bench``: notebook 09's training-speed ladder on Keras 3 + JAX, outside a notebook.

``KERAS_BACKEND=jax python -m tests.tools.bench [--images N] [--rounds R]`` prints each rung's
rate, MFU and accuracy and a verdict with its interval per rung, from interleaved rounds.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The training-speed ladder on Keras + JAX")
    parser.add_argument("--images", type=int, default=1_100)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)
    if os.environ.get("KERAS_BACKEND") != "jax":
        parser.error("run with KERAS_BACKEND=jax (Keras reads it once, at its first import)")
    import jax

    from utils import compare, data, mfu, runtime
    from utils.jax import ladder_bench as lb
    from utils.jax import peak as jax_peak
    from utils.keras import ladder

    rt = runtime.detect()
    tpu = rt.tpu.generation if rt.accelerator == "tpu" and rt.tpu else None
    peaks = mfu.choose_peaks(lambda d: jax_peak.matmul_peak(1024, d), tpu_generation=tpu)
    cifar = data.load_cifar10(source="standin", subset=args.images)
    x8, y = cifar.x_train, cifar.y_train.astype("int32")
    specs = ladder.ladder_specs(128, knee=256)  # no sweep here: rung 3 doubles the batch
    rungs = [lb.build_rung(s, x8.astype("float32") / 255, x8, y) for s in specs]
    print(f"JAX ladder on {jax.devices()[0].platform}: {len(rungs)} rungs, {args.rounds} rounds")
    result = compare.compare([r.variant() for r in rungs], rounds=args.rounds, peaks=peaks)
    names = [r.spec.name for r in rungs]
    x_test, y_test = cifar.x_test / 255, cifar.y_test.astype("int32")
    accuracy = {r.spec.name: r.accuracy(x_test, y_test) for r in rungs}
    print(ladder.table(result, names, accuracy))
    for a, b in ladder.step_pairs(names):
        print(result.verdict(a, b).sentence())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
