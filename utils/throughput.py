"""A measuring harness for input pipelines and training loops (framework-free).

What it measures, and the rules that make the numbers honest on a shared machine:

- :func:`measure`: examples per second over several epochs, each epoch timed on its own. The first
  epoch pays for building the pipeline, filling caches and tracing; :attr:`Result.steady_epoch_s`
  (the *steady state*: the median of epochs 2.., so one disturbed epoch does not move it) leaves
  it out. Two ways to iterate, and a comparison must use the same one
  for every pipeline: a fresh iterator per epoch (``for batch in dataset``, what the tf.data
  guide's benchmark does) or one iterator over all epochs (``dataset.repeat(epochs)``; epoch
  boundaries are found by counting examples).
- A :class:`Result` describes one run. Whether one pipeline is *faster* than another is never
  read from single runs (nor from the fastest of a few): that is :func:`utils.compare.compare`'s
  job (interleaved rounds, warm-up excluded, an interval and a three-state verdict).
- :func:`input_wait`: how much of each training step is spent blocked waiting for the next batch,
  with the first ``warmup`` steps (tracing, pipeline start) left out.
- :func:`format_table`: a fixed-width table of results.

The TensorFlow side (pipelines, the workload, distributed iterators) is in
:mod:`utils.tf.input_bench`; everything here works on any Python iterable and takes the clock as
an argument, so tests can drive it with a fake clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

Clock = Callable[[], float]

__all__ = [
    "Result",
    "epoch_runner",
    "first_epoch_runner",
    "format_table",
    "input_wait",
    "measure",
]


@dataclass(frozen=True)
class Result:
    """Throughput of one pipeline over ``len(epoch_seconds)`` epochs."""

    name: str
    elements: int
    seconds: float
    epoch_seconds: tuple[float, ...]
    note: str = ""
    iteration: str = "fresh"  # "fresh": a new iterator per epoch; "repeat": one for all epochs

    @property
    def elements_per_s(self) -> float:
        """Examples delivered per second, all epochs together (epoch 1 included)."""
        return self.elements / self.seconds

    @property
    def first_epoch_s(self) -> float:
        """Seconds of the first epoch (builds the pipeline, reads storage, fills caches)."""
        return self.epoch_seconds[0]

    @property
    def steady_epoch_s(self) -> float:
        """Median seconds of epochs 2.. (the steady state); epoch 1 if there is only one.

        The median, not the mean: one epoch slowed by another job on the machine would move a
        mean, and the steady state is what the pipeline does when nothing disturbs it.
        """
        rest = self.epoch_seconds[1:] or self.epoch_seconds
        return statistics.median(rest)

    @property
    def steady_elements_per_s(self) -> float:
        """Examples per second in the steady state (epochs 2.., first epoch left out)."""
        per_epoch = self.elements / len(self.epoch_seconds)
        return per_epoch / self.steady_epoch_s


def measure(
    epochs_source: Callable[[], Iterable[Any]] | Iterable[Any],
    *,
    epochs: int,
    name: str,
    count: Callable[[Any], int] = len,
    repeat: bool = False,
    epoch_size: int | None = None,
    step: Callable[[Any], object] | None = None,
    note: str = "",
    clock: Clock = time.perf_counter,
) -> Result:
    """Iterate ``epochs`` epochs, time each one, and count examples with ``count(batch)``.

    ``repeat=False``: ``epochs_source`` is iterated once per epoch (a callable is called per epoch
    and its result iterated: a fresh iterator each time). ``repeat=True``: ``epochs_source`` is one
    iterable covering all epochs (e.g. ``dataset.repeat(epochs)``); an epoch ends when another
    ``epoch_size`` examples have been counted. ``step`` (optional) is called on every batch, like a
    training step, inside the timed region.

    Raises:
        ValueError: ``epochs < 1``, or ``repeat=True`` without a positive ``epoch_size``.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    epoch_times: list[float] = []
    total = 0
    start = clock()
    if repeat:
        if not epoch_size or epoch_size < 1:
            raise ValueError("repeat=True needs epoch_size >= 1 (examples per epoch)")
        source = epochs_source() if callable(epochs_source) else epochs_source
        last = start
        for batch in source:
            total += count(batch)
            if step is not None:
                step(batch)
            if len(epoch_times) < epochs - 1 and total >= epoch_size * (len(epoch_times) + 1):
                now = clock()
                epoch_times.append(now - last)
                last = now
        epoch_times.append(clock() - last)  # the last epoch ends with the loop
    else:
        for _ in range(epochs):
            epoch_start = clock()
            source = epochs_source() if callable(epochs_source) else epochs_source
            for batch in source:
                total += count(batch)
                if step is not None:
                    step(batch)
            epoch_times.append(clock() - epoch_start)
    seconds = clock() - start
    return Result(name, total, seconds, tuple(epoch_times), note, "repeat" if repeat else "fresh")


def first_epoch_runner(
    make: Callable[[], Iterable[Any]], *, epoch_size: int, count: Callable[[Any], int] = len
) -> Callable[[], int]:
    """A ``run`` for :class:`utils.compare.Variant`: build the pipeline anew, iterate one epoch.

    Each call pays for everything a first epoch pays for (storage reads, filling a cache).
    Returns the number of examples delivered.
    """

    def run() -> int:
        n = 0
        for batch in make():
            n += count(batch)
            if n >= epoch_size:
                break
        return n

    return run


def epoch_runner(
    make: Callable[[], Iterable[Any]], *, epoch_size: int, count: Callable[[Any], int] = len
) -> Callable[[], int]:
    """A ``run`` for :class:`utils.compare.Variant`: the next epoch of one long-lived iterator.

    ``make()`` must return an endless iterable (``dataset.repeat()``, a distributed dataset over
    one, a Grain pipeline with ``epochs=None``); it is iterated once, on the first call. Every
    call pulls ``epoch_size`` more examples, so after the warm-up call (the first epoch: storage,
    caches) each timed call is one steady epoch, iterated the way the pipeline trains.
    """
    state: dict[str, Iterator[Any]] = {}

    def run() -> int:
        if "it" not in state:
            state["it"] = iter(make())
        n = 0
        while n < epoch_size:
            n += count(next(state["it"]))
        return n

    return run


def input_wait(
    batches: Iterator[Any],
    step: Callable[[Any], object],
    *,
    steps: int,
    warmup: int = 1,
    clock: Clock = time.perf_counter,
) -> dict[str, float]:
    """Run ``warmup + steps`` training steps; the share of each step spent waiting for input.

    ``next(batches)`` is the wait; ``step(batch)`` must return only when the step has finished
    (read the loss). The first ``warmup`` steps are run but not counted. Returns ``wait_pct``
    (time blocked in ``next`` / total time), ``step_ms`` (mean wall time per step, wait included)
    and ``wait_ms`` (mean wait per step).
    """
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    waits, totals = [], []
    for i in range(warmup + steps):
        t0 = clock()
        batch = next(batches)
        t1 = clock()
        step(batch)
        t2 = clock()
        if i >= warmup:
            waits.append(t1 - t0)
            totals.append(t2 - t0)
    return {
        "wait_pct": 100.0 * sum(waits) / sum(totals),
        "step_ms": 1e3 * statistics.fmean(totals),
        "wait_ms": 1e3 * statistics.fmean(waits),
    }


def format_table(results: Sequence[Result], *, baseline: str | None = None) -> str:
    """A fixed-width table of single runs: elements/s overall and steady, epoch times, ratio.

    ``baseline`` names the row the "x" column divides by (default: the first row). A table of
    single runs maps where the time goes; a verdict needs :func:`utils.compare.compare`.
    """
    if not results:
        return "(no results)"
    base_row = next((r for r in results if r.name == baseline), results[0])
    base = base_row.elements_per_s
    lines = [
        f"{'pipeline':<20} {'elements/s':>11} {'steady/s':>10} {'epoch 1 (s)':>12} "
        f"{'steady (s)':>10} {'x ' + base_row.name:>10}  what changed",
    ]
    for r in results:
        lines.append(
            f"{r.name:<20} {r.elements_per_s:>11,.0f} {r.steady_elements_per_s:>10,.0f} "
            f"{r.first_epoch_s:>12.3f} {r.steady_epoch_s:>10.3f} "
            f"{r.elements_per_s / base:>10.1f}  {r.note}"
        )
    return "\n".join(lines)
