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
    """Yield ``len(costs)`` batches of ``size`` labels; batch i takes ``costs[i]`` seconds."""
    for cost in costs:
        clock.now += cost
        yield {"label": list(range(size))}


def test_epochs_are_found_by_counting_examples_and_steady_is_their_median():
    clock = FakeClock()
    # 4 epochs of 2 batches of 10; epoch 1 fills caches, epoch 4 meets another job
    source = batches(clock, [4.0, 4.0, 1.0, 1.0, 2.0, 2.0, 5.0, 5.0])
    r = throughput.measure(source, epoch_size=20, name="p", clock=clock)
    assert r.epoch_seconds == (8.0, 2.0, 4.0, 10.0)
    assert r.first_epoch_s == 8.0
    assert r.steady_epoch_s == pytest.approx(4.0)  # median of epochs 2-4 (the mean: 5.3)
    assert r.elements == 80 and r.elements_per_s == pytest.approx(80 / 24)
    assert r.steady_elements_per_s == pytest.approx(20 / 4.0)
    with pytest.raises(ValueError, match="whole epochs"):
        throughput.measure(batches(clock, [1.0] * 3), epoch_size=20, name="p", clock=clock)


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
    rows = [Result("naive", 100, (5.0, 5.0), "n"), Result("fast", 100, (1.5, 0.5), "f")]
    lines = throughput.format_table(rows, baseline="naive").splitlines()
    assert len(lines) == 3 and "x naive" in lines[0]
    assert lines[2].split()[0] == "fast" and " 5.0 " in lines[2]
