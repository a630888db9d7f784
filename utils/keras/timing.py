"""The course's one Keras epoch timer (imports Keras).

:class:`EpochTimer` is a ``model.fit`` callback recording, per epoch, the wall time (``epoch_s``,
validation included) and the training time up to the start of validation (``train_s``). The
first epoch pays for tracing and compiling the step function, so it is kept apart; the steady
statistic is the **median** of epochs 2.. (robust to one slow epoch on a busy machine):
:meth:`EpochTimer.summary` returns an :class:`EpochTiming` that says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import keras
import numpy as np

__all__ = ["EpochTimer", "EpochTiming", "steady"]


def steady(seconds: tuple[float, ...] | list[float]) -> float:
    """The steady-epoch statistic: median of epochs 2.. (epoch 1 if there is only one)."""
    if not seconds:
        raise ValueError("no epoch timed yet")
    return float(np.median(seconds[1:] or seconds))


@dataclass(frozen=True)
class EpochTiming:
    """Summary of an :class:`EpochTimer`: the first epoch apart, the others as a median."""

    epoch_s: tuple[float, ...]
    images_per_epoch: int

    @property
    def first_epoch_s(self) -> float:
        """Wall time of epoch 1 (includes tracing and compiling the train/eval functions)."""
        return self.epoch_s[0]

    @property
    def steady_epoch_s(self) -> float:
        """Median wall time of epochs 2.. (epoch 1 if there is only one)."""
        return steady(self.epoch_s)

    @property
    def compile_overhead_s(self) -> float:
        """How much longer the first epoch took than a steady one: trace + compile cost."""
        return max(0.0, self.first_epoch_s - self.steady_epoch_s)

    @property
    def images_per_s(self) -> float:
        """Training throughput of a steady epoch (validation time included in the epoch)."""
        return self.images_per_epoch / self.steady_epoch_s

    def table(self) -> str:
        """A small text table: one row per epoch."""
        rows = [f"{'epoch':>5} {'time (s)':>9} {'images/s':>9}"]
        for i, t in enumerate(self.epoch_s, 1):
            rows.append(f"{i:>5} {t:>9.2f} {self.images_per_epoch / t:>9.0f}")
        rows.append(
            f"first epoch {self.first_epoch_s:.2f} s = steady {self.steady_epoch_s:.2f} s + "
            f"trace/compile ~{self.compile_overhead_s:.2f} s"
        )
        return "\n".join(rows)


class EpochTimer(keras.callbacks.Callback):
    """Times each epoch of ``model.fit``; ``images_per_epoch`` turns times into images/s.

    ``.epoch_s``: each epoch's wall time, validation included; ``.train_s``: its training time,
    up to the start of validation (the same as ``epoch_s`` for an epoch without validation).
    Use ``timer.summary()`` after ``fit`` for an :class:`EpochTiming`.
    """

    def __init__(self, images_per_epoch: int = 0) -> None:
        super().__init__()
        self.images_per_epoch = int(images_per_epoch)
        self.epoch_s: list[float] = []
        self.train_s: list[float] = []
        self._start = 0.0
        self._in_epoch = False

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = time.perf_counter()
        self._in_epoch = True

    def on_test_begin(self, logs: dict | None = None) -> None:
        if self._in_epoch and len(self.train_s) == len(self.epoch_s):
            self.train_s.append(time.perf_counter() - self._start)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        elapsed = time.perf_counter() - self._start
        if len(self.train_s) == len(self.epoch_s):  # no validation this epoch
            self.train_s.append(elapsed)
        self.epoch_s.append(elapsed)
        self._in_epoch = False

    def summary(self) -> EpochTiming:
        """The timings recorded so far (images/s needs ``images_per_epoch``)."""
        if not self.epoch_s:
            raise RuntimeError("EpochTimer has not seen a finished epoch yet")
        return EpochTiming(tuple(self.epoch_s), self.images_per_epoch)
