"""Model FLOPs utilisation (MFU): how much of a chip's peak a training run turns into model math.

``MFU = model FLOPs per step / step time / peak FLOP/s``. Framework-free, one vocabulary for
every notebook that trains:

- :data:`TPU_CHIPS`: the course's one table of published per-chip TPU figures (bf16 peak, HBM
  bandwidth, MXU tile); :data:`PUBLISHED_PEAK_TFLOPS` and ``utils.roofline.PUBLISHED`` read it.
- :func:`training_flops`: FLOPs of one training step from the per-layer forward costs of
  :mod:`utils.flops`, by the one backward rule (:func:`training_passes`).
- :func:`choose_peaks`: the one choice of the peak MFU divides by, one ceiling per chip: on a
  TPU its published bf16 figure x chips, elsewhere the best matmul rate measured at any dtype
  (:data:`DTYPES`) in the rounds of :func:`utils.compare.compare` by :func:`measured_peak`;
  :func:`ceiling` is that best as one callable, and :func:`ceiling_label` says which, in words
  (the one description every notebook prints).
- :func:`mfu`: the ratio, checked: above 1 raises :class:`MeasurementError`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from utils.bench import time_fn
from utils.flops import LayerCost


class MeasurementError(ValueError):
    """A measurement that cannot be right (an MFU above 100 %): fix the measurement."""


TPU_CHIPS: dict[str, tuple[float, float, int]] = {
    # generation: (dense bf16 TFLOP/s, HBM bytes/s, MXU tile edge), per chip
    "v2": (46.0, 716e9, 128),
    "v3": (123.0, 900e9, 128),
    "v4": (275.0, 1200e9, 128),
    "v5e": (197.0, 819e9, 128),
    "v5p": (459.0, 2765e9, 128),
    "v6e": (918.0, 1638e9, 256),
    "tpu7x": (2307.0, 7380e9, 256),
}
"""Published per-chip figures: https://cloud.google.com/tpu/docs/<generation> and the system
architecture page (checked 2026-11); v2's page gives none, so v2 is JAX's table
(jax/_src/pallas/mosaic/tpu_info.py, https://github.com/jax-ml/jax)."""

DTYPES = ("float32", "bfloat16")
"""The dtypes :func:`choose_peaks` gives a peak for; ``compare`` takes one ceiling across them."""

PUBLISHED_PEAK_TFLOPS: dict[str, float] = {g: chip[0] for g, chip in TPU_CHIPS.items()}
"""Dense bf16 TFLOP/s per chip, from :data:`TPU_CHIPS`."""


def training_passes(index: int, layer: LayerCost) -> int:
    """How many times one training step does ``layer``'s forward work (the one backward rule).

    A layer with weights (its ``matmul`` shape is set): forward, weight gradient and input
    gradient, 3; the first layer (``index == 0``) skips the input gradient, 2. A layer without
    weights (pooling, element-wise): forward and its backward, 2.
    """
    return 2 if layer.matmul is None or index == 0 else 3


def training_flops(layers: Sequence[LayerCost]) -> int:
    """FLOPs of one training step (forward + backward) for layers costed for one batch.

    Optimizer updates are a few FLOPs per parameter and are left out, as MFU conventions do.
    """
    return sum(layer.flops * training_passes(i, layer) for i, layer in enumerate(layers))


def peak_flops(*, tpu_generation: str, chips: int = 1) -> float:
    """A TPU's published bf16 peak x ``chips``, in FLOP/s.

    Raises:
        ValueError: an unknown generation, or fewer than one chip.
    """
    key = tpu_generation.lower()
    if key not in PUBLISHED_PEAK_TFLOPS or chips < 1:
        known = ", ".join(PUBLISHED_PEAK_TFLOPS)
        raise ValueError(f"no published peak for TPU {tpu_generation!r} x {chips}; known: {known}")
    return PUBLISHED_PEAK_TFLOPS[key] * 1e12 * chips


def choose_peaks(
    measure: Callable[[str], Callable[[], float]],
    *,
    tpu_generation: str | None = None,
    chips: int = 1,
) -> dict[str, Callable[[], float]]:
    """``compare(peaks=...)``: a peak for each of :data:`DTYPES` (callables returning FLOP/s).

    On a TPU with a published figure, that bf16 peak x ``chips`` for every dtype (float32
    matmuls run through the bf16 matrix unit); elsewhere ``measure(dtype)``, a callable that
    measures a matmul at that dtype now (e.g. ``utils.jax.peak.matmul_peak``). Either way
    ``compare`` divides every rung by one ceiling, the best of them
    (:meth:`utils.compare.Comparison.ceiling`).
    """
    if tpu_generation is not None and tpu_generation.lower() in PUBLISHED_PEAK_TFLOPS:
        published = peak_flops(tpu_generation=tpu_generation, chips=chips)
        return {dtype: (lambda: published) for dtype in DTYPES}
    return {dtype: measure(dtype) for dtype in DTYPES}


def ceiling(
    measure: Callable[[str], Callable[[], float]],
    *,
    tpu_generation: str | None = None,
    chips: int = 1,
) -> Callable[[], float]:
    """The one ceiling of :func:`choose_peaks` as one callable: the best of its peaks, in FLOP/s.

    For a caller with no dtype-keyed rungs (``compare(peaks={"1 chip": ..., "8 chips": ...})``,
    a single MFU). Each dtype's measurement is built once; every call measures them all again.
    """
    peaks = choose_peaks(measure, tpu_generation=tpu_generation, chips=chips)
    return lambda: max(peak() for peak in peaks.values())


def ceiling_label(tpu_generation: str | None = None, chips: int = 1, n: int = 1024) -> str:
    """What an MFU from :func:`choose_peaks` or :func:`ceiling` is a share of, in words."""
    if tpu_generation is not None and tpu_generation.lower() in PUBLISHED_PEAK_TFLOPS:
        per_chip = PUBLISHED_PEAK_TFLOPS[tpu_generation.lower()]
        return (
            f"the published bf16 peak of {chips} TPU {tpu_generation} chip(s), "
            f"{per_chip:g} TFLOP/s each"
        )
    return (
        f"the best rate a {n}x{n} matmul reached in the same rounds, at "
        f"{' or '.join(DTYPES)} (no published peak here: compare such MFUs within one run only)"
    )


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
            "path, at the same moment (utils.compare.compare(peaks=...))."
        )
    return value


def measured_peak(
    matmul: Callable[[], object],
    n: int,
    *,
    repeats: int = 5,
    min_sample_s: float = 0.05,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """FLOP/s of ``matmul()``, one ``(n, n) @ (n, n)`` product (``2 n^3`` FLOPs), measured now.

    One untimed call (compilation), one timed call, then ``repeats`` samples of as many calls as
    make a sample last ``min_sample_s`` (a few milliseconds are at the mercy of one scheduler
    tick), all by :func:`utils.bench.time_fn`; the fastest counts, because other work only ever
    slows a call down. ``matmul`` must wait for its product (on an asynchronous device too).
    """
    if n < 1:
        raise ValueError(f"need n >= 1, got {n}")
    first = time_fn(matmul, warmup=1, repeats=1, clock=clock).median
    calls = max(1, min(64, math.ceil(min_sample_s / first))) if first > 0 else 1
    timing = time_fn(matmul, warmup=0, repeats=repeats, number=calls, clock=clock)
    best = min(first, *timing.samples)
    if not best > 0:
        raise MeasurementError(
            f"a {n}x{n} matmul took {best!r} s: the clock is wrong, or matmul does not wait"
        )
    return 2.0 * n**3 / best
