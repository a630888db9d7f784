"""Tests for utils.bench: timer statistics on a fake clock, throughput maths, byte formats; and
utils.runtime.parse_cpuinfo's model name and instruction sets."""

from __future__ import annotations

import math

import pytest

from utils import bench
from utils.runtime import parse_cpuinfo


class FakeClock:
    """A clock that advances by the next of ``steps`` each time ``fn`` is called."""

    def __init__(self, steps: list[float]) -> None:
        self.now = 0.0
        self.steps = list(steps)
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.calls += 1
        self.now += self.steps.pop(0)


def test_time_fn_warmup_not_timed_and_statistics() -> None:
    # 2 warm-up calls (slow: compilation) then 5 timed samples of 1 call each.
    clock = FakeClock([10.0, 10.0, 0.5, 0.1, 0.3, 0.2, 0.4])
    t = bench.time_fn(clock.work, warmup=2, repeats=5, clock=clock)
    assert clock.calls == 7
    assert t.samples == pytest.approx((0.5, 0.1, 0.3, 0.2, 0.4))
    assert t.median == pytest.approx(0.3)
    assert t.q1 == pytest.approx(0.2) and t.q3 == pytest.approx(0.4)
    assert "min 100.000 ms, max 500.000 ms, n=5" in str(t)
    low, high = t.rate_spread(6.0)
    assert low == pytest.approx(15.0) and high == pytest.approx(30.0)


def test_time_fn_number_divides_and_sync_is_inside_the_sample() -> None:
    clock = FakeClock([1.0] * 2 + [1.0, 3.0] * 2)
    synced = []

    def sync() -> None:
        synced.append(clock.now)
        clock.now += 2.0  # the device finishing counts in the sample

    t = bench.time_fn(clock.work, warmup=0, repeats=2, number=2, sync=sync, clock=clock)
    # sample = (1 + 1 + sync 2) / 2 = 2, then (1 + 3 + 2) / 2 = 3
    assert t.samples == pytest.approx((2.0, 3.0))
    assert len(synced) == 3  # once after warm-up, once per sample


def test_single_sample_quartiles_and_bad_arguments() -> None:
    t = bench.Timing((0.25,))
    assert t.q1 == t.q3 == t.median == 0.25
    with pytest.raises(ValueError):
        bench.time_fn(lambda: None, repeats=0)


def test_calls_for_doubles_until_target() -> None:
    clock = FakeClock([0.001] * 1000)
    n = bench.calls_for(clock.work, target_s=0.01, clock=clock)
    assert n == 16  # 1, 2, 4, 8 calls are too short; 16 calls = 16 ms >= 10 ms


def test_matmul_gflops_counts_2n_cubed() -> None:
    clock = FakeClock([0.5] * 100)
    result = bench.matmul_gflops(clock.work, 1000, repeats=3, clock=clock)
    assert result.value == pytest.approx(2e9 / 0.5 / 1e9)  # 4 GFLOP/s
    assert result.unit == "GFLOP/s"
    assert "GFLOP/s" in str(result)


def test_copy_bandwidth_counts_read_and_write() -> None:
    r = bench.copy_bandwidth(1 << 16, repeats=2, target_s=0.0)
    assert r.unit == "GB/s" and r.value > 0 and math.isfinite(r.value)
    assert r.timing.median > 0


class TickingClock:
    """A clock that moves ``tick`` seconds every time it is read: every sample lasts one tick."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_copy_bandwidth_is_decimal_gigabytes_per_second_on_a_fake_clock() -> None:
    # 2 x 1 MiB (read + write) per copy, one copy per 1 ms sample: 2.097152 GB/s (1e9 bytes),
    # not 1.953 (2**30 bytes, GiB/s)
    r = bench.copy_bandwidth(1 << 20, repeats=3, target_s=0.0, clock=TickingClock(1e-3))
    assert r.value == pytest.approx(2 * 2**20 / 1e-3 / 1e9)
    assert (r.low, r.high) == pytest.approx((r.value, r.value))


def test_matmul_gflops_is_decimal_on_a_fake_clock() -> None:
    # n = 512: 2 x 512^3 FLOP per call; a ticking clock sizes the samples at one call each
    r = bench.matmul_gflops(lambda: None, 512, repeats=3, clock=TickingClock(0.1))
    assert r.value == pytest.approx(2 * 512**3 / 0.1 / 1e9) and r.unit == "GFLOP/s"


def test_format_bytes() -> None:
    assert bench.format_bytes(48 * 1024) == "48 KiB"
    assert bench.format_bytes(300 << 20) == "300 MiB"
    assert bench.format_bytes(512) == "512 B"


FLAGS = (
    "fpu sse sse2 sse4_2 avx fma avx2 avx512f avx512bw avx512_bf16 avx512_vnni amx_bf16 amx_tile "
    "amx_int8 rdrand"
)
SAMPLE_CPUINFO = f"""\
processor\t: 0
vendor_id\t: GenuineIntel
model\t\t: 207
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: {FLAGS}

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: {FLAGS}
"""


def test_instruction_sets_from_cpuinfo() -> None:
    model, features = parse_cpuinfo(SAMPLE_CPUINFO)
    assert model == "Intel(R) Xeon(R) Processor"
    for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8"):
        assert flag in features
    assert "rdrand" not in features and "fpu" not in features  # not notable for ML
    assert list(features) == sorted(set(features))
    _, old = parse_cpuinfo("model name\t: Old CPU\nflags\t\t: fpu sse sse2 avx\n")
    assert "avx" in old and "avx2" not in old and "amx_bf16" not in old
