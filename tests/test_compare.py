"""The comparison harness, driven by a fake clock: balanced rounds, warm-up, verdicts, MFU."""

from __future__ import annotations

import random
import statistics
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from utils import compare, mfu
from utils.compare import CANNOT_TELL, EQUAL, FASTER, SLOWER, Variant, median_interval

UNDECIDED = (EQUAL, CANNOT_TELL)


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


@given(st.integers(1, 12), st.integers(1, 40))
def test_round_orders_are_balanced_for_any_rounds_and_variants(n, rounds):
    orders = compare.round_orders(n, rounds)
    assert len(orders) == rounds and all(sorted(row) == list(range(n)) for row in orders)
    for position in range(n):
        counts = Counter(row[position] for row in orders)
        per_variant = [counts[v] for v in range(n)]
        assert max(per_variant) - min(per_variant) <= 1, (position, per_variant)


@given(st.integers(2, 12))
def test_a_full_williams_cycle_puts_each_variant_after_each_other_equally(n):
    cycle = compare.round_orders(n, n if n % 2 == 0 else 2 * n)
    follows = Counter((row[i], row[i + 1]) for row in cycle for i in range(n - 1))
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1


@pytest.mark.parametrize("n_peaks", [1, 2])
@pytest.mark.parametrize("rounds", [2, 3, 7])
def test_rounds_follow_the_design_and_peaks_bracket_every_round(rounds, n_peaks):
    """Fewer rounds than jobs: with the peaks among the rotated jobs some variants always ran
    first or right after a peak; now the peaks open and close every round."""
    clock, log = FakeClock(), []
    vs = [variant(clock, n, lambda _: 1.0, log) for n in "abc"]
    keys = ["float32", "bfloat16"][:n_peaks]
    peaks = {k: (lambda k=k: log.append(f"peak:{k}") or 1e12) for k in keys}
    result = compare.compare(vs, rounds=rounds, warmup=0, peaks=peaks, clock=clock)
    bracket = tuple(f"peak:{k}" for k in keys)
    expected = [
        bracket + tuple("abc"[i] for i in row) + bracket for row in compare.round_orders(3, rounds)
    ]
    assert list(result.orders) == expected
    assert log == [name for order in expected for name in order]
    assert all(len(result.peaks[k]) == 2 * rounds for k in keys)


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
def test_a_3_percent_difference_under_10_percent_noise_cannot_be_told(seed):
    clock = FakeClock()
    a = variant(clock, "a", noisy(1.00, 0.10, seed))
    b = variant(clock, "b", noisy(1.03, 0.10, seed + 1000))
    verdict = compare.compare([a, b], rounds=5, clock=clock).verdict("a", "b")
    assert verdict.state in UNDECIDED, verdict.sentence()
    if verdict.state == CANNOT_TELL:
        assert "cannot tell at this noise (" in verdict.sentence()


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
    assert result.verdict("a", "b").state in UNDECIDED
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
    peaks = iter([100.0, 100.0, 200.0, 100.0, 100.0, 100.0])  # before and after each round
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
    peaks = iter([100.0, 50.0] * 8)
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
    peaks = iter([100.0, 90.0, 95.0, 80.0, 90.0, 95.0])
    a = variant(clock, "a", lambda _n: 1.0, flops=150.0, peak="float32")
    b = variant(clock, "b", lambda _n: 1.0)
    rounds = r"the rounds' 'float32' peaks: 1e-07, 9e-08, 9.5e-08, 8e-08, 9e-08, 9.5e-08 GFLOP/s"
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
    assert table.splitlines()[-2].startswith("paired: the median of the per-round ratios")
    assert table.splitlines()[-1] == (
        "intervals: 93.8% coverage each (5 rounds); 1 comparison from the same rounds: "
        "expect about 0.1 to miss its true ratio by chance."
    )
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


def _verdict(low: float, high: float, ratio: float | None = None, t: float = 0.05):
    ratio = (low + high) / 2 if ratio is None else ratio
    return compare.Verdict("a", "b", ratio, low, high, coverage=0.938, rounds=5, threshold=t)


@pytest.mark.parametrize(
    ("low", "high", "state"),
    [
        (1.051, 1.3, FASTER),  # the whole interval above 1.05
        (1.05, 1.3, CANNOT_TELL),  # touches the edge: not beyond it
        (1.05, 1.05, EQUAL),  # on the edge, inside the closed band
        (0.7, 1 / 1.05 - 1e-9, SLOWER),
        (0.7, 1 / 1.05, CANNOT_TELL),
        (1 / 1.05, 1.05, EQUAL),  # exactly the band
        (1 / 1.05 - 1e-9, 1.0, CANNOT_TELL),  # straddles the low edge
        (1.0, 1.0500001, CANNOT_TELL),  # straddles the high edge
        (0.9, 1.2, CANNOT_TELL),  # straddles both
    ],
)
def test_verdict_states_at_the_band_edges(low, high, state):
    assert _verdict(low, high).state == state


def test_sentences_say_which_state_with_digits_that_show_the_edge():
    # 1.046 would print as 1.05 at two decimals and read as a qualifying interval
    assert "1.046-1.140x" in _verdict(1.046, 1.14, 1.08).sentence()
    faster = _verdict(1.051, 1.3, 1.2).sentence()
    assert faster.startswith("a is faster than b: 1.20x, 93.8% interval 1.051-1.300x over 5 ")
    equal = _verdict(0.98, 1.03, 1.01).sentence()
    assert equal == "a vs b: equal within ±5% (1.01x, 93.8% interval 0.980-1.030x over 5 rounds)."
    cannot = _verdict(0.97, 1.12, 1.03).sentence()
    assert cannot.startswith("a vs b: cannot tell at this noise (1.03x, 93.8% interval 0.970-")
    assert "above 1.050x or below 0.952x, equal needs it inside 0.952-1.050x" in cannot
    # wholly on one side of 1x yet inside the band: "equal" must not read as "the same speed"
    assert (
        "equal within ±5%, though slower across the whole interval"
        in _verdict(0.96, 0.99).sentence()
    )
    assert "equal within ±50%, though faster" in _verdict(1.2, 1.3, t=0.5).sentence()


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=40), st.floats(0.5, 0.99))
def test_the_median_lies_inside_its_interval(values, confidence):
    low, high, coverage = median_interval(values, confidence)
    assert low <= statistics.median(values) <= high
    assert 0.0 <= coverage < 1.0


@given(st.lists(st.floats(0.5, 2.0), min_size=2, max_size=20), st.floats(0.5, 2.0))
def test_the_reported_ratio_is_inside_its_interval(a_seconds, scale):
    b_seconds = [s * scale for s in reversed(a_seconds)]
    v = _comparison(a_seconds, b_seconds).verdict("a", "b")
    assert v.low <= v.ratio <= v.high and v.rounds == len(a_seconds)


def _comparison(a_seconds, b_seconds, **kw) -> compare.Comparison:
    variants = (Variant("a", lambda: None), Variant("b", lambda: None))
    return compare.Comparison(variants, {"a": tuple(a_seconds), "b": tuple(b_seconds)}, **kw)


def test_one_outlier_round_moves_the_median_not_the_verdict():
    """Seven rounds at 1.2x and one where b met a busy moment (20x): the mean of the ratios
    would report 3.6x; the median stays 1.2x."""
    v = _comparison([1.0] * 8, [1.2] * 7 + [20.0]).verdict("a", "b")
    assert v.ratio == pytest.approx(1.2) and v.state == FASTER


def test_variants_with_different_work_per_call_compare_by_rate_not_by_call():
    # a does 1,100 images per call in 1.1 s, b 1,024 in 1.024 s: the same rate, so no difference,
    # although a's calls take 7 % longer (notebook 09's seed rung fits a last partial batch).
    clock = FakeClock()
    a = variant(clock, "a", lambda _n: 1.100, work=1100)
    b = variant(clock, "b", lambda _n: 1.024, work=1024)
    result = compare.compare([a, b], rounds=5, clock=clock)
    verdict = result.verdict("a", "b")
    assert verdict.ratio == pytest.approx(1.0)
    assert verdict.state == EQUAL, verdict.sentence()
    assert result.rate("a") == pytest.approx(result.rate("b"))
    # and twice the work in the same time is twice as fast
    c = variant(clock, "c", lambda _n: 1.0, work=2.0)
    d = variant(clock, "d", lambda _n: 1.0, work=1.0)
    doubled = compare.compare([c, d], rounds=5, clock=clock).verdict("c", "d")
    assert doubled.ratio == pytest.approx(2.0)


def test_a_raised_bar_makes_a_resolved_slowdown_equal_within_it():
    # 0.73x with a tight interval resolves a slowdown at 5 %; under a 1.5x bar it is equal
    # within +-50 %, and the sentence names the side.
    clock = FakeClock()
    a = variant(clock, "a", noisy(1.37, 0.01, 1))
    b = variant(clock, "b", noisy(1.00, 0.01, 2))
    verdict = compare.compare([a, b], rounds=8, clock=clock, threshold=0.5).verdict("a", "b")
    assert verdict.state == EQUAL
    assert "equal within ±50%, though slower across the whole interval" in verdict.sentence()
    assert compare.compare([a, b], rounds=8, clock=clock).verdict("a", "b").state == SLOWER


def test_metrics_code_every_state_and_none_is_nan():
    assert set(compare.VERDICT_VALUES) == set(compare.STATES)
    assert compare.VERDICT_VALUES == {FASTER: 1.0, SLOWER: -1.0, EQUAL: 0.0, CANNOT_TELL: 0.5}
    straddles = _comparison([1.0, 1.1, 0.9, 1.0, 1.05], [1.0] * 5)
    assert straddles.verdict("a", "b").state == CANNOT_TELL
    assert straddles.metrics([("a", "b")])["verdict_a_vs_b"] == (0.5, compare.VERDICT_UNIT)


def test_mfu_divides_every_dtype_by_one_ceiling():
    """On a CPU bf16 matmuls may run slower than float32: a bf16 rung divided by its own slower
    peak showed a higher MFU while it ran slower. Both now divide by the best of all dtypes."""
    clock = FakeClock()
    fp32 = variant(clock, "fp32", lambda _n: 1.0, flops=50.0, peak="float32")
    bf16 = variant(clock, "bf16", lambda _n: 2.0, flops=50.0, peak="bfloat16")
    peaks = {"float32": lambda: 100.0, "bfloat16": lambda: 40.0}
    result = compare.compare([fp32, bf16], rounds=2, warmup=0, peaks=peaks, clock=clock)
    assert result.ceiling("bfloat16") == result.ceiling("float32") == 100.0
    assert result.mfu("fp32") == 0.5 and result.mfu("bf16") == 0.25
    assert result.peak("bfloat16") == 40.0
    # a key that is not a dtype (a chip count) is its own ceiling
    many = compare.Comparison(
        result.variants, result.seconds, {"1 chip": (1.0,), "8 chips": (8.0,)}
    )
    assert many.ceiling("1 chip") == 1.0 and many.ceiling("8 chips") == 8.0


@pytest.mark.parametrize("rounds", [7, 9])
@given(data=st.data())
def test_the_table_states_the_coverage_of_every_verdict(rounds, data):
    """At 7 and 9 rounds a lower confidence gives another interval (7: the second and sixth of
    seven ratios at 87.5 % instead of all seven at 98.4 %): the verdict must use the interval the
    table's coverage line describes, at compare.CONFIDENCE."""
    seconds = st.lists(st.floats(0.5, 2.0), min_size=rounds, max_size=rounds)
    result = compare.Comparison(
        (Variant("a", lambda: None), Variant("b", lambda: None)),
        {"a": tuple(data.draw(seconds)), "b": tuple(data.draw(seconds))},
    )
    verdict = result.verdict("b", "a")
    assert f"intervals: {verdict.coverage:.1%} coverage each ({rounds} rounds)" in result.table()
    ratios = [a / b for a, b in zip(result.seconds["a"], result.seconds["b"], strict=True)]
    assert (verdict.low, verdict.high) == median_interval(ratios, compare.CONFIDENCE)[:2]
    assert verdict.coverage >= compare.CONFIDENCE
