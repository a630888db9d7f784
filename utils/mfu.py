"""Model FLOPs utilisation (MFU): how much of a chip's peak a training run turns into model math.

``MFU = model FLOPs per step / step time / peak FLOP/s``. Framework-free, one vocabulary for
every notebook that trains:

- :func:`training_flops`: FLOPs of one training step from the per-layer forward costs of
  :mod:`utils.flops`: forward, plus backward = the gradient with respect to the weights (as many
  FLOPs as the forward pass) and with respect to the inputs (as many again), except for the first
  layer, whose input gradient nobody needs. That is *not* a bare "x3": the first layer counts 2x.
- :data:`PUBLISHED_PEAK_TFLOPS`: per-chip dense bf16 peaks from Google's Cloud TPU pages.
- :func:`peak_flops`: the peak to divide by: a TPU's published figure x chips, or on a CPU the
  matmul rate measured *in the same run* at the same dtype (pass it in).
- :func:`measured_peak`: the one way the course measures a peak: FLOP/s of a square matmul that
  the caller builds with the framework, dtype and compile path the training uses (e.g.
  ``utils.jax.peak.matmul``), timed after a warm-up call, best of a few calls. Measure it inside
  every round of a comparison (:func:`utils.compare.compare` takes it as ``peaks=``), not once.
- :func:`mfu`: the ratio, checked: above 1 raises :class:`MeasurementError`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from utils.flops import LayerCost

__all__ = [
    "PUBLISHED_PEAK_TFLOPS",
    "MeasurementError",
    "measured_peak",
    "mfu",
    "peak_flops",
    "training_flops",
    "training_passes",
]


class MeasurementError(ValueError):
    """A measurement that cannot be right (an MFU above 100 %): fix the measurement."""


PUBLISHED_PEAK_TFLOPS: dict[str, float] = {
    "v2": 46.0,
    "v3": 123.0,
    "v4": 275.0,
    "v5e": 197.0,
    "v5p": 459.0,
    "v6e": 918.0,
    "tpu7x": 2307.0,
}
"""Dense bf16 TFLOP/s per chip (Cloud TPU system architecture pages, checked 2026-11)."""


def training_passes(index: int, layer: LayerCost) -> int:
    """How many times one training step does ``layer``'s forward work (the one backward rule).

    A layer with weights (its ``matmul`` shape is set): forward, weight gradient and input
    gradient, 3; the first layer (``index == 0``) skips the input gradient, 2. A layer without
    weights (pooling, element-wise): forward and its backward, 2.
    """
    if layer.matmul is not None:
        return 2 if index == 0 else 3
    return 2


def training_flops(layers: Sequence[LayerCost]) -> int:
    """FLOPs of one training step (forward + backward) for layers costed for one batch.

    Layers with weights (conv, dense, matmul: their ``matmul`` shape is set) cost forward
    ``F``, weight gradient ``F`` and input gradient ``F`` (the input gradient is skipped for the
    first layer). Layers without weights (pooling, element-wise) cost their forward work again
    for the backward pass. Optimizer updates are a few FLOPs per parameter and are left out, as
    MFU conventions do.
    """
    return sum(layer.flops * training_passes(i, layer) for i, layer in enumerate(layers))


def peak_flops(
    *, tpu_generation: str | None = None, chips: int = 1, measured_flops: float | None = None
) -> float:
    """The peak FLOP/s that MFU divides by.

    On a TPU: ``PUBLISHED_PEAK_TFLOPS[tpu_generation] x chips``. Anywhere else pass the matmul
    rate measured in the same run (``measured_flops``, FLOP/s) at the dtype you train in.

    Raises:
        ValueError: neither given, an unknown generation, or a count/rate that is not positive.
    """
    if tpu_generation is not None:
        key = tpu_generation.lower()
        if key not in PUBLISHED_PEAK_TFLOPS:
            known = ", ".join(PUBLISHED_PEAK_TFLOPS)
            raise ValueError(f"no published peak for TPU {tpu_generation!r}; known: {known}")
        if chips < 1:
            raise ValueError(f"chips must be >= 1, got {chips}")
        return PUBLISHED_PEAK_TFLOPS[key] * 1e12 * chips
    if measured_flops is None:
        raise ValueError("pass tpu_generation= on a TPU, or measured_flops= (same run) elsewhere")
    if not measured_flops > 0:
        raise ValueError(f"measured_flops must be > 0, got {measured_flops!r}")
    return float(measured_flops)


def mfu(flops_per_step: float, step_time_s: float, peak: float) -> float:
    """Model FLOPs utilisation, a fraction (0.42 = 42 %).

    Raises:
        ValueError: a step time or peak that is not positive, or negative FLOPs.
        MeasurementError: a result above 1 (the peak is not a ceiling for this work).
    """
    if not step_time_s > 0 or not peak > 0 or flops_per_step < 0:
        raise ValueError(
            f"need flops_per_step >= 0, step_time_s > 0, peak > 0; got {flops_per_step!r}, "
            f"{step_time_s!r}, {peak!r}"
        )
    value = flops_per_step / step_time_s / peak
    if value > 1.0:
        raise MeasurementError(
            f"MFU {value:.0%}: {flops_per_step / step_time_s / 1e9:,.1f} GFLOP/s achieved "
            f"against a peak of {peak / 1e9:,.1f} GFLOP/s. A peak that training beats is not a "
            "ceiling: measure it at the training's dtype, through the same framework and compile "
            "path, "
            "at the same moment (utils.compare.compare(peaks=...))."
        )
    return value


def measured_peak(
    matmul: Callable[[], object],
    n: int,
    *,
    sync: Callable[[], object] | None = None,
    repeats: int = 5,
    min_sample_s: float = 0.05,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """FLOP/s of ``matmul()``, one ``(n, n) @ (n, n)`` product (``2 n^3`` FLOPs), measured now.

    One untimed call (compilation), then ``repeats`` samples of as many calls as make a sample
    last ``min_sample_s`` (a few milliseconds of matmul are at the mercy of one scheduler tick on
    a shared machine); the fastest sample counts, because a peak is what the hardware can do and
    other work only ever slows a call down. ``sync`` waits for an asynchronous device inside the
    timed region.
    """
    if n < 1 or repeats < 1:
        raise ValueError(f"need n >= 1 and repeats >= 1, got n={n}, repeats={repeats}")

    def timed(calls: int) -> float:
        start = clock()
        for _ in range(calls):
            matmul()
        if sync is not None:
            sync()
        return (clock() - start) / calls

    timed(1)  # compile, allocate, warm caches
    first = timed(1)
    calls = max(1, min(64, math.ceil(min_sample_s / first))) if first > 0 else 1
    best = min([first, *(timed(calls) for _ in range(repeats))])
    if not best > 0:
        raise MeasurementError(f"a {n}x{n} matmul took {best!r} s: the clock or sync is wrong")
    return 2.0 * n**3 / best
