"""A roofline step-time model: predict a training step from FLOPs, bytes and host overhead.

Framework-free (plain arithmetic; matplotlib only inside :func:`plot_bands`). Layer by layer::

    layer time = max(FLOPs / (peak x MXU fill),  bytes moved / memory bandwidth)
    step time  = sum of layer times + optimizer update + host overhead / steps_per_execution

- **FLOPs and bytes** follow :func:`utils.mfu.training_passes` (forward + backward: a layer with
  weights 3x its forward work, the first layer 2x, a layer without weights 2x), at the compute
  dtype of the :class:`utils.flops.LayerCost` list. The optimizer (Adam) reads weights,
  gradients and two moments and writes weights and two moments in float32: 7 x 4 bytes per
  parameter.
- **MXU fill**: a TPU's matrix unit multiplies ``t x t`` tiles (128 up to v5p, 256 on v6e), so a
  matmul's ``K`` and ``N`` are padded to whole tiles (:func:`utils.systolic.padding_efficiency`).
- **Host overhead**: the host's time per call into the device program, measured, never assumed.

Machines: :data:`PUBLISHED` (one chip of each generation in :data:`utils.mfu.TPU_CHIPS`) and
:func:`cpu_machine` (figures measured in the same run). A TPU prediction is a prediction; a
:class:`Band` scales its low end by the ratio a published ResNet-50 run fell short of the same
model (:func:`calibration`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from utils import mfu as mfu_mod
from utils.flops import LayerCost, conv2d_cost, dense_cost, elementwise_cost
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
    """One chip (or CPU): ``peak_flops`` at the compute dtype, ``bandwidth`` in bytes/s,
    ``host_overhead_s`` per call (0: not measured) with its (q1, q3) ``host_overhead_spread``,
    ``mxu`` the matrix unit's tile edge (None: no tile), ``source`` where the figures come from."""

    name: str
    peak_flops: float
    bandwidth: float
    host_overhead_s: float = 0.0
    mxu: int | None = None
    source: str = ""
    host_overhead_spread: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not (self.peak_flops > 0 and self.bandwidth > 0 and (self.mxu or 1) >= 1):
            raise ValueError(f"machine {self.name!r}: need peak_flops, bandwidth and mxu > 0")
        lo, hi = self.host_overhead_spread or (0, 0)
        if not (self.host_overhead_s >= 0 and 0 <= lo <= hi):
            raise ValueError(f"machine {self.name!r}: need host overhead >= 0 and q1 <= q3")

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) above which a layer is compute-bound."""
        return self.peak_flops / self.bandwidth

    def with_host_overhead(
        self, seconds: float, spread: tuple[float, float] | None = None
    ) -> Machine:
        """The same chip with a measured host overhead per call and its (q1, q3) in seconds."""
        return replace(self, host_overhead_s=float(seconds), host_overhead_spread=spread)

    def describe(self) -> str:
        host = "host overhead not measured (not part of these figures)"
        if self.host_overhead_s > 0:
            host = f"host overhead {sig(self.host_overhead_s * 1e3)} ms per call"
            if self.host_overhead_spread:
                lo, hi = self.host_overhead_spread
                host += f" (IQR {sig(lo * 1e3)}-{sig(hi * 1e3)} ms)"
        return (
            f"{self.name}: {self.peak_flops / 1e12:,.3g} TFLOP/s, {self.bandwidth / 1e9:,.4g} GB/s"
            f" (ridge {self.ridge:,.0f} FLOP/byte), {host}"
            + (f", MXU {self.mxu}x{self.mxu}" if self.mxu else "")
        )


_ARCHITECTURE = "https://cloud.google.com/tpu/docs/system-architecture-tpu-vm"
_JAX_TABLE = "JAX's jax/_src/pallas/mosaic/tpu_info.py (https://github.com/jax-ml/jax)"
PUBLISHED: dict[str, Machine] = {
    g: Machine(
        f"TPU {g} (1 chip, bf16)",
        tflops * 1e12,
        bandwidth,
        mxu=mxu,
        source=(_JAX_TABLE if g == "v2" else f"https://cloud.google.com/tpu/docs/{g}")
        + f"; MXU: {_ARCHITECTURE}",
    )
    for g, (tflops, bandwidth, mxu) in mfu_mod.TPU_CHIPS.items()
}
"""One chip of each TPU generation, from :data:`utils.mfu.TPU_CHIPS`, with its public source."""


def cpu_machine(
    peak_flops: float, bandwidth: float, *, name: str = "this CPU (measured in this run)"
) -> Machine:
    """This machine, from its matmul rate and copy bandwidth measured *in the same run*."""
    return Machine(name, float(peak_flops), float(bandwidth), source="measured in this run")


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
    steps_per_execution: int
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
        return self.device_s + self.host_s

    @property
    def images_per_s(self) -> float:
        return self.batch / self.step_s

    @property
    def bound(self) -> str:
        """What dominates the step: 'compute', 'memory' or 'host'."""
        compute = sum(lt.time_s for lt in self.layers if lt.bound == "compute")
        parts = {"compute": compute, "memory": self.device_s - compute, "host": self.host_s}
        return max(parts, key=parts.__getitem__)

    def table(self) -> str:
        """Per-layer terms (ms), the bound of each, and the step total."""
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
            f"predicted step {sig(self.step_s * 1e3)} ms = layers {sig(self.layers_s * 1e3)} + "
            f"optimizer {sig(self.optimizer_s * 1e3)} ms, {host} (steps_per_execution="
            f"{self.steps_per_execution}); {sig(self.images_per_s)} images/s, MFU "
            f"{sig(mfu * 100)}% ({self.bound}-bound)"
        )
        return "\n".join(rows)


def predict_step(
    layers: Sequence[LayerCost],
    machine: Machine,
    *,
    batch: int,
    steps_per_execution: int = 1,
    host_s: float | None = None,
) -> StepPrediction:
    """Predict one training step of ``layers`` (costed for ``batch`` images) on ``machine``.

    ``host_s``: host time per step (default: the machine's overhead / ``steps_per_execution``).
    """
    times = []
    for cost in training_costs(layers):
        _, k, n = cost.matmul or (0, 0, 0)
        fill = padding_efficiency(k, n, machine.mxu) if cost.matmul and machine.mxu else 1.0
        compute_s = cost.flops / (machine.peak_flops * fill)
        times.append(
            LayerTime(
                cost.name, cost.flops, cost.bytes, compute_s, cost.bytes / machine.bandwidth, fill
            )
        )
    optimizer_s = parameter_count(layers) * ADAM_BYTES_PER_PARAM / machine.bandwidth
    if host_s is None:
        host_s = machine.host_overhead_s / steps_per_execution
    flops = mfu_mod.training_flops(layers)
    return StepPrediction(
        machine, batch, tuple(times), optimizer_s, host_s, steps_per_execution, flops
    )


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
    """The roofline against a published run: ``ratio`` = published / predicted throughput."""

    ratio: float
    predicted_per_chip: float
    published_per_chip: float
    source: str
    prediction: StepPrediction


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


def calibration(published: dict | None = None) -> Calibration:
    """Predict the published ResNet-50 run (:data:`PUBLISHED_RESNET50`) and compare.

    A ratio below 1 is what a roofline should give (it is a best case); it becomes the low end
    of every :func:`band`.
    """
    pub = published or PUBLISHED_RESNET50
    per_chip = pub["global_batch"] // pub["chips"]
    pred = predict_step(resnet50_costs(per_chip), PUBLISHED[pub["generation"]], batch=per_chip)
    published_per_chip = pub["images"] / pub["seconds"] / pub["chips"]
    ratio = published_per_chip / pred.images_per_s
    return Calibration(ratio, pred.images_per_s, published_per_chip, str(pub["source"]), pred)


def band(best: StepPrediction, cal: Calibration, *, worst: StepPrediction | None = None) -> Band:
    """``[worst x ratio, best]`` images/s: the roofline's ceiling, and that ceiling scaled by
    the published run's ratio (``worst``: the same prediction with the slow end of the host
    overhead's spread, default ``best``)."""
    return Band(
        (worst or best).images_per_s * min(cal.ratio, 1.0),
        best.images_per_s,
        f"roofline x {sig(cal.ratio)} (published / predicted for {cal.source.split(',')[0]})",
        f"roofline on {best.machine.name}: {best.machine.source}",
    )


def resnet50_costs(batch: int = 1, *, image: int = 224, dtype_bytes: int = 2) -> list[LayerCost]:
    """ResNet-50 v1.5 (stride 2 in the 3x3 conv of each first block), layer by layer.

    Convolutions without bias, each followed by batch norm + ReLU as one element-wise layer
    (XLA fuses them: reads twice, writes once, ~5 FLOPs per element); the shortcut add (+ ReLU)
    is another. About 4.1 GMAC (8.2 GFLOP) forward per 224x224 image, the usual figure.
    """
    layers: list[LayerCost] = []

    def add(n: int, flops: int, name: str, inputs: int = 2) -> None:  # an element-wise layer
        layers.append(
            elementwise_cost(
                n, inputs=inputs, flops_per_element=flops, name=name, dtype_bytes=dtype_bytes
            )
        )

    def conv(shape, filters, size, stride, name):  # a conv, then its batch norm + ReLU
        c = conv2d_cost(
            shape,
            filters,
            size,
            batch=batch,
            stride=stride,
            padding="same",
            bias=False,
            name=name,
            dtype_bytes=dtype_bytes,
        )
        layers.append(c)
        add(math.prod(c.output_shape), 5, f"{name}_bn")
        return c.output_shape[1:]

    h, w, c = conv((image, image, 3), 64, 7, 2, "stem")
    shape = (-(-h // 2), -(-w // 2), c)  # 3x3 max pool, stride 2, 'same': 8 comparisons per output
    pool_bytes = dtype_bytes * batch * (h * w * c + math.prod(shape))
    layers.append(LayerCost("stem_pool", batch * math.prod(shape) * 8, pool_bytes, (batch, *shape)))
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
    layers.append(dense_cost(shape[2], 1000, batch=batch, dtype_bytes=dtype_bytes, name="fc"))
    return layers


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
    width = 0.8 / (len(bands) + 1)
    for i, (label, chip_bands) in enumerate(bands.items()):
        xs = [x - 0.4 + width * (i + 0.5) for x in range(n)]
        lows, highs = [b.low for b in chip_bands], [b.high for b in chip_bands]
        spans = [hi - lo for lo, hi in zip(lows, highs, strict=True)]
        ax.bar(xs, spans, width * 0.9, bottom=lows, label=f"{label}: predicted range", alpha=0.6)
        for x, lo, hi in zip(xs, lows, highs, strict=True):
            ax.annotate(f"{sig(lo)}-\n{sig(hi)}", (x, hi), ha="center", va="bottom", fontsize=6)
    xs = [x + 0.4 - width / 2 for x in range(n)]  # the last slot: this machine's measurement
    yerr = [[m - lo for m, (lo, _) in zip(measured, measured_spread, strict=True)]]
    yerr.append([hi - m for m, (_, hi) in zip(measured, measured_spread, strict=True)])
    label = f"{machine}: measured (median, IQR)"
    ax.errorbar(xs, measured, yerr=yerr, fmt="o", color="black", capsize=3, label=label)
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
    ax.set_title(title)
    fig.tight_layout()
    return fig
