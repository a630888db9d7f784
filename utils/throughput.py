"""Timing input pipelines and training loops, framework-free (any Python iterable).

- :func:`epoch_runner` (:class:`EpochRunner`): the next epoch of a pipeline as one timed call for
  :func:`utils.compare.compare`, from one long-lived iterator (the steady state) or a new one per
  call (what a first epoch pays), released after the clock stops.
- :func:`input_wait`: the share of each training step spent waiting for the next batch.

The clock is an argument, so tests drive everything with a fake clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

Clock = Callable[[], float]

__all__ = ["EpochRunner", "count", "epoch_runner", "input_wait"]


def count(batch: Any) -> int:
    """Examples in a batch: the length of its labels (a dict's ``label``, a tuple's last item)."""
    return len(batch["label"] if isinstance(batch, Mapping) else batch[-1])


class EpochRunner:
    """A ``run`` for :class:`utils.compare.Variant`: the next ``epoch_size`` examples.

    ``fresh=False``: of one long-lived iterator over ``make()`` (endless: ``dataset.repeat()``),
    so after the warm-up call each call is a steady epoch. ``fresh=True``: of a new ``make()``
    per call, so each call pays what a first epoch pays (storage, filling caches); pass
    :meth:`release` as the variant's ``after``, so the last call's iterator is dropped after the
    clock stops: stopping a ``tf.data`` iterator's autotuning threads can wait seconds, idle,
    which is not the pipeline's rate.
    """

    def __init__(
        self, make: Callable[[], Iterable[Any]], *, epoch_size: int, fresh: bool = False,
        count: Callable[[Any], int] = count,
    ) -> None:  # fmt: skip
        self.make, self.epoch_size, self.fresh, self.count = make, epoch_size, fresh, count
        self.iterator: Iterator[Any] | None = None

    def __call__(self) -> int:
        if self.fresh or self.iterator is None:
            self.release()
            self.iterator = iter(self.make())
        n = 0
        while n < self.epoch_size:
            n += self.count(next(self.iterator))
        return n

    def release(self) -> None:
        """Drop a fresh runner's iterator now (a steady runner keeps its one iterator)."""
        if self.fresh:
            self.iterator = None


epoch_runner = EpochRunner


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
