"""Timing input pipelines and training loops, framework-free (any Python iterable).

- :func:`measure`: one run over several epochs, each epoch timed on its own; a :class:`Result`
  keeps the first epoch (building the pipeline, reading storage, filling caches) apart from the
  *steady state* (the median of epochs 2..). A table of single runs (:func:`format_table`) maps
  where the time goes; whether one pipeline is *faster* is :func:`utils.compare.compare`'s job,
  fed with :func:`epoch_runner`.
- :func:`input_wait`: the share of each training step spent waiting for the next batch.

The clock is an argument, so tests drive everything with a fake clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Clock = Callable[[], float]

__all__ = ["Result", "count", "epoch_runner", "format_table", "input_wait", "measure"]


def count(batch: Any) -> int:
    """Examples in a batch: the length of its labels (a dict's ``label``, a tuple's last item)."""
    return len(batch["label"] if isinstance(batch, Mapping) else batch[-1])


@dataclass(frozen=True)
class Result:
    """Examples delivered by one pipeline and the seconds of each of its epochs."""

    name: str
    elements: int
    epoch_seconds: tuple[float, ...]
    note: str = ""

    @property
    def elements_per_s(self) -> float:
        """Examples per second, all epochs together (epoch 1 included)."""
        return self.elements / sum(self.epoch_seconds)

    @property
    def first_epoch_s(self) -> float:
        """Seconds of the first epoch."""
        return self.epoch_seconds[0]

    @property
    def steady_epoch_s(self) -> float:
        """Median seconds of epochs 2.. (one disturbed epoch does not move it)."""
        return statistics.median(self.epoch_seconds[1:] or self.epoch_seconds)

    @property
    def steady_elements_per_s(self) -> float:
        """Examples per second in the steady state."""
        return self.elements / len(self.epoch_seconds) / self.steady_epoch_s


def measure(
    batches: Iterable[Any],
    *,
    epoch_size: int,
    name: str,
    note: str = "",
    count: Callable[[Any], int] = count,
    clock: Clock = time.perf_counter,
) -> Result:
    """Iterate ``batches`` (every epoch: ``dataset.repeat(epochs)``, or a generator that opens a
    new iterator per epoch) and time each ``epoch_size`` examples as one epoch."""
    epoch_times: list[float] = []
    total = 0
    last = clock()
    for batch in batches:
        total += count(batch)
        if total >= epoch_size * (len(epoch_times) + 1):
            now = clock()
            epoch_times.append(now - last)
            last = now
    if not epoch_times or total % epoch_size:
        raise ValueError(f"{name}: {total} examples are not whole epochs of {epoch_size}")
    return Result(name, total, tuple(epoch_times), note)


def epoch_runner(
    make: Callable[[], Iterable[Any]],
    *,
    epoch_size: int,
    fresh: bool = False,
    count: Callable[[Any], int] = count,
) -> Callable[[], int]:
    """A ``run`` for :class:`utils.compare.Variant`: the next ``epoch_size`` examples.

    ``fresh=False``: of one long-lived iterator over ``make()`` (endless: ``dataset.repeat()``),
    so after the warm-up call each call is a steady epoch. ``fresh=True``: of a new ``make()``
    per call, so each call pays what a first epoch pays (storage, filling caches).
    """
    state: dict[str, Iterator[Any]] = {}

    def run() -> int:
        if fresh or "it" not in state:
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
    """Run ``warmup + steps`` steps; ``wait_pct`` (time in ``next(batches)`` / all), ``step_ms``
    and ``wait_ms`` (means per step), the ``warmup`` steps left out. ``step(batch)`` must return
    only when the step has finished (read the loss)."""
    waits, totals = [], []
    for i in range(warmup + steps):
        t0 = clock()
        batch = next(batches)
        t1 = clock()
        step(batch)
        if i >= warmup:
            waits.append(t1 - t0)
            totals.append(clock() - t0)
    return {
        "wait_pct": 100.0 * sum(waits) / sum(totals),
        "step_ms": 1e3 * statistics.fmean(totals),
        "wait_ms": 1e3 * statistics.fmean(waits),
    }


def format_table(results: Sequence[Result], *, baseline: str) -> str:
    """A fixed-width table of single runs; the ``x`` column divides by the ``baseline`` row."""
    base = next(r for r in results if r.name == baseline)
    lines = [
        f"{'pipeline':<20} {'elements/s':>11} {'steady/s':>10} {'epoch 1 (s)':>12} "
        f"{'steady (s)':>10} {'x ' + baseline:>10}  what changed"
    ]
    for r in results:
        lines.append(
            f"{r.name:<20} {r.elements_per_s:>11,.0f} {r.steady_elements_per_s:>10,.0f} "
            f"{r.first_epoch_s:>12.3f} {r.steady_epoch_s:>10.3f} "
            f"{r.elements_per_s / base.elements_per_s:>10.1f}  {r.note}"
        )
    return "\n".join(lines)
