"""A roofline step-time model: predict a training step from FLOPs, bytes and host overhead.

Framework-free (plain arithmetic; matplotlib only inside :func:`plot_ladder`). One model, three
terms, applied layer by layer::

    layer time = max(FLOPs / peak FLOP/s,  bytes moved / memory bandwidth)
    step time  = sum of layer times + optimizer update + host overhead / steps_per_execution

- **FLOPs** follow :mod:`utils.mfu` (:func:`utils.mfu.training_flops`): a layer with weights
  costs its forward FLOPs three times (forward, weight gradient, input gradient), the first layer
  twice (nobody needs the gradient of the images); a layer without weights (pooling,
  element-wise) twice. :func:`training_costs` sums to exactly ``mfu.training_flops``.
- **Bytes** follow the same passes: each backward matmul reads and writes as much as the forward
  one (weight gradient: reads input and output gradient, writes a weight-sized gradient; input
  gradient: reads output gradient and weights, writes an input-sized gradient), all at the
  compute dtype (``dtype_bytes`` of the :class:`utils.flops.LayerCost` list: 4 for float32, 2
  for bfloat16). Pooling and element-wise layers move their forward bytes once more backward.
  The optimizer (Adam) reads weights, gradients and two moments and writes weights and two
  moments, in float32: 7 x 4 bytes per parameter.
- **Matrix-unit padding**: a TPU's MXU multiplies ``t x t`` tiles (``t = 128`` up to v5p,
  ``256`` on v6e). A matmul whose contraction ``K`` or output width ``N`` is not a multiple of
  ``t`` is padded, so a conv with 32 channels uses 32/128 of the array. :class:`Machine.mxu`
  turns that into an efficiency; CPUs have no such tile (``mxu=None``).
- **Host overhead**: the time the host spends per call into the device program (Python, Keras,
  launching): measured, never assumed. ``steps_per_execution`` divides it.

Machines: :func:`cpu_machine` from figures measured in the same run (``utils.bench``), and
:data:`PUBLISHED` for TPU v5e, v5p and v6e (plus v2 for the published-figure check), each with
its source. Predictions for a TPU are predictions: the notebook labels them so, and ``make
report`` puts measured TPU figures beside them once a TPU results file exists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from utils import mfu as mfu_mod
from utils.flops import (
    LayerCost,
    conv2d_cost,
    dense_cost,
    elementwise_cost,
)

__all__ = [
    "ADAM_BYTES_PER_PARAM",
    "PUBLISHED",
    "PUBLISHED_RESNET50",
    "LayerTime",
    "Band",
    "Calibration",
    "Machine",
    "StepPrediction",
    "band",
    "calibration",
    "input_seconds",
    "machine_here",
    "sig",
    "TrainCost",
    "cpu_machine",
    "diagnose",
    "fit_host_overhead",
    "mxu_efficiency",
    "parameter_count",
    "predict_step",
    "relative_error",
    "resnet50_costs",
    "training_costs",
]

ADAM_BYTES_PER_PARAM = 7 * 4
"""Adam's update traffic per parameter: read weight, gradient, m, v; write weight, m, v (fp32)."""


# --------------------------------------------------------------------------------------------
# Machines
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    """What the roofline needs to know about a chip (one chip, or one CPU).

    ``peak_flops``: FLOP/s at the compute dtype; ``bandwidth``: bytes/s of its main memory;
    ``host_overhead_s``: host time per call into the device program (divided by
    ``steps_per_execution``; 0: not measured, so not part of these figures);
    ``host_overhead_spread``: its (first, third) quartile in seconds, when measured;
    ``mxu``: the matrix unit's tile edge (None: no padding); ``source``: where the figures
    come from (a URL, or "measured in this run").
    """

    name: str
    peak_flops: float
    bandwidth: float
    host_overhead_s: float = 0.0
    mxu: int | None = None
    source: str = ""
    host_overhead_spread: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not self.peak_flops > 0 or not self.bandwidth > 0 or self.host_overhead_s < 0:
            raise ValueError(
                f"machine {self.name!r}: need peak_flops > 0, bandwidth > 0, host_overhead_s >= 0"
                f"; got {self.peak_flops!r}, {self.bandwidth!r}, {self.host_overhead_s!r}"
            )
        if self.mxu is not None and self.mxu < 1:
            raise ValueError(f"machine {self.name!r}: mxu must be >= 1 or None, got {self.mxu}")
        if self.host_overhead_spread is not None:
            lo, hi = self.host_overhead_spread
            if not 0 <= lo <= hi:
                raise ValueError(
                    f"machine {self.name!r}: host_overhead_spread must be (q1, q3) with "
                    f"0 <= q1 <= q3, got {self.host_overhead_spread!r}"
                )

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) above which a layer is compute-bound."""
        return self.peak_flops / self.bandwidth

    def with_host_overhead(
        self, seconds: float, spread: tuple[float, float] | None = None
    ) -> Machine:
        """The same chip with a host overhead per call (e.g. the one measured on this host),
        and its spread (first and third quartile, seconds) when measured."""
        return replace(
            self,
            host_overhead_s=float(seconds),
            host_overhead_spread=None if spread is None else (float(spread[0]), float(spread[1])),
        )

    def host_text(self) -> str:
        """The host overhead to two significant figures with its spread, or "not measured"."""
        if not self.host_overhead_s > 0:
            return "host overhead not measured (not part of these figures)"
        text = f"host overhead {sig(self.host_overhead_s * 1e3)} ms per call"
        if self.host_overhead_spread is not None:
            lo, hi = self.host_overhead_spread
            text += f" (IQR {sig(lo * 1e3)}-{sig(hi * 1e3)} ms)"
        return text

    def describe(self) -> str:
        return (
            f"{self.name}: {self.peak_flops / 1e12:,.3g} TFLOP/s, {self.bandwidth / 1e9:,.4g} GB/s"
            f" (ridge {self.ridge:,.0f} FLOP/byte), {self.host_text()}"
            + (f", MXU {self.mxu}x{self.mxu}" if self.mxu else "")
        )


_TPU_INFO = (
    "JAX's table of TPU figures, jax/_src/pallas/mosaic/tpu_info.py (mem_bw_bytes_per_second, "
    "mxu_column_size; https://github.com/jax-ml/jax)"
)
_MXU_SOURCE = "https://cloud.google.com/tpu/docs/system-architecture-tpu-vm and " + _TPU_INFO


def _tpu(generation: str, bandwidth: float, mxu: int, source: str) -> Machine:
    return Machine(
        name=f"TPU {generation} (1 chip, bf16)",
        peak_flops=mfu_mod.peak_flops(tpu_generation=generation),
        bandwidth=bandwidth,
        mxu=mxu,
        source=source,
    )


PUBLISHED: dict[str, Machine] = {
    "v5e": _tpu(
        "v5e",
        819e9,
        128,
        "https://cloud.google.com/tpu/docs/v5e (197 TFLOP/s bf16, HBM2 16 GB at 819 GBps, "
        "4 MXUs per TensorCore); 128x128 MXU: " + _MXU_SOURCE,
    ),
    "v5p": _tpu(
        "v5p",
        2765e9,
        128,
        "https://cloud.google.com/tpu/docs/v5p (459 TFLOP/s bf16, HBM2e 95 GB at 2,765 GBps)",
    ),
    "v6e": _tpu(
        "v6e",
        1638e9,
        256,
        "https://cloud.google.com/tpu/docs/v6e (918 TFLOP/s bf16, 32 GB HBM at 1,638 GBps); "
        "256x256 MXU: " + _MXU_SOURCE,
    ),
    "v2": _tpu(
        "v2",
        716e9,
        128,
        "46 TFLOP/s bf16 (bf16_ops_per_second) and 716 GB/s HBM per chip (Cloud TPU's v2 page "
        "gives no figures): " + _TPU_INFO,
    ),
}
"""Published per-chip figures, each with its public source."""


def cpu_machine(
    peak_flops: float,
    bandwidth: float,
    host_overhead_s: float = 0.0,
    *,
    name: str = "this CPU (measured in this run)",
) -> Machine:
    """This machine, from its matmul rate and copy bandwidth measured *in the same run*."""
    return Machine(
        name=name,
        peak_flops=float(peak_flops),
        bandwidth=float(bandwidth),
        host_overhead_s=float(host_overhead_s),
        mxu=None,
        source="measured in this run (utils.mfu.measured_peak, utils.bench.copy_bandwidth)",
    )


# --------------------------------------------------------------------------------------------
# Per-layer training cost
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainCost:
    """FLOPs and bytes of one layer for one training step (forward + backward)."""

    name: str
    flops: int
    bytes: int
    passes: int  # 1 forward + backward passes (2 or 3)
    matmul: tuple[int, int, int] | None = None


def training_costs(layers: Sequence[LayerCost]) -> list[TrainCost]:
    """Forward + backward FLOPs and bytes per layer (see the module docstring for the rules).

    ``sum(c.flops for c in training_costs(layers)) == utils.mfu.training_flops(layers)``.
    """
    out = []
    for i, layer in enumerate(layers):
        passes = mfu_mod.training_passes(i, layer)  # the one backward rule
        out.append(
            TrainCost(
                name=layer.name,
                flops=layer.flops * passes,
                bytes=layer.bytes * passes,
                passes=passes,
                matmul=layer.matmul,
            )
        )
    return out


def parameter_count(layers: Sequence[LayerCost], *, bias: bool = True) -> int:
    """Weights of the matmul layers: ``K x N`` (+ ``N`` biases) each."""
    total = 0
    for layer in layers:
        if layer.matmul is not None:
            _, k, n = layer.matmul
            total += k * n + (n if bias else 0)
    return total


def mxu_efficiency(matmul: tuple[int, int, int] | None, mxu: int | None) -> float:
    """Fraction of a ``mxu x mxu`` matrix unit a matmul ``(M, K, N)`` keeps busy.

    ``K`` and ``N`` are padded up to multiples of the tile (``M``, the batch x pixels, is large
    and streams through). No tile, or no matmul: 1.0.
    """
    if matmul is None or mxu is None:
        return 1.0
    _, k, n = matmul

    def fill(d: int) -> float:
        return d / (math.ceil(d / mxu) * mxu)

    return fill(k) * fill(n)


# --------------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerTime:
    """One layer's roofline: the compute and memory terms; the larger one is its time."""

    name: str
    flops: int
    bytes: int
    compute_s: float
    memory_s: float
    mxu_fill: float = 1.0

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf


@dataclass(frozen=True)
class StepPrediction:
    """The predicted training step of one model on one machine."""

    machine: Machine
    batch: int
    layers: tuple[LayerTime, ...]
    optimizer_s: float
    host_s: float
    steps_per_execution: int
    model_flops: int
    labels: dict[str, str] = field(default_factory=dict)
    input_s: float = 0.0

    @property
    def layers_s(self) -> float:
        return sum(lt.time_s for lt in self.layers)

    @property
    def device_s(self) -> float:
        """Layers + optimizer: what the chip itself spends per step."""
        return self.layers_s + self.optimizer_s

    @property
    def step_s(self) -> float:
        return self.device_s + self.host_s + self.input_s

    @property
    def compute_s(self) -> float:
        """Sum of the compute terms alone (what a compute-only model would predict)."""
        return sum(lt.compute_s for lt in self.layers)

    @property
    def memory_s(self) -> float:
        """Sum of the memory terms alone, optimizer included."""
        return sum(lt.memory_s for lt in self.layers) + self.optimizer_s

    @property
    def images_per_s(self) -> float:
        return self.batch / self.step_s

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation of the predicted step, against the machine's peak."""
        return mfu_mod.mfu(self.model_flops, self.step_s, self.machine.peak_flops)

    @property
    def bound(self) -> str:
        """What dominates the step: 'compute', 'memory' or 'host'."""
        parts = {
            "compute": sum(lt.time_s for lt in self.layers if lt.bound == "compute"),
            "memory": sum(lt.time_s for lt in self.layers if lt.bound == "memory")
            + self.optimizer_s,
            "host": self.host_s,
            "input": self.input_s,
        }
        return max(parts, key=parts.__getitem__)

    def table(self) -> str:
        """Per-layer terms (ms), the bound of each, and the step total."""
        rows = [
            f"{'layer':<14}{'GFLOP':>9}{'MB':>9}{'FLOP/B':>8}{'compute ms':>12}"
            f"{'memory ms':>11}{'MXU fill':>9}  bound"
        ]
        for lt in self.layers:
            rows.append(
                f"{lt.name:<14}{lt.flops / 1e9:>9.3f}{lt.bytes / 1e6:>9.2f}{lt.intensity:>8.1f}"
                f"{lt.compute_s * 1e3:>12.3f}{lt.memory_s * 1e3:>11.3f}{lt.mxu_fill:>9.2f}"
                f"  {lt.bound}"
            )
        rows.append(
            f"{'optimizer':<14}{'':>9}{'':>9}{'':>8}{'':>12}{self.optimizer_s * 1e3:>11.3f}"
        )
        rows.append(
            f"{'host':<14} {sig(self.host_s * 1e3)} ms per step "
            f"(steps_per_execution={self.steps_per_execution})"
            if self.host_s > 0
            else f"{'host':<14} not measured, not included"
        )
        if self.input_s:
            rows.append(f"{'input':<14} {sig(self.input_s * 1e3)} ms per step (host -> device)")
        rows.append(
            f"predicted step {sig(self.step_s * 1e3)} ms = layers {sig(self.layers_s * 1e3)} + "
            f"optimizer {sig(self.optimizer_s * 1e3)}"
            + (f" + host {sig(self.host_s * 1e3)}" if self.host_s > 0 else " (no host term)")
            + (f" + input {sig(self.input_s * 1e3)}" if self.input_s else "")
            + f"; {sig(self.images_per_s)} images/s, MFU {sig(self.mfu * 100)}% "
            f"({self.bound}-bound)"
        )
        return "\n".join(rows)


def predict_step(
    layers: Sequence[LayerCost],
    machine: Machine,
    *,
    batch: int,
    steps_per_execution: int = 1,
    params: int | None = None,
    host_s: float | None = None,
    input_s: float = 0.0,
) -> StepPrediction:
    """Predict one training step of ``layers`` (costed for ``batch`` images) on ``machine``.

    ``params``: parameter count for the optimizer term (default: :func:`parameter_count`).
    ``host_s``: a host overhead *per step* measured directly (e.g. the step time of a model with
    no work fed the same way, at this ``steps_per_execution``); default: the machine's
    ``host_overhead_s`` per call divided by ``steps_per_execution``. ``input_s``: the time per
    step to hand a batch from the host to the device (:func:`input_seconds`).
    """
    if (host_s is not None and host_s < 0) or input_s < 0:
        raise ValueError(f"host_s and input_s must be >= 0, got {host_s!r}, {input_s!r}")
    if batch < 1 or steps_per_execution < 1:
        raise ValueError(
            f"need batch >= 1 and steps_per_execution >= 1, got {batch}, {steps_per_execution}"
        )
    times = []
    for cost in training_costs(layers):
        fill = mxu_efficiency(cost.matmul, machine.mxu)
        times.append(
            LayerTime(
                name=cost.name,
                flops=cost.flops,
                bytes=cost.bytes,
                compute_s=cost.flops / (machine.peak_flops * fill),
                memory_s=cost.bytes / machine.bandwidth,
                mxu_fill=fill,
            )
        )
    n_params = parameter_count(layers) if params is None else params
    return StepPrediction(
        machine=machine,
        batch=batch,
        layers=tuple(times),
        optimizer_s=n_params * ADAM_BYTES_PER_PARAM / machine.bandwidth,
        host_s=(machine.host_overhead_s / steps_per_execution) if host_s is None else host_s,
        steps_per_execution=steps_per_execution,
        model_flops=mfu_mod.training_flops(layers),
        input_s=float(input_s),
    )


def input_seconds(batch: int, bytes_per_image: float, host_to_device_bytes_per_s: float) -> float:
    """The host -> device input term per step: ``batch x bytes per image / bandwidth``.

    ``host_to_device_bytes_per_s`` is a rate measured in this run (how fast this host prepares
    and hands over batches), or a published link rate.
    """
    if batch < 1 or bytes_per_image < 0 or not host_to_device_bytes_per_s > 0:
        raise ValueError(
            f"need batch >= 1, bytes_per_image >= 0, a positive rate; got {batch}, "
            f"{bytes_per_image!r}, {host_to_device_bytes_per_s!r}"
        )
    return batch * bytes_per_image / host_to_device_bytes_per_s


def machine_here(
    *,
    tpu_generation: str | None = None,
    peak_flops: float | None = None,
    bandwidth: float | None = None,
) -> Machine:
    """The machine a run checks the model against: on a TPU its own published figures
    (:data:`PUBLISHED`), elsewhere the peak and bandwidth measured in this run.

    Raises:
        ValueError: a TPU generation without published figures, or neither a generation nor
            both measured figures.
    """
    if tpu_generation is not None:
        key = tpu_generation.lower()
        if key not in PUBLISHED:
            raise ValueError(f"no published roofline figures for TPU {tpu_generation!r}")
        return PUBLISHED[key]
    if peak_flops is None or bandwidth is None:
        raise ValueError("pass tpu_generation=, or peak_flops= and bandwidth= measured here")
    return cpu_machine(peak_flops, bandwidth)


def sig(x: float, digits: int = 2) -> str:
    """``x`` to ``digits`` significant figures, with thousands separators (12,345 -> '12,000')."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    rounded = round(x, digits - 1 - math.floor(math.log10(abs(x))))
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{rounded:,.0f}"
    decimals = digits - 1 - math.floor(math.log10(abs(rounded)))
    return f"{rounded:.{decimals}f}"


@dataclass(frozen=True)
class Band:
    """A prediction as a range: ``low`` to ``high`` (images/s), with where each end comes from."""

    low: float
    high: float
    low_source: str
    high_source: str

    def __post_init__(self) -> None:
        if not 0 < self.low <= self.high:
            raise ValueError(f"need 0 < low <= high, got {self.low!r}, {self.high!r}")

    def text(self, unit: str = "images/s") -> str:
        return f"{sig(self.low)}-{sig(self.high)} {unit}"


@dataclass(frozen=True)
class Calibration:
    """The roofline against a published run: ``ratio`` = published / predicted throughput."""

    ratio: float
    predicted_per_chip: float
    published_per_chip: float
    source: str
    prediction: StepPrediction


def calibration(published: dict | None = None) -> Calibration:
    """Predict the published ResNet-50 run (:data:`PUBLISHED_RESNET50`) and compare.

    A ratio below 1 is what a roofline should give (it is a best case); it becomes the low end
    of every :func:`band`.
    """
    pub = PUBLISHED_RESNET50 if published is None else published
    per_chip = pub["global_batch"] // pub["chips"]
    chip = PUBLISHED[pub["generation"]]
    pred = predict_step(resnet50_costs(per_chip, dtype_bytes=2), chip, batch=per_chip)
    published_per_chip = pub["images"] / pub["seconds"] / pub["chips"]
    return Calibration(
        published_per_chip / pred.images_per_s,
        pred.images_per_s,
        published_per_chip,
        str(pub["source"]),
        pred,
    )


def band(best: StepPrediction, cal: Calibration, *, worst: StepPrediction | None = None) -> Band:
    """``[worst x ratio, best]`` images/s: the roofline's ceiling, and that ceiling scaled by
    the published run's ratio (``worst``: the same prediction with the slow end of the host
    overhead's spread, default ``best``)."""
    low = (worst or best).images_per_s * min(cal.ratio, 1.0)
    return Band(
        low,
        best.images_per_s,
        f"roofline x {sig(cal.ratio)} (published / predicted for {cal.source.split(',')[0]})",
        f"roofline on {best.machine.name}: {best.machine.source}",
    )


def relative_error(predicted: float, measured: float) -> float:
    """``(predicted - measured) / measured``: +0.2 = predicted 20 % too slow/high."""
    if not measured > 0:
        raise ValueError(f"measured must be > 0, got {measured!r}")
    return (predicted - measured) / measured


def diagnose(pred: StepPrediction, measured_step_s: float) -> str:
    """Which term explains a measured step: effective rate against the compute and memory terms.

    Prints the measured step against the predicted compute-only, memory-only and host terms and
    the FLOP/s and bytes/s the measurement implies; the term that has to change most for the
    prediction to meet the measurement is the one to question.
    """
    err = relative_error(pred.step_s, measured_step_s)
    implied_flops = pred.model_flops / max(measured_step_s - pred.host_s, 1e-12)
    lines = [
        f"measured {sig(measured_step_s * 1e3)} ms vs predicted {sig(pred.step_s * 1e3)} ms "
        f"({err:+.0%}): compute terms {sig(pred.compute_s * 1e3)} ms, memory terms "
        f"{sig(pred.memory_s * 1e3)} ms, host {sig(pred.host_s * 1e3)} ms (a step counts each "
        "layer's larger term, not both)",
        f"  the measured step implies {sig(implied_flops / 1e9)} GFLOP/s of model math "
        f"({implied_flops / pred.machine.peak_flops:.0%} of the peak the model assumes)",
    ]
    if abs(err) > 0.3:
        if err < 0:  # measured slower than predicted
            lines.append(
                "  too optimistic: the layers do not reach the matmul peak (small matmuls, "
                "convolution and pooling kernels, framework work), or memory traffic exceeds "
                "the minimum counted"
            )
        else:
            lines.append(
                "  too pessimistic: caches serve part of the traffic faster than the measured "
                "bandwidth, or kernels beat the measured matmul peak (the peak was measured "
                "while the machine was busier)"
            )
    return "\n".join(lines)


def fit_host_overhead(
    steps_per_execution: Sequence[int], step_s: Sequence[float]
) -> tuple[float, float]:
    """Fit ``step_s = per_step + per_call / steps_per_execution`` by least squares.

    Returns ``(per_step_s, per_call_s)``: the part of a step that ``steps_per_execution`` cannot
    remove, and the host overhead per call that it divides. Needs two or more distinct values.
    """
    xs = [1.0 / s for s in steps_per_execution]
    ys = list(step_s)
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("need two or more distinct steps_per_execution values, one time each")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


# --------------------------------------------------------------------------------------------
# Models, costed layer by layer
# --------------------------------------------------------------------------------------------


def _bn_relu(shape: tuple[int, ...], batch: int, dtype_bytes: int, name: str) -> LayerCost:
    # Batch norm in training reads its input twice (statistics, then normalise), writes once;
    # ~5 FLOPs per element (mean/variance accumulation, scale, shift, ReLU).
    return elementwise_cost(
        batch * math.prod(shape), inputs=2, flops_per_element=5, dtype_bytes=dtype_bytes, name=name
    )


def resnet50_costs(batch: int = 1, *, image: int = 224, dtype_bytes: int = 2) -> list[LayerCost]:
    """ResNet-50 v1.5 (stride 2 in the 3x3 conv of each first block), layer by layer.

    Convolutions without bias, each followed by batch norm (+ ReLU) as one element-wise layer
    (XLA fuses them); the shortcut add (+ ReLU) is another. About 4.1 GMAC (8.2 GFLOP) forward
    per 224x224 image, the usual figure.
    """
    kw = {"batch": batch, "dtype_bytes": dtype_bytes, "bias": False}
    layers: list[LayerCost] = []
    stem = conv2d_cost((image, image, 3), 64, 7, stride=2, padding="same", name="stem", **kw)
    layers += [stem, _bn_relu(stem.output_shape[1:], batch, dtype_bytes, "stem_bn")]
    h, w, c = stem.output_shape[1:]
    oh, ow = -(-h // 2), -(-w // 2)  # 3x3 max pool, stride 2, 'same'
    layers.append(
        LayerCost(
            name="stem_pool",
            flops=batch * oh * ow * c * 8,
            bytes=dtype_bytes * batch * (h * w * c + oh * ow * c),
            output_shape=(batch, oh, ow, c),
        )
    )
    shape = (oh, ow, c)
    for stage, (blocks, mid, out, stride) in enumerate(
        ((3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2), (3, 512, 2048, 2)), start=2
    ):
        for b in range(blocks):
            s = stride if b == 0 else 1
            tag = f"s{stage}b{b + 1}"
            a = conv2d_cost(shape, mid, 1, name=f"{tag}_1x1a", **kw)
            layers += [a, _bn_relu(a.output_shape[1:], batch, dtype_bytes, f"{tag}_bn_a")]
            m = conv2d_cost(
                a.output_shape[1:], mid, 3, stride=s, padding="same", name=f"{tag}_3x3", **kw
            )
            layers += [m, _bn_relu(m.output_shape[1:], batch, dtype_bytes, f"{tag}_bn_b")]
            o = conv2d_cost(m.output_shape[1:], out, 1, name=f"{tag}_1x1b", **kw)
            layers += [o, _bn_relu(o.output_shape[1:], batch, dtype_bytes, f"{tag}_bn_c")]
            if b == 0:
                sc = conv2d_cost(shape, out, 1, stride=s, padding="same", name=f"{tag}_proj", **kw)
                layers += [sc, _bn_relu(sc.output_shape[1:], batch, dtype_bytes, f"{tag}_bn_p")]
            n = batch * math.prod(o.output_shape[1:])
            layers.append(
                elementwise_cost(
                    n, inputs=2, flops_per_element=2, dtype_bytes=dtype_bytes, name=f"{tag}_add"
                )
            )
            shape = o.output_shape[1:]
    n = batch * math.prod(shape)
    layers.append(elementwise_cost(n, dtype_bytes=dtype_bytes, name="avg_pool"))
    layers.append(dense_cost(shape[2], 1000, batch=batch, dtype_bytes=dtype_bytes, name="fc"))
    return layers


PUBLISHED_RESNET50 = {
    "images": 90 * 1_281_167,
    "seconds": 17 * 3600.0,
    "chips": 4,
    "generation": "v2",
    "global_batch": 1024,
    "source": (
        "tensorflow/tpu, models/official/resnet/README.md (commit 11a028bf): ResNet-50 on "
        "ImageNet, batch 1024 on a single Cloud TPU (our reading: a v2-8, 4 chips), 90 epochs, "
        "'above 76% accuracy in around 17 hours (including evaluation time every "
        "--steps_per_eval steps)'"
    ),
}
"""A published TPU throughput for a CNN: 90 epochs of ImageNet (1,281,167 images) in ~17 h."""


# --------------------------------------------------------------------------------------------
# The ladder's bar chart
# --------------------------------------------------------------------------------------------


def plot_ladder(
    names: Sequence[str],
    images_per_s: Sequence[float],
    mfu: Sequence[float],
    predicted_images_per_s: Sequence[float],
    predicted_mfu: Sequence[float],
    *,
    machine: str = "this CPU",
    predicted_machine: str = "v5e (predicted)",
    title: str = "Training speed ladder",
):
    """Two panels: images/s and MFU per rung, measured here beside predicted on a TPU (log y)."""
    import matplotlib.pyplot as plt

    n = len(names)
    if not all(len(v) == n for v in (images_per_s, mfu, predicted_images_per_s, predicted_mfu)):
        raise ValueError("every series needs one value per rung")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    xs = range(n)
    width = 0.4
    for ax, here, there, label, fmt in (
        (axes[0], images_per_s, predicted_images_per_s, "images/s", "{:,.0f}"),
        (axes[1], [100 * v for v in mfu], [100 * v for v in predicted_mfu], "MFU (%)", "{:.1f}"),
    ):
        b1 = ax.bar([x - width / 2 for x in xs], here, width, label=f"{machine} (measured)")
        b2 = ax.bar(
            [x + width / 2 for x in xs],
            there,
            width,
            label=predicted_machine,
            hatch="//",
            alpha=0.7,
        )
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_xticks(list(xs), names, rotation=25, ha="right", fontsize=8)
        for bars, values in ((b1, here), (b2, there)):
            for bar, v in zip(bars, values, strict=True):
                ax.annotate(
                    fmt.format(v),
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
        ax.legend(fontsize=8)
    axes[0].set_title("throughput")
    axes[1].set_title("MFU (model FLOPs / step time / peak)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_bands(
    names: Sequence[str],
    measured: Sequence[float],
    measured_spread: Sequence[tuple[float, float]],
    bands: dict[str, Sequence[Band]],
    *,
    machine: str = "this CPU",
    title: str = "What to expect on a TPU, next to what this machine measured",
):
    """Per rung: each chip's predicted range (a floating bar from ``low`` to ``high``) beside the
    rate measured here (a dot at the median, whiskers at the IQR), on one log axis.

    ``bands`` maps a chip's label (e.g. ``"v5e-1 (predicted)"``) to one :class:`Band` per rung.
    """
    import matplotlib.pyplot as plt

    n = len(names)
    if len(measured) != n or len(measured_spread) != n or any(len(b) != n for b in bands.values()):
        raise ValueError("every series needs one value per rung")
    fig, ax = plt.subplots(figsize=(11, 4.6))
    slots = len(bands) + 1
    width = 0.8 / slots
    for i, (label, chip_bands) in enumerate(bands.items()):
        xs = [x - 0.4 + width * (i + 0.5) for x in range(n)]
        ax.bar(
            xs,
            [b.high - b.low for b in chip_bands],
            width * 0.9,
            bottom=[b.low for b in chip_bands],
            label=f"{label}: predicted range",
            alpha=0.6,
        )
        for x, b in zip(xs, chip_bands, strict=True):
            ax.annotate(
                f"{sig(b.low)}-\n{sig(b.high)}", (x, b.high), ha="center", va="bottom", fontsize=6
            )
    xs = [x - 0.4 + width * (slots - 0.5) for x in range(n)]
    lows = [m - lo for m, (lo, _) in zip(measured, measured_spread, strict=True)]
    highs = [hi - m for m, (_, hi) in zip(measured, measured_spread, strict=True)]
    ax.errorbar(
        xs,
        measured,
        yerr=[lows, highs],
        fmt="o",
        color="black",
        capsize=3,
        label=f"{machine}: measured (median, IQR)",
    )
    for x, m in zip(xs, measured, strict=True):
        ax.annotate(
            sig(m), (x, m), textcoords="offset points", xytext=(0, -12), ha="center", fontsize=6
        )
    ax.set_yscale("log")
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom, top * 10)  # a decade of headroom: the legend sits above the bars
    ax.set_ylabel("training images/s (log scale)")
    ax.set_xticks(list(range(n)), names, rotation=20, ha="right", fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title)
    fig.tight_layout()
    return fig
