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
from typing import Any

import keras
import numpy as np

__all__ = ["EpochTimer", "EpochTiming", "fit_pace", "steady"]


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


def fit_pace(model: Any, batch: tuple, steps: int = 16) -> tuple[float, float, float]:
    """(fit's seconds per step, its host loop's seconds per step, device programs per execution)
    for a compiled ``model`` on ``steps`` copies of ``batch``, three epochs.

    The host loop per step is the median gap between batch-begin callbacks after epoch 1:
    ``fit`` dispatches asynchronously, so it runs ahead of a slower device and the gap is the
    host's own work per step (its loop, slicing, the call); a step is the steady epoch over
    ``steps``. The model's variables change (it trains)."""
    tiled = [np.concatenate([a] * steps) for a in batch]
    model.make_train_function()
    inner, counts = model.train_function, [0, 0]

    def counting(state: Any, iterator: Any) -> Any:
        counts[0] += 1

        def pulled() -> Any:
            for item in iterator:
                counts[1] += 1
                yield item

        return inner(state, pulled())

    begins: list[list[float]] = []  # per epoch: its start, then each batch's begin
    epochs: list[float] = []  # no batch-end hook: fit dispatches asynchronously, as it would
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: begins.append([time.perf_counter()]),
        on_train_batch_begin=lambda batch, logs: begins[-1].append(time.perf_counter()),
        on_epoch_end=lambda epoch, logs: epochs.append(time.perf_counter() - begins[-1][0]),
    )  # Keras syncs the logs before on_epoch_end
    model.train_function = counting
    try:
        model.fit(*tiled, batch_size=len(batch[0]), epochs=3, shuffle=False, verbose=0,
                  callbacks=[timer])  # fmt: skip
    finally:
        model.train_function = inner
    t_step = steady(epochs) / steps  # the course's steady epoch: median of epochs 2..
    gaps = [b - a for beg in begins[1:] for a, b in zip(beg[1:], beg[2:], strict=False)]
    per_call = counts[1] / max(counts[0], 1)  # callbacks run once per execution of K steps
    t_host = float(np.median(gaps)) / per_call if gaps else t_step
    return t_step, t_host, per_call
