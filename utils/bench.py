"""Measure hardware honestly: a timer with warm-up and repeats, and small NumPy benchmarks.

Framework-free (NumPy only). Framework benchmarks (a PyTorch or TensorFlow matmul) pass a
zero-argument callable to :func:`time_fn`; on an asynchronous device (GPU, TPU) pass ``sync``,
a callable that waits until the device has finished, or you time only the launch.

- :func:`time_fn` -> :class:`Timing`: warm-up calls (not timed), then ``repeats`` timed
  repetitions of ``number`` calls each; median and spread (quartiles) per call.
  The clock is injectable, so the statistics are testable with a fake clock.
- :func:`matmul_gflops`, :func:`copy_bandwidth`: throughput numbers.
  ``matmul_gflops`` is notebook 00's hardware lesson (how fast is a matmul here, with its
  spread); it is **not** the peak MFU divides by: that is :func:`utils.mfu.measured_peak`,
  measured inside every round of :func:`utils.compare.compare`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Clock = Callable[[], float]


@dataclass(frozen=True)
class Timing:
    """Seconds per call of ``repeats`` timed repetitions, with summary statistics."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def q1(self) -> float:
        """First quartile (the 'inclusive' method: it stays within min..max)."""
        return self._quartiles()[0]

    @property
    def q3(self) -> float:
        return self._quartiles()[1]

    def _quartiles(self) -> tuple[float, float]:
        if len(self.samples) == 1:
            return self.samples[0], self.samples[0]
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]

    def rate_spread(self, work: float) -> tuple[float, float]:
        """(low, high) work per second at the third and first quartile times."""
        return work / self.q3, work / self.q1

    def __str__(self) -> str:
        iqr, low, high = self.q3 - self.q1, min(self.samples), max(self.samples)
        return (
            f"median {self.median * 1e3:.3f} ms (IQR {iqr * 1e3:.3f} ms, min {low * 1e3:.3f} ms,"
            f" max {high * 1e3:.3f} ms, n={len(self.samples)})"
        )


def time_fn(
    fn: Callable[[], object],
    *,
    warmup: int = 1,
    repeats: int = 5,
    number: int = 1,
    sync: Callable[[], object] | None = None,
    clock: Clock = time.perf_counter,
) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` samples of ``number`` calls.

    Each sample is the elapsed clock time of ``number`` calls (followed by ``sync()`` when
    given) divided by ``number``. Warm-up absorbs one-off costs: compilation, memory allocation,
    filling caches, CPU frequency ramp-up.
    """
    if repeats < 1 or number < 1 or warmup < 0:
        raise ValueError("need repeats >= 1, number >= 1, warmup >= 0")
    for _ in range(warmup):
        fn()
    if sync is not None:
        sync()
    samples = []
    for _ in range(repeats):
        start = clock()
        for _ in range(number):
            fn()
        if sync is not None:
            sync()
        samples.append((clock() - start) / number)
    return Timing(tuple(samples))


def calls_for(
    fn: Callable[[], object], target_s: float = 0.02, *, clock: Clock = time.perf_counter
) -> int:
    """How many calls of ``fn`` make one sample last about ``target_s`` (at least 1).

    Very short operations are timed in batches, so the clock's resolution and the Python call
    overhead do not dominate.
    """
    number = 1
    while number < 1 << 16:
        start = clock()
        for _ in range(number):
            fn()
        if clock() - start >= target_s:
            break
        number *= 2
    return number


@dataclass(frozen=True)
class Throughput:
    """A measured rate: ``value`` units per second (median), ``low``-``high`` at the IQR."""

    value: float
    low: float
    high: float
    unit: str
    timing: Timing

    @classmethod
    def of(cls, timing: Timing, work: float, unit: str, scale: float) -> Throughput:
        """``work`` units per call, per second, divided by ``scale`` (1e9: GFLOP/s, GB/s)."""
        low, high = timing.rate_spread(work / scale)
        return cls(work / scale / timing.median, low, high, unit, timing)

    def __str__(self) -> str:
        return f"{self.value:,.1f} {self.unit} (IQR {self.low:,.1f}-{self.high:,.1f})"


def matmul_gflops(
    matmul: Callable[[], object],
    n: int,
    *,
    repeats: int = 7,
    sync: Callable[[], object] | None = None,
    clock: Clock = time.perf_counter,
) -> Throughput:
    """GFLOP/s of ``matmul()``, a callable doing one ``(n, n) @ (n, n)`` product (2 n^3 FLOP):
    as many calls per sample as last 50 ms (sizing them is the warm-up), then ``repeats`` samples.

    The median and spread of many calls: a description of the hardware (notebook 00), not an MFU
    peak (use :func:`utils.mfu.measured_peak` through :func:`utils.compare.compare`).
    """
    number = calls_for(matmul, 0.05, clock=clock)
    timing = time_fn(matmul, warmup=1, repeats=repeats, number=number, sync=sync, clock=clock)
    return Throughput.of(timing, 2.0 * n**3, "GFLOP/s", 1e9)


def copy_bandwidth(
    nbytes: int, *, repeats: int = 5, target_s: float = 0.02, clock: Clock = time.perf_counter
) -> Throughput:
    """Memory bandwidth (GB/s) of copying an ``nbytes`` float32 array with NumPy (one thread).

    Counts ``2 * nbytes`` per copy (read the source, write the destination). The CPU may also
    read the destination before writing it (write-allocate), so the true traffic can be higher:
    this is a conservative figure. Working sets that fit a cache measure that cache.
    """
    src = np.ones(max(nbytes // 4, 1), dtype=np.float32)
    dst = np.empty_like(src)

    def copy() -> None:
        np.copyto(dst, src)

    copy()  # touch the pages: first-touch page faults are not bandwidth
    number = calls_for(copy, target_s, clock=clock)
    timing = time_fn(copy, warmup=1, repeats=repeats, number=number, clock=clock)
    return Throughput.of(timing, 2.0 * src.nbytes, "GB/s", 1e9)


def format_bytes(n: float) -> str:
    """Binary units for sizes: 49152 -> '48 KiB'."""
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:g} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} GiB"
