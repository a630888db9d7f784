"""Speed comparisons that survive a re-run: interleaved rounds, an interval, a three-state verdict.

Framework-free. Every sentence in the course that says one way is faster than another is printed
from a :class:`Verdict` made here, the way MLPerf and pyperf measure and A/B tests decide:

- **Warm-up first, outside the timed region**: each variant runs ``warmup`` times untimed
  (tracing, compiling, filling caches).
- **Balanced rounds**: every round runs every variant once, in the order of one row of a Williams
  design (:func:`round_orders`): over any number of rounds each variant sits in each position
  as evenly as the rounds allow, so a machine that drifts slows every variant alike. The peaks
  are measured before and after the variants of every round (they bracket it).
- **Paired ratios**: round *r* gives ``time_b / time_a`` for a pair measured seconds apart; the
  estimate is their median and the interval a distribution-free one (order statistics of the
  ratios, the sign-test interval for a median): no normality assumed, no random numbers. The
  median always lies inside its interval.
- **Three verdicts** against a band of ``threshold`` (5 % by default): *faster* / *slower* when
  the whole interval lies beyond the band; *equal* (within +-5 %) when the whole interval lies
  inside it; *cannot tell* when the interval straddles an edge of the band. Two runs then
  contradict each other only as faster against slower, or equal against faster or slower.
- **Many comparisons from the same rounds**: each interval covers its ratio with the stated
  probability (5 rounds: 93.8 %); among many comparisons some miss by chance, and
  :meth:`Comparison.table` says how many it shows.
- **MFU against one ceiling**: the peaks are measured inside every round, beside the training
  (same run, same compile path), and the ceiling is the best of those measurements: a peak is
  the fastest the machine showed, and a busy moment never speeds a measurement up. Peaks keyed
  by a dtype (:data:`utils.mfu.DTYPES`) are one chip measured at several precisions, so they
  share one ceiling, the best of them all (a bfloat16 rung that runs slower must not show a
  higher MFU). MFU is the median round's achieved FLOP/s over that ceiling. An MFU above 100 %
  raises :class:`MeasurementError`: the peak is not a ceiling (wrong code path), never that
  training beat it.

The clock is injectable, so tests drive all of this with a fake clock.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from utils.bench import Timing
from utils.mfu import DTYPES, MeasurementError
from utils.mfu import mfu as mfu_ratio

Clock = Callable[[], float]
FASTER, SLOWER, EQUAL, CANNOT_TELL = "faster", "slower", "equal", "cannot tell"
STATES = (FASTER, SLOWER, EQUAL, CANNOT_TELL)
# As recorded metrics: 0.5 ("cannot tell") is no point on the -1..+1 scale and no result may be NaN.
VERDICT_VALUES = {FASTER: 1.0, EQUAL: 0.0, SLOWER: -1.0, CANNOT_TELL: 0.5}
VERDICT_UNIT = "verdict (+1 faster, -1 slower, 0 equal within the threshold, 0.5 cannot tell)"
# A verdict needs the whole interval beyond 5 % either way unless a comparison raises the bar.
DEFAULT_THRESHOLD = 0.05
CONFIDENCE = 0.9  # every verdict's interval and the coverage the table states: one figure


@dataclass(frozen=True)
class Variant:
    """One way of doing the work.

    ``run()`` does one timed unit (an epoch, N training steps, one pass over a pipeline);
    ``work`` counts what it processes per call (images), ``flops`` the model FLOPs per call (for
    MFU), ``peak`` names the entry of ``compare(peaks=...)`` (the dtype it computes in) whose
    ceiling its MFU divides by (:meth:`Comparison.ceiling`). ``sync`` waits for an asynchronous
    device, inside the timed region; ``after`` runs after the clock stops (releasing what the call
    made, such as an iterator whose teardown is not the work being timed).
    """

    name: str
    run: Callable[[], object]
    work: float = 1.0
    flops: float | None = None
    peak: str | None = None
    sync: Callable[[], object] | None = None
    after: Callable[[], object] | None = None


PAIRED_NOTE = (
    "paired: the median of the per-round ratios (what the verdict uses); the ratio of the "
    "median rates can differ when rounds are noisy."
)


def median_interval(
    values: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """A distribution-free interval for the median of ``values``: ``(low, high, coverage)``.

    The narrowest symmetric pair of order statistics whose coverage (from the binomial
    distribution, as in the sign test) reaches ``confidence``; with too few values for that,
    the full range and its actual coverage (5 values: 93.8 %; 4 values: 87.5 %).
    """
    if not values or not 0 < confidence < 1:
        raise ValueError(f"need values and a confidence in (0, 1), got {values!r}, {confidence}")
    xs, n = sorted(values), len(values)
    best = (xs[0], xs[-1], 1.0 - 2.0 * 0.5**n if n > 1 else 0.0)
    for k in range(1, n // 2):  # use xs[k] .. xs[n-1-k]
        coverage = 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
        if coverage < confidence:
            break
        best = (xs[k], xs[n - 1 - k], coverage)
    return best


@dataclass(frozen=True)
class Verdict:
    """``a`` against ``b``: ``ratio`` = b's time per unit of work / a's (above 1: a is faster)."""

    a: str
    b: str
    ratio: float
    low: float
    high: float
    coverage: float
    rounds: int
    threshold: float

    @property
    def state(self) -> str:
        """One of :data:`STATES`: a compared with b, against the band ``[1/(1+t), 1+t]``."""
        bar = 1.0 + self.threshold
        if self.low > bar:
            return FASTER
        if self.high < 1.0 / bar:
            return SLOWER
        if 1.0 / bar <= self.low and self.high <= bar:
            return EQUAL
        return CANNOT_TELL

    def sentence(self) -> str:
        """The conclusion in words, with the numbers behind it."""
        numbers = (
            f"{self.ratio:.2f}x, {self.coverage:.1%} interval {self.low:.3f}-{self.high:.3f}x "
            f"over {self.rounds} rounds"
        )
        state, bar = self.state, 1.0 + self.threshold
        if state in (FASTER, SLOWER):
            return f"{self.a} is {state} than {self.b}: {numbers}."
        if state == EQUAL:
            # wholly on one side of 1x yet inside the band: say so, "equal" is not "the same"
            side = "slower" if self.high < 1.0 else "faster" if self.low > 1.0 else ""
            though = f", though {side} across the whole interval" if side else ""
            return f"{self.a} vs {self.b}: equal within ±{self.threshold:.0%}{though} ({numbers})."
        return (
            f"{self.a} vs {self.b}: cannot tell at this noise ({numbers}; faster or slower needs "
            f"the whole interval above {bar:.3f}x or below {1.0 / bar:.3f}x, equal needs it "
            f"inside {1.0 / bar:.3f}-{bar:.3f}x)."
        )


@dataclass(frozen=True)
class Comparison:
    """Seconds per round for every variant, the order each round ran in, and the peaks
    (measured before and after the variants of every round: two per round)."""

    variants: tuple[Variant, ...]
    seconds: Mapping[str, tuple[float, ...]]
    peaks: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    orders: tuple[tuple[str, ...], ...] = ()
    threshold: float = DEFAULT_THRESHOLD

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def _variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)

    def timing(self, name: str) -> Timing:
        """Seconds per call over the rounds, as a :class:`utils.bench.Timing` (median, IQR)."""
        return Timing(tuple(self.seconds[name]))

    def rate(self, name: str) -> float:
        """Work per second at the median round (e.g. images/s)."""
        return self._variant(name).work / self.timing(name).median

    def rate_spread(self, name: str) -> tuple[float, float]:
        """(low, high) work per second at the third and first quartile of the round times."""
        return self.timing(name).rate_spread(self._variant(name).work)

    def peak(self, key: str) -> float:
        """The best of the rounds' measurements of peak ``key`` (FLOP/s)."""
        return max(self.peaks[key])

    def ceiling(self, key: str) -> float:
        """What MFU divides by for peak ``key``: the best measurement of any dtype-keyed peak
        (:data:`utils.mfu.DTYPES`, one chip at several precisions), else of ``key`` alone."""
        if key in DTYPES:
            return max(self.peak(k) for k in self.peaks if k in DTYPES)
        return self.peak(key)

    def mfu_per_round(self, name: str) -> tuple[float, ...]:
        """Each round's achieved FLOP/s over the ceiling (fractions, unchecked)."""
        v = self._variant(name)
        return tuple(v.flops / s / self.ceiling(v.peak) for s in self.seconds[name])

    def mfu(self, name: str) -> float:
        """The median round's achieved FLOP/s over the ceiling (:meth:`ceiling`), checked.

        A busy moment can slow a round's training or a peak measurement, never speed either up;
        so the best peak is the ceiling, and an MFU above 100 % means the peak is not a ceiling
        for this work (:class:`MeasurementError`, from :func:`utils.mfu.mfu`).
        """
        v = self._variant(name)
        if v.flops is None or v.peak is None:
            raise ValueError(f"variant {name!r} has no flops/peak: MFU is not defined for it")
        try:
            return mfu_ratio(v.flops, self.timing(name).median, self.ceiling(v.peak))
        except MeasurementError as error:
            rounds = ", ".join(f"{p / 1e9:.3g}" for p in self.peaks[v.peak])
            raise MeasurementError(
                f"{name}: {error} (the rounds' {v.peak!r} peaks: {rounds} GFLOP/s; "
                "the best is the ceiling)"
            ) from None

    def verdict(self, a: str, b: str) -> Verdict:
        """``a`` against ``b`` from the paired rounds, per unit of work.

        Each round's ratio is b's time per unit of ``work`` over a's, so two variants that process
        different amounts per call (a last partial batch, say) compare by rate, as the table does.
        """
        wa, wb = self._variant(a).work, self._variant(b).work
        pairs = zip(self.seconds[a], self.seconds[b], strict=True)
        ratios = [(y / wb) / (x / wa) for x, y in pairs]
        low, high, coverage = median_interval(ratios, CONFIDENCE)
        ratio = statistics.median(ratios)
        return Verdict(a, b, ratio, low, high, coverage, len(ratios), self.threshold)

    def table(self, *, baseline: str | None = None) -> str:
        """A fixed-width table: median rate, its IQR, MFU where defined, and the paired ratio
        (the verdict's estimate: the median of the per-round ratios to ``baseline``)."""
        baseline = baseline or self.names[0]
        head = f"{'paired vs ' + baseline:>12}"
        lines = [f"{'variant':<28} {'rate /s':>10} {'IQR':>19} {'MFU':>6} {head}"]
        for v in self.variants:
            lo, hi = self.rate_spread(v.name)
            mfu = f"{self.mfu(v.name):.0%}" if v.flops is not None and v.peak else "-"
            ratio = f"{self.verdict(v.name, baseline).ratio:.2f}x" if v.name != baseline else ""
            lines.append(
                f"{v.name:<28} {self.rate(v.name):>10,.0f} {lo:>9,.0f}-{hi:<9,.0f} {mfu:>6} "
                f"{ratio:>{len(head)}}"
            )
        rounds = len(self.seconds[baseline])
        coverage, pairs = median_interval([1.0] * rounds, CONFIDENCE)[2], len(self.variants) - 1
        lines.append(PAIRED_NOTE)
        lines.append(
            f"intervals: {coverage:.1%} coverage each ({rounds} rounds); {pairs} comparison"
            f"{'s' if pairs > 1 else ''} from the same rounds: expect about "
            f"{pairs * (1 - coverage):.1f} to miss its true ratio by chance."
        )
        return "\n".join(lines)

    def metrics(
        self, pairs: Sequence[tuple[str, str]], *, prefix: str = ""
    ) -> dict[str, tuple[float, str]]:
        """Verdicts and ratios of ``pairs`` as :func:`utils.results.record` metrics.

        ``verdict_<a>_vs_<b>``: :data:`VERDICT_VALUES` (+1 faster, -1 slower, 0 equal, 0.5 cannot
        tell; :data:`VERDICT_UNIT`);
        ``ratio_...``, ``ratio_low_...``, ``ratio_high_...``: the median ratio and its interval.
        ``python -m tests.tools.twice`` compares these keys between two runs.
        """
        out: dict[str, tuple[float, str]] = {}
        for a, b in pairs:
            v = self.verdict(a, b)
            key = f"{prefix}{_slug(a)}_vs_{_slug(b)}"
            out[f"verdict_{key}"] = (VERDICT_VALUES[v.state], VERDICT_UNIT)
            for stat, value in (("ratio", v.ratio), ("ratio_low", v.low), ("ratio_high", v.high)):
                out[f"{stat}_{key}"] = (round(value, 4), "x")
        return out


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_")


def round_orders(n_variants: int, rounds: int) -> list[list[int]]:
    """The order of the variants (indices) in each round: rows of a Williams design.

    Row ``i`` of the square is ``0, 1, n-1, 2, n-2, ...`` shifted by ``i`` (mod ``n``): each
    variant once in each position and, over ``n`` rows, right after each other variant once. For
    odd ``n`` the square is followed by its mirror (``2n`` rows). The rows repeat in that cycle,
    so for any ``rounds`` each variant's count in a position differs from another's by at most 1.
    """
    if n_variants < 1 or rounds < 0:
        raise ValueError(f"need n_variants >= 1 and rounds >= 0, got {n_variants}, {rounds}")
    n = n_variants
    first = [(j + 1) // 2 if j % 2 else (n - j // 2) % n for j in range(n)]
    square = [[(x + i) % n for x in first] for i in range(n)]
    cycle = square + ([row[::-1] for row in square] if n % 2 else [])
    return [list(cycle[r % len(cycle)]) for r in range(rounds)]


def compare(
    variants: Sequence[Variant],
    *,
    rounds: int = 8,
    warmup: int = 1,
    peaks: Mapping[str, Callable[[], float]] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    progress: Callable[[int, int], object] | None = None,
    clock: Clock = time.perf_counter,
) -> Comparison:
    """Run ``variants`` for ``rounds`` rounds after ``warmup`` untimed calls each.

    Round ``r`` runs the variants in the order :func:`round_orders` gives it, bracketed by the
    ``peaks`` (a key such as ``"float32"`` -> a callable measuring FLOP/s now), each measured
    before and after the variants. ``progress(round, rounds)`` is called after each round.

    Raises:
        ValueError: fewer than 2 variants, duplicate names, ``rounds < 2``, a variant naming a
            peak that ``peaks`` lacks.
        MeasurementError: an MFU above 100 % (see :meth:`Comparison.mfu`).
    """
    names, peaks = [v.name for v in variants], dict(peaks or {})
    if len(variants) < 2 or len(set(names)) != len(names):
        raise ValueError(f"need at least two variants with distinct names, got {names}")
    if rounds < 2 or warmup < 0:
        raise ValueError(f"need rounds >= 2 and warmup >= 0, got rounds={rounds}, warmup={warmup}")
    for v in variants:
        if v.peak is not None and v.peak not in peaks:
            raise ValueError(f"variant {v.name!r} divides by peak {v.peak!r}; pass peaks={{...}}")
    for _ in range(warmup):
        for v in variants:
            _seconds(v, clock)
    jobs = [(v.name, partial(_seconds, v, clock)) for v in variants]
    bracket = [(f"peak:{key}", fn) for key, fn in peaks.items()]
    measured: dict[str, list[float]] = {name: [] for name, _ in jobs + bracket}
    orders = []
    for r, row in enumerate(round_orders(len(jobs), rounds)):
        order = bracket + [jobs[i] for i in row] + bracket
        orders.append(tuple(name for name, _ in order))
        for name, job in order:
            measured[name].append(job())
            if not measured[name][-1] > 0:  # seconds or FLOP/s: the clock, sync or peak is wrong
                raise MeasurementError(f"{name}: measured {measured[name][-1]!r}, not positive")
        if progress is not None:
            progress(r + 1, rounds)
    seconds = {name: tuple(measured[name]) for name in names}
    peak_values = {key: tuple(measured[f"peak:{key}"]) for key in peaks}
    result = Comparison(tuple(variants), seconds, peak_values, tuple(orders), threshold)
    for v in variants:
        if v.flops is not None and v.peak is not None:
            result.mfu(v.name)  # raises MeasurementError above 100 %
    return result


def _seconds(variant: Variant, clock: Clock) -> float:
    """One call of ``variant.run`` (and its ``sync``), timed; then its ``after``, untimed."""
    start = clock()
    variant.run()
    if variant.sync is not None:
        variant.sync()
    elapsed = clock() - start
    if variant.after is not None:
        variant.after()
    return elapsed
