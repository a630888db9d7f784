"""Tests for utils.throughput, driven by a fake clock: what each figure includes and leaves out."""

from __future__ import annotations

import pytest

from utils import compare, throughput
from utils.compare import Variant


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def batches(clock: FakeClock, costs: list[float], size: int = 10):
    """Yield ``len(costs)`` batches of ``size`` labels; batch i takes ``costs[i]`` seconds."""
    for cost in costs:
        clock.now += cost
        yield {"label": list(range(size))}


def test_count_reads_the_labels_of_a_dict_or_a_tuple():
    assert throughput.count({"image": [0] * 3, "label": [1, 2]}) == 2
    assert throughput.count(([0] * 3, [1, 2, 3, 4])) == 4


def test_epoch_runner_keeps_one_iterator_unless_fresh():
    made = []

    def make():
        made.append(1)
        return iter([{"label": [0] * 5}] * 100)

    steady = throughput.epoch_runner(make, epoch_size=10)
    assert [steady(), steady(), steady()] == [10, 10, 10] and len(made) == 1
    first = throughput.epoch_runner(make, epoch_size=10, fresh=True)
    assert [first(), first()] == [10, 10] and len(made) == 3


class SlowToStop:
    """An endless iterator whose teardown takes ``stop_s`` on the fake clock (as stopping a
    tf.data iterator's autotuning threads can), each batch ``batch_s``."""

    def __init__(self, clock: FakeClock, batch_s: float, stop_s: float) -> None:
        self.clock, self.batch_s, self.stop_s = clock, batch_s, stop_s

    def __iter__(self):
        return self

    def __next__(self):
        self.clock.now += self.batch_s
        return {"label": [0] * 10}

    def __del__(self):
        self.clock.now += self.stop_s


@pytest.mark.parametrize("released_after", [True, False])
def test_a_fresh_epoch_is_timed_without_the_last_iterators_teardown(released_after):
    """Released as the variant's ``after``, a fresh runner's old iterator stops after the clock
    does: every timed epoch is its 10 batches of 0.1 s, however long stopping takes. Released at
    the next call instead (inside it), the teardown's 50 s lands in a timed epoch."""
    clock = FakeClock()
    variants = []
    for name in ("a", "b"):
        run = throughput.epoch_runner(
            lambda: SlowToStop(clock, 0.1, 50.0), epoch_size=100, fresh=True
        )
        variants.append(Variant(name, run, work=100, after=run.release if released_after else None))
    result = compare.compare(variants, rounds=4, warmup=1, clock=clock)
    timed = [s for v in result.seconds.values() for s in v]
    if released_after:
        assert timed == pytest.approx([1.0] * 8)
    else:
        assert max(timed) == pytest.approx(51.0)


def test_input_wait_leaves_out_the_warm_up_steps():
    clock = FakeClock()
    waits = iter([10.0, 1.0, 1.0, 3.0])  # the first next() starts the pipeline: slow

    class Batches:
        def __next__(self):
            clock.now += next(waits)
            return "batch"

    def step(batch):
        clock.now += 1.0

    got = throughput.input_wait(Batches(), step, steps=3, warmup=1, clock=clock)
    # counted steps: waits 1, 1, 3 and 1 s of compute each -> 5 s waiting of 8 s
    assert got["wait_ms"] == pytest.approx(1e3 * 5 / 3)
    assert got["step_ms"] == pytest.approx(1e3 * 8 / 3)
    assert got["wait_pct"] == pytest.approx(100 * 5 / 8)
