"""The comparison harness, driven by a fake clock: interleaving, warm-up, verdicts, MFU."""

from __future__ import annotations

import random

import pytest

from utils import compare, mfu
from utils.compare import NO_DIFFERENCE, Variant, median_interval


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def variant(clock: FakeClock, name: str, seconds, log=None, **kw) -> Variant:
    """A variant whose n-th call advances the fake clock by ``seconds(n)``."""
    calls = [0]

    def run() -> None:
        if log is not None:
            log.append(name)
        clock.now += seconds(calls[0])
        calls[0] += 1

    return Variant(name, run, **kw)


def noisy(base: float, noise: float, seed: int):
    rng = random.Random(seed)
    return lambda _n: base * (1.0 + rng.uniform(-noise, noise))


def test_rounds_are_interleaved_and_rotated():
    clock, log = FakeClock(), []
    vs = [variant(clock, n, lambda _: 1.0, log) for n in "abc"]
    result = compare.compare(vs, rounds=3, warmup=0, clock=clock)
    assert result.orders == (("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b"))
    assert log == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    # Each variant runs first exactly once in three rounds.
    assert sorted(order[0] for order in result.orders) == ["a", "b", "c"]


def test_warm_up_is_excluded_from_the_timed_rounds():
    clock = FakeClock()
    slow_first = variant(clock, "compiles", lambda n: 100.0 if n == 0 else 1.0)
    other = variant(clock, "other", lambda _n: 1.0)
    result = compare.compare([slow_first, other], rounds=4, warmup=1, clock=clock)
    assert result.seconds["compiles"] == (1.0, 1.0, 1.0, 1.0)
    no_warmup = compare.compare(
        [variant(clock, "compiles", lambda n: 100.0 if n == 0 else 1.0), other],
        rounds=4,
        warmup=0,
        clock=clock,
    )
    assert 100.0 in no_warmup.seconds["compiles"]


@pytest.mark.parametrize("seed", range(20))
def test_a_3_percent_difference_under_10_percent_noise_is_no_difference(seed):
    clock = FakeClock()
    a = variant(clock, "a", noisy(1.00, 0.10, seed))
    b = variant(clock, "b", noisy(1.03, 0.10, seed + 1000))
    verdict = compare.compare([a, b], rounds=5, clock=clock).verdict("a", "b")
    assert verdict.state == NO_DIFFERENCE, verdict.sentence()
    # noise of 10 % may put the whole interval on one side of 1x, still inside the 5 % bar
    assert (
        "no difference this machine can resolve" in verdict.sentence()
        or "5% bar, though " in verdict.sentence()
    ), verdict.sentence()


@pytest.mark.parametrize("seed", range(20))
def test_a_30_percent_difference_under_2_percent_noise_gets_the_direction(seed):
    clock = FakeClock()
    fast = variant(clock, "fast", noisy(1.00, 0.02, seed))
    slow = variant(clock, "slow", noisy(1.30, 0.02, seed + 1000))
    result = compare.compare([fast, slow], rounds=5, clock=clock)
    assert result.verdict("fast", "slow").state == "faster"
    assert result.verdict("slow", "fast").state == "slower"
    assert 1.2 < result.verdict("fast", "slow").ratio < 1.4


def test_interleaving_cancels_a_machine_that_slows_down_during_the_run():
    """Same work, machine 2x slower by the end: back-to-back rounds would call one faster."""
    clock = FakeClock()
    speed = [1.0]

    def drifting(_n: int) -> float:
        speed[0] *= 1.04  # every call runs 4 % slower than the one before
        return speed[0]

    a, b = variant(clock, "a", drifting), variant(clock, "b", drifting)
    result = compare.compare([a, b], rounds=9, warmup=0, clock=clock)
    assert result.verdict("a", "b").state == NO_DIFFERENCE
    # Run one after the other instead (all of a, then all of b): b looks clearly slower.
    speed[0] = 1.0
    seq_a = [drifting(0) for _ in range(9)]
    seq_b = [drifting(0) for _ in range(9)]
    assert min(y / x for x, y in zip(seq_a, seq_b, strict=True)) > 1.3


def test_median_interval_uses_order_statistics_with_stated_coverage():
    low, high, coverage = median_interval([5, 1, 4, 2, 3], 0.9)
    assert (low, high) == (1, 5) and coverage == pytest.approx(1 - 2 / 32)
    low, high, coverage = median_interval(list(range(10)), 0.9)
    assert (low, high) == (1, 8)  # drop one at each end: coverage 97.9 % >= 90 %
    assert coverage == pytest.approx(1 - 2 * 11 / 1024)
    assert median_interval([1.0, 2.0], 0.9)[:2] == (1.0, 2.0)
    with pytest.raises(ValueError):
        median_interval([], 0.9)


def test_mfu_is_the_median_rounds_rate_over_the_best_peak():
    clock = FakeClock()
    peaks = iter([100.0, 200.0, 100.0])
    times = iter([1.0, 2.0, 4.0])
    a = variant(clock, "a", lambda _n: next(times), flops=100.0, peak="float32")
    b = variant(clock, "b", lambda _n: 2.0)
    result = compare.compare(
        [a, b], rounds=3, warmup=0, peaks={"float32": lambda: next(peaks)}, clock=clock
    )
    assert result.peak("float32") == 200.0  # the best round, not the median (100)
    assert result.mfu_per_round("a") == (0.5, 0.25, 0.125)
    assert result.mfu("a") == 0.25  # 100 FLOP / 2 s (the median round) / 200 FLOP/s
    with pytest.raises(ValueError, match="no flops/peak"):
        result.mfu("b")


def test_mfu_above_100_percent_raises():
    clock = FakeClock()
    a = variant(clock, "a", lambda _n: 1.0, flops=150.0, peak="float32")
    b = variant(clock, "b", lambda _n: 1.0)
    with pytest.raises(mfu.MeasurementError, match="MFU 150%"):
        compare.compare([a, b], rounds=2, peaks={"float32": lambda: 100.0}, clock=clock)
    with pytest.raises(mfu.MeasurementError):
        mfu.mfu(2.0, 1.0, 1.0)


def test_busy_moments_in_the_peak_measurements_do_not_push_mfu_over_100_percent():
    """Seen on a loaded 2-core machine: half the rounds' short peak measurements met a busy
    moment (half speed), so pairing each round with its own peak read 140 % in those rounds and
    a median above 100 %. Against the best peak the training's 70 % stands."""
    clock = FakeClock()
    peaks = iter([100.0, 50.0] * 4)
    a = variant(clock, "a", lambda _n: 1.0, flops=70.0, peak="float32")
    b = variant(clock, "b", lambda _n: 1.0)
    result = compare.compare(
        [a, b], rounds=8, warmup=0, peaks={"float32": lambda: next(peaks)}, clock=clock
    )
    assert result.mfu("a") == pytest.approx(0.7)
    assert max(result.mfu_per_round("a")) <= 1.0


def test_a_peak_that_is_no_ceiling_still_raises_whatever_the_rounds():
    """Training at 150 FLOP/s against a peak that never measured above 100: a wrong peak."""
    clock = FakeClock()
    peaks = iter([100.0, 90.0, 95.0])
    a = variant(clock, "a", lambda _n: 1.0, flops=150.0, peak="float32")
    b = variant(clock, "b", lambda _n: 1.0)
    rounds = r"the rounds' 'float32' peaks: 1e-07, 9e-08, 9.5e-08 GFLOP/s; the best"
    with pytest.raises(mfu.MeasurementError, match=r"MFU 150%.*" + rounds):
        compare.compare(
            [a, b], rounds=3, warmup=0, peaks={"float32": lambda: next(peaks)}, clock=clock
        )


def test_bad_input_is_refused_clearly():
    clock = FakeClock()
    a = variant(clock, "a", lambda _n: 1.0)
    with pytest.raises(ValueError, match="two variants"):
        compare.compare([a], clock=clock)
    with pytest.raises(ValueError, match="distinct"):
        compare.compare([a, a], clock=clock)
    with pytest.raises(ValueError, match="rounds"):
        compare.compare([a, variant(clock, "b", lambda _n: 1.0)], rounds=1, clock=clock)
    needs_peak = variant(clock, "c", lambda _n: 1.0, flops=1.0, peak="bfloat16")
    with pytest.raises(ValueError, match="bfloat16"):
        compare.compare([a, needs_peak], clock=clock)
    stuck = variant(clock, "stuck", lambda _n: 0.0)
    with pytest.raises(mfu.MeasurementError, match="not positive"):
        compare.compare([a, stuck], warmup=0, clock=clock)


def test_table_and_metrics_carry_rates_and_verdicts():
    clock = FakeClock()
    a = variant(clock, "seed way", lambda _n: 2.0, work=100)
    b = variant(clock, "course way", lambda _n: 1.0, work=100)
    result = compare.compare([a, b], rounds=5, clock=clock)
    assert result.rate("course way") == 100.0
    table = result.table(baseline="seed way")
    assert "course way" in table and "2.00x" in table and "paired vs seed way" in table
    assert table.splitlines()[-1].startswith("paired: the median of the per-round ratios")
    metrics = result.metrics([("course way", "seed way")])
    assert metrics["verdict_course_way_vs_seed_way"] == (1.0, compare.VERDICT_UNIT)
    assert metrics["ratio_course_way_vs_seed_way"] == (2.0, "x")
    assert result.metrics([("seed way", "course way")])["verdict_seed_way_vs_course_way"][0] == -1


def test_measured_peak_times_after_a_warm_up_and_keeps_the_fastest_call():
    clock = FakeClock()
    # warm-up (compile), one call to size the samples, then three samples of one call each
    durations = iter([50.0, 4.0, 3.0, 2.0, 3.5])

    def matmul() -> None:
        clock.now += next(durations)

    assert mfu.measured_peak(matmul, 10, repeats=3, clock=clock) == 2 * 10**3 / 2.0


def test_measured_peak_times_enough_calls_per_sample_to_outlast_a_scheduler_tick():
    clock, calls = FakeClock(), []

    def matmul() -> None:  # 1 ms each: a 50 ms sample needs 50 calls
        calls.append(1)
        clock.now += 0.001

    rate = mfu.measured_peak(matmul, 10, repeats=2, min_sample_s=0.05, clock=clock)
    assert len(calls) == 2 + 2 * 50 and rate == pytest.approx(2 * 10**3 / 0.001)


def test_an_interval_just_inside_the_threshold_prints_digits_that_show_it():
    # 1.046 would print as 1.05 at two decimals and read as a qualifying interval
    edge = compare.Verdict(
        "a", "b", ratio=1.08, low=1.046, high=1.14, coverage=0.88, rounds=4, threshold=0.05
    )
    assert edge.state == NO_DIFFERENCE
    assert "1.046-1.140x" in edge.sentence()
    assert "above 1.050x or below 0.952x" in edge.sentence()
    faster = compare.Verdict(
        "a", "b", ratio=1.2, low=1.051, high=1.3, coverage=0.88, rounds=4, threshold=0.05
    )
    assert faster.sentence().startswith("a is faster than b: 1.20x, 88% interval 1.051-1.300x")


def test_variants_with_different_work_per_call_compare_by_rate_not_by_call():
    # a does 1,100 images per call in 1.1 s, b 1,024 in 1.024 s: the same rate, so no difference,
    # although a's calls take 7 % longer (notebook 09's seed rung fits a last partial batch).
    clock = FakeClock()
    a = variant(clock, "a", lambda _n: 1.100, work=1100)
    b = variant(clock, "b", lambda _n: 1.024, work=1024)
    result = compare.compare([a, b], rounds=5, clock=clock)
    verdict = result.verdict("a", "b")
    assert verdict.ratio == pytest.approx(1.0)
    assert verdict.state == NO_DIFFERENCE, verdict.sentence()
    assert result.rate("a") == pytest.approx(result.rate("b"))
    # and twice the work in the same time is twice as fast
    c = variant(clock, "c", lambda _n: 1.0, work=2.0)
    d = variant(clock, "d", lambda _n: 1.0, work=1.0)
    doubled = compare.compare([c, d], rounds=5, clock=clock).verdict("c", "d")
    assert doubled.ratio == pytest.approx(2.0)


def test_a_raised_bar_says_so_instead_of_blaming_the_machine():
    # 0.73x with a tight interval resolves a slowdown at 5 %; under a 1.5x bar it is "no
    # difference", and the sentence must not claim the machine cannot resolve it.
    clock = FakeClock()
    a = variant(clock, "a", noisy(1.37, 0.01, 1))
    b = variant(clock, "b", noisy(1.00, 0.01, 2))
    result = compare.compare([a, b], rounds=8, clock=clock, threshold=0.5)
    verdict = result.verdict("a", "b")
    assert verdict.state == NO_DIFFERENCE
    assert "raised bar" in verdict.sentence() and "can resolve" not in verdict.sentence()
    assert "above 1.500x or below 0.667x" in verdict.sentence()
    assert compare.compare([a, b], rounds=8, clock=clock).verdict("a", "b").state == "slower"
    # the whole interval is below 1x: the sentence says so, so that "no difference" is not read
    # as "the same speed"
    assert "though slower across the whole interval" in verdict.sentence()


def test_an_interval_wholly_on_one_side_but_inside_the_bar_names_the_side():
    # 0.89x with interval 0.848-0.988x: every ratio below 1x, but not below 0.952x: no verdict,
    # yet the sentence must not say the machine could not tell them apart.
    slower = compare.Verdict(
        "bf16", "fp32", ratio=0.89, low=0.848, high=0.988, coverage=0.94, rounds=5, threshold=0.05
    )
    assert slower.state == NO_DIFFERENCE
    assert "can resolve" not in slower.sentence()
    assert "beyond this comparison's 5% bar, though slower across the whole interval" in (
        slower.sentence()
    )
    faster = compare.Verdict(
        "a", "b", ratio=1.03, low=1.01, high=1.2, coverage=0.94, rounds=5, threshold=0.05
    )
    assert "though faster across the whole interval" in faster.sentence()
    straddles = compare.Verdict(
        "a", "b", ratio=1.0, low=0.97, high=1.04, coverage=0.94, rounds=5, threshold=0.05
    )
    assert "no difference this machine can resolve (" in straddles.sentence()
    assert "across the whole interval" not in straddles.sentence()
