"""Tests for utils.throughput, driven by a fake clock: what each figure includes and leaves out."""

from __future__ import annotations

import pytest

from utils import throughput
from utils.throughput import Result


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def batches(clock: FakeClock, costs: list[float], size: int = 10):
    """Yield ``len(costs)`` batches of ``size``; producing batch i takes ``costs[i]`` seconds."""
    for cost in costs:
        clock.now += cost
        yield list(range(size))


def test_steady_state_leaves_out_the_first_epoch():
    clock = FakeClock()
    epoch_costs = iter([[5.0, 5.0], [1.0, 1.0], [1.0, 3.0]])  # epoch 1 fills caches: slow
    r = throughput.measure(
        lambda: batches(clock, next(epoch_costs)), epochs=3, name="p", clock=clock
    )
    assert r.epoch_seconds == (10.0, 2.0, 4.0)
    assert r.first_epoch_s == 10.0
    assert r.steady_epoch_s == pytest.approx(3.0)  # median of epochs 2 and 3 only
    assert r.elements == 60 and r.elements_per_s == pytest.approx(60 / 16)
    assert r.steady_elements_per_s == pytest.approx(20 / 3.0)
    assert r.iteration == "fresh"


def test_repeat_finds_epoch_boundaries_by_counting_examples():
    clock = FakeClock()
    # one iterator over 3 epochs of 2 batches of 10: epoch_size 20
    source = batches(clock, [4.0, 4.0, 1.0, 1.0, 2.0, 2.0])
    r = throughput.measure(source, epochs=3, name="p", repeat=True, epoch_size=20, clock=clock)
    assert r.epoch_seconds == (8.0, 2.0, 4.0)
    assert r.steady_epoch_s == pytest.approx(3.0)
    assert r.iteration == "repeat"
    with pytest.raises(ValueError, match="epoch_size"):
        throughput.measure([], epochs=2, name="p", repeat=True)


def test_step_runs_on_every_batch_inside_the_timed_region():
    clock = FakeClock()
    seen = []

    def step(batch):
        seen.append(len(batch))
        clock.now += 0.5

    r = throughput.measure(
        lambda: batches(clock, [1.0, 1.0]), epochs=2, name="p", step=step, clock=clock
    )
    assert seen == [10, 10, 10, 10]
    assert r.seconds == pytest.approx(6.0)


def test_steady_state_is_the_median_of_the_later_epochs():
    """Three steady epochs, one disturbed: the median ignores it, a mean would not."""
    clock = FakeClock()
    epoch_costs = iter([[6.0], [1.0], [1.0], [7.0]])  # epoch 4: another job took the cores
    r = throughput.measure(
        lambda: batches(clock, next(epoch_costs)), epochs=4, name="p", clock=clock
    )
    assert r.epoch_seconds == (6.0, 1.0, 1.0, 7.0)
    assert r.steady_epoch_s == pytest.approx(1.0)  # median of 1, 1, 7 (the mean would be 3)
    assert r.steady_elements_per_s == pytest.approx(10.0)
    assert not hasattr(r, "later_epoch_s") and not hasattr(throughput, "best_of")


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


def test_format_table_has_one_row_per_result_and_the_baseline_ratio():
    rows = [Result("naive", 100, 10.0, (5.0, 5.0), "n"), Result("fast", 100, 2.0, (1.5, 0.5), "f")]
    table = throughput.format_table(rows, baseline="naive")
    lines = table.splitlines()
    assert len(lines) == 3 and "x naive" in lines[0]
    assert lines[2].split()[0] == "fast" and " 5.0 " in lines[2]
