"""A roofline step-time model: predict a training step from FLOPs, bytes and host time.

Framework-free (plain arithmetic; matplotlib only inside :func:`plot_bands`). Layer by layer::

    layer time  = max(FLOPs / (peak x MXU fill),  padded bytes / memory bandwidth)
    device time = sum of layer times + optimizer update
    step time   = max(host time, device time)    (no-overlap bound: host + device)

- **FLOPs and bytes** follow :func:`utils.mfu.training_passes` (forward + backward: a layer with
  weights 3x its forward work, the first layer 2x, a layer without weights 2x), at the compute
  dtype of the :class:`utils.flops.LayerCost` list. The optimizer (Adam) reads weights,
  gradients and two moments and writes weights and two moments in float32: 7 x 4 bytes per
  parameter.
- **Padding on a TPU**: a TPU keeps the last two dimensions of a tensor in (8, 128) tiles, so a
  tensor of 3 channels moves as much memory as one of 128 (:func:`tile_padded`); and its matrix
  unit multiplies ``t x t`` tiles (128 up to v5p, 256 on v6e), so a matmul's ``K`` and ``N`` are
  padded to whole tiles (:func:`utils.systolic.padding_efficiency`).
- **Host time per step**: Keras' loop, slicing batches, the call into the step: measured and
  passed in, never assumed. Under asynchronous dispatch the host prepares the next step while
  the device runs this one, so a step costs about the larger of the two; the sum is the bound
  for no overlap at all. A :class:`Band` spans the two.

Machines: :data:`PUBLISHED` (one chip of each generation in :data:`utils.mfu.TPU_CHIPS`) and
:func:`cpu_machine` (figures measured in the same run). The model's error is a ratio, measured
or published throughput over predicted: against this machine (:func:`against`) and against a
published run (:func:`calibration`); nothing is fitted to either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from utils import mfu as mfu_mod
from utils.flops import LayerCost, conv2d_cost, dense_cost, elementwise_cost, maxpool2d_cost
from utils.systolic import padding_efficiency

ADAM_BYTES_PER_PARAM = 7 * 4
"""Adam's update traffic per parameter: read weight, gradient, m, v; write weight, m, v (fp32)."""


def sig(x: float, digits: int = 2) -> str:
    """``x`` to ``digits`` significant figures, with thousands separators (12,345 -> '12,000')."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    rounded = round(x, digits - 1 - math.floor(math.log10(abs(x))))
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{rounded:,.0f}"
    return f"{rounded:.{digits - 1 - math.floor(math.log10(abs(rounded)))}f}"


@dataclass(frozen=True)
class Machine:
    """One chip (or CPU): ``peak_flops`` at the compute dtype, ``bandwidth`` in bytes/s, ``mxu``
    the matrix unit's tile edge (None: no tile), ``source`` where the figures come from."""

    name: str
    peak_flops: float
    bandwidth: float
    mxu: int | None = None
    source: str = ""

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) above which a layer is compute-bound."""
        return self.peak_flops / self.bandwidth

    def describe(self) -> str:
        return (
            f"{self.name}: {self.peak_flops / 1e12:,.3g} TFLOP/s, {self.bandwidth / 1e9:,.4g} GB/s"
            f" (ridge {self.ridge:,.0f} FLOP/byte)"
            + (f", MXU {self.mxu}x{self.mxu}" if self.mxu else "")
        )


_ARCHITECTURE = "https://cloud.google.com/tpu/docs/system-architecture-tpu-vm"
_JAX_TABLE = "JAX's jax/_src/pallas/mosaic/tpu_info.py (https://github.com/jax-ml/jax)"


def _tpu(generation: str) -> Machine:
    tflops, bandwidth, mxu = mfu_mod.TPU_CHIPS[generation]
    where = _JAX_TABLE if generation == "v2" else f"https://cloud.google.com/tpu/docs/{generation}"
    name = f"TPU {generation} (1 chip, bf16)"
    return Machine(name, tflops * 1e12, bandwidth, mxu, f"{where}; MXU: {_ARCHITECTURE}")


PUBLISHED: dict[str, Machine] = {g: _tpu(g) for g in mfu_mod.TPU_CHIPS}
"""One chip of each TPU generation, from :data:`utils.mfu.TPU_CHIPS`, with its public source."""


TPU_TILE = (8, 128)
"""The (sublane, lane) tile in which a TPU keeps the last two dimensions of a tensor."""


def tile_padded(shape: Sequence[int], tile: tuple[int, int] = TPU_TILE) -> int:
    """Elements of a tensor of ``shape`` once its last two dimensions are padded to ``tile``.

    A 1-D tensor (a flattened element-wise layer here) is padded to whole tiles of 8 x 128.
    """
    rows, lanes = tile
    if len(shape) < 2:
        n = math.prod(shape)
        return -(-n // (rows * lanes)) * rows * lanes
    *lead, r, c = shape
    return math.prod(lead) * (-(-r // rows) * rows) * (-(-c // lanes) * lanes)


def padded_bytes(cost: LayerCost, tile: tuple[int, int] = TPU_TILE) -> int:
    """``cost.bytes`` scaled by the padding of the tensors the cost names (its output and, for a
    matmul, its ``(K, N)`` weights); a layer's input was the layer before's output."""
    tensors = [cost.output_shape] + ([cost.matmul[1:]] if cost.matmul else [])
    plain = sum(math.prod(t) for t in tensors)
    return round(cost.bytes * sum(tile_padded(t, tile) for t in tensors) / plain)


def cpu_machine(peak_flops: float, bandwidth: float) -> Machine:
    """This machine, from its matmul rate and copy bandwidth measured *in the same run*."""
    return Machine("this CPU", float(peak_flops), float(bandwidth), source="measured in this run")


def training_costs(layers: Sequence[LayerCost]) -> list[LayerCost]:
    """Each layer's forward + backward FLOPs and bytes (:func:`utils.mfu.training_passes`)."""
    out = []
    for i, layer in enumerate(layers):
        passes = mfu_mod.training_passes(i, layer)
        out.append(replace(layer, flops=layer.flops * passes, bytes=layer.bytes * passes))
    return out


def parameter_count(layers: Sequence[LayerCost], *, bias: bool = True) -> int:
    """Weights of the matmul layers: ``K x N`` (+ ``N`` biases) each."""
    shapes = [layer.matmul for layer in layers if layer.matmul is not None]
    return sum(k * n + (n if bias else 0) for _, k, n in shapes)


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
    model_flops: int

    @property
    def layers_s(self) -> float:
        return sum(lt.time_s for lt in self.layers)

    @property
    def device_s(self) -> float:
        """Layers + optimizer: what the chip itself spends per step."""
        return self.layers_s + self.optimizer_s

    @property
    def step_s(self) -> float:
        """The predicted step: host and device overlap, so the larger of the two."""
        return max(self.host_s, self.device_s)

    @property
    def serial_s(self) -> float:
        """The no-overlap bound: host time + device time."""
        return self.host_s + self.device_s

    @property
    def images_per_s(self) -> float:
        return self.batch / self.step_s

    @property
    def bound(self) -> str:
        """What dominates the step: 'compute', 'memory' or 'host'."""
        if self.host_s > self.device_s:
            return "host"
        compute = sum(lt.time_s for lt in self.layers if lt.bound == "compute")
        return "compute" if compute >= self.device_s - compute else "memory"

    def table(self) -> str:
        """Per-layer terms (ms), the bound of each, and the step."""
        rows = [f"{'layer':<14}{'GFLOP':>9}{'MB':>9}{'FLOP/B':>8}{'compute ms':>12}"]
        rows[0] += f"{'memory ms':>11}{'MXU fill':>9}  bound"
        for lt in self.layers:
            rows.append(
                f"{lt.name:<14}{lt.flops / 1e9:>9.3f}{lt.bytes / 1e6:>9.2f}{lt.intensity:>8.1f}"
                f"{lt.compute_s * 1e3:>12.3f}{lt.memory_s * 1e3:>11.3f}{lt.mxu_fill:>9.2f}"
                f"  {lt.bound}"
            )
        rows.append(f"{'optimizer':<52}{self.optimizer_s * 1e3:>11.3f}")
        host = f"host {sig(self.host_s * 1e3)} ms" if self.host_s > 0 else "host not measured"
        mfu = mfu_mod.mfu(self.model_flops, self.step_s, self.machine.peak_flops)
        rows.append(
            f"predicted step {sig(self.step_s * 1e3)} ms = max(device {sig(self.device_s * 1e3)}"
            f" ms (layers + optimizer), {host}); no overlap: {sig(self.serial_s * 1e3)} ms; "
            f"{sig(self.images_per_s)} images/s, MFU {sig(mfu * 100)}% ({self.bound}-bound)"
        )
        if self.machine.mxu:
            rows.append("MB: bytes moved with the last two dims of each tensor padded to (8, 128)")
        return "\n".join(rows)


def predict_step(
    layers: Sequence[LayerCost], machine: Machine, *, batch: int, host_s: float = 0.0
) -> StepPrediction:
    """Predict one training step of ``layers`` (costed for ``batch`` images) on ``machine``,
    with ``host_s`` of host time per step (measured; 0: not part of the prediction). On a TPU
    (a machine with an MXU) the bytes are padded (:func:`padded_bytes`)."""
    times = []
    for cost in training_costs(layers):
        _, k, n = cost.matmul or (0, 0, 0)
        fill = padding_efficiency(k, n, machine.mxu) if cost.matmul and machine.mxu else 1.0
        moved = padded_bytes(cost) if machine.mxu else cost.bytes
        compute_s = cost.flops / (machine.peak_flops * fill)
        times.append(
            LayerTime(cost.name, cost.flops, moved, compute_s, moved / machine.bandwidth, fill)
        )
    optimizer_s = parameter_count(layers) * ADAM_BYTES_PER_PARAM / machine.bandwidth
    flops = mfu_mod.training_flops(layers)
    return StepPrediction(machine, batch, tuple(times), optimizer_s, host_s, flops)


@dataclass(frozen=True)
class Band:
    """A prediction as a range: ``low`` to ``high`` (images/s), with where each end comes from."""

    low: float
    high: float
    low_source: str
    high_source: str

    def text(self, unit: str = "images/s") -> str:
        return f"{sig(self.low)}-{sig(self.high)} {unit}"


@dataclass(frozen=True)
class Calibration:
    """The roofline against a real run: ``ratio`` = measured (or published) / predicted
    throughput; below 1 the model was optimistic."""

    ratio: float
    predicted_per_chip: float
    published_per_chip: float
    source: str
    prediction: StepPrediction

    def text(self) -> str:
        """The model's error in one line."""
        return (
            f"{self.source.split(',')[0]}: {sig(self.published_per_chip)} images/s per chip "
            f"against {sig(self.predicted_per_chip)} predicted, ratio {sig(self.ratio)}"
        )


RESNET50_SOURCE = (
    "tensorflow/tpu, models/official/resnet/README.md (commit 11a028bf): ResNet-50 on "
    "ImageNet, batch 1024 on a single Cloud TPU (our reading: a v2-8, 4 chips), 90 epochs, "
    "'above 76% accuracy in around 17 hours (including evaluation time every "
    "--steps_per_eval steps)'"
)


def against(pred: StepPrediction, measured_per_chip: float, source: str) -> Calibration:
    """The prediction ``pred`` against a run that reached ``measured_per_chip`` images/s."""
    return Calibration(
        measured_per_chip / pred.images_per_s, pred.images_per_s, measured_per_chip, source, pred
    )


def calibration() -> Calibration:
    """Predict a published TPU run of a CNN (:data:`RESNET50_SOURCE`: 90 epochs of ImageNet,
    1,281,167 images, in ~17 h on 4 v2 chips at batch 1024) and compare (:func:`against`).

    A ratio below 1 is what a roofline should give (it is a best case, and the published time
    includes evaluation and input); it is reported, never used to scale a prediction.
    """
    per_chip = 1024 // 4
    pred = predict_step(resnet50_costs(per_chip), PUBLISHED["v2"], batch=per_chip)
    return against(pred, 90 * 1_281_167 / (17 * 3600.0) / 4, RESNET50_SOURCE)


def band(
    best: StepPrediction, cal: Calibration | None = None, *, worst: StepPrediction | None = None
) -> Band:
    """From the no-overlap bound (host + device, with ``worst``'s host time, default ``best``'s)
    to the overlapped step (``max(host, device)``) of ``best``, in images/s. ``cal``, when
    given, is named in the low end's source (its ratio is not applied)."""
    slow = worst or best
    seen = f"; the model against {cal.text()}" if cal is not None else ""
    return Band(
        slow.batch / slow.serial_s,
        best.images_per_s,
        f"no overlap: host + device time{seen}",
        f"roofline on {best.machine.name}: {best.machine.source}",
    )


def resnet50_costs(batch: int = 1, *, image: int = 224, dtype_bytes: int = 2) -> list[LayerCost]:
    """ResNet-50 v1.5 (stride 2 in the 3x3 conv of each first block), layer by layer.

    Convolutions without bias, each followed by batch norm + ReLU as one element-wise layer
    (XLA fuses them: reads twice, writes once, ~5 FLOPs per element); the shortcut add (+ ReLU)
    is another. About 4.1 GMAC (8.2 GFLOP) forward per 224x224 image, the usual figure.
    """
    kw = {"batch": batch, "dtype_bytes": dtype_bytes}
    layers: list[LayerCost] = []

    def add(n: int, flops: int, name: str, inputs: int = 2) -> None:  # an element-wise layer
        ew = {"inputs": inputs, "flops_per_element": flops, "dtype_bytes": dtype_bytes}
        layers.append(elementwise_cost(n, name=name, **ew))

    def conv(shape, filters, size, stride, name):  # a conv, then its batch norm + ReLU
        c = conv2d_cost(shape, filters, size, stride=stride, padding="same", bias=False, **kw)
        layers.append(replace(c, name=name))
        add(math.prod(c.output_shape), 5, f"{name}_bn")
        return c.output_shape[1:]

    layers.append(maxpool2d_cost(conv((image, image, 3), 64, 7, 2, "stem"), 2, **kw, name="pool"))
    shape = layers[-1].output_shape[1:]  # 3x3/2 'same' in the model; 2x2/2 moves the same bytes
    for stage, (blocks, mid, out, stride) in enumerate(
        ((3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2), (3, 512, 2048, 2)), start=2
    ):
        for b in range(blocks):
            s, tag = (stride if b == 0 else 1), f"s{stage}b{b + 1}"
            if b == 0:
                conv(shape, out, 1, s, f"{tag}_proj")
            inner = conv(conv(shape, mid, 1, 1, f"{tag}_1x1a"), mid, 3, s, f"{tag}_3x3")
            shape = conv(inner, out, 1, 1, f"{tag}_1x1b")
            add(batch * math.prod(shape), 2, f"{tag}_add")
    add(batch * math.prod(shape), 1, "avg_pool", inputs=1)
    layers.append(dense_cost(shape[2], 1000, name="fc", **kw))
    return layers


def plot_bands(
    names: Sequence[str],
    measured: Sequence[float],
    measured_spread: Sequence[tuple[float, float]],
    bands: dict[str, Sequence[Band]],
    *,
    machine: str = "this CPU",
):
    """Per rung: each chip's predicted range (a floating bar from ``low`` to ``high``) beside the
    rate measured here (a dot at the median, whiskers at the IQR), on one log axis.

    ``bands`` maps a chip's label (e.g. ``"v5e-1 (predicted)"``) to one :class:`Band` per rung.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(names)
    fig, ax = plt.subplots(figsize=(11, 4.6))
    width = 0.8 / (len(bands) + 1)
    for i, (label, chip_bands) in enumerate(bands.items()):
        xs = [x - 0.4 + width * (i + 0.5) for x in range(n)]
        lows, highs = [b.low for b in chip_bands], [b.high for b in chip_bands]
        spans = [hi - lo for lo, hi in zip(lows, highs, strict=True)]
        ax.bar(xs, spans, width * 0.9, bottom=lows, label=f"{label}: predicted range", alpha=0.6)
        for x, lo, hi in zip(xs, lows, highs, strict=True):
            ax.annotate(f"{sig(lo)}-\n{sig(hi)}", (x, hi), ha="center", va="bottom", fontsize=6)
    xs = [x + 0.4 - width / 2 for x in range(n)]  # the last slot: this machine's measurement
    (lo, hi), m = np.transpose(measured_spread), np.asarray(measured)
    label = f"{machine}: measured (median, IQR)"
    ax.errorbar(xs, m, yerr=[m - lo, hi - m], fmt="o", color="black", capsize=3, label=label)
    for x, m in zip(xs, measured, strict=True):
        ax.annotate(
            sig(m), (x, m), xytext=(0, -12), textcoords="offset points", ha="center", fontsize=6
        )
    ax.set_yscale("log")
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom, top * 10)  # a decade of headroom: the legend sits above the bars
    ax.set_ylabel("training images/s (log scale)")
    ax.set_xticks(list(range(n)), names, rotation=20, ha="right", fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("What to expect on a TPU, next to what this machine measured")
    fig.tight_layout()
    return fig
