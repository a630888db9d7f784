"""A roofline step-time model: predict a training step from FLOPs, bytes and host time.

Framework-free (plain arithmetic). Layer by layer::

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
- **Streaming on a TPU**: the batch rows of a matmul (its ``M``) stream through the array
  unpadded, after a fixed cost per weight tile to load, fill and drain it
  (:func:`utils.systolic.matmul_cycles`): a conv's ``M`` (batch x pixels) hides that cost, a
  dense layer's (the batch) may not.
- **Host time per step**: Keras' loop, slicing batches, the call into the step: measured and
  passed in, never assumed. Under asynchronous dispatch the host prepares the next step while
  the device runs this one, so a step costs about the larger of the two; the sum is the bound
  for no overlap at all (:attr:`StepPrediction.serial_s`).
- **Levers** (the course's one predictor of a lever's gain, used by notebooks 07 and 09 and by
  ``speed_check``): each lever maps a predicted step to the step after it (:func:`in_bfloat16`,
  :func:`k_steps_per_call`, :func:`with_host`, :func:`fed_at`; a batch is a new
  :func:`predict_step`); :func:`lever` compares the two in
  images per second and states the arithmetic.

Machines: :data:`PUBLISHED`, one chip of each generation in :data:`utils.mfu.TPU_CHIPS`, or any
:class:`Machine` built from figures measured in the same run. Nothing is fitted to a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from utils import mfu as mfu_mod
from utils.flops import LayerCost
from utils.systolic import matmul_cycles, padding_efficiency

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
    rows: int = 0  # a matmul's M, streamed through the MXU (0: not a matmul)

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


def streamed_share(rows: int, tile: int | None) -> float:
    """The share of a weight tile's MXU cycles that stream ``rows`` (1 without an MXU or a matmul):
    ``rows / matmul_cycles(rows, tile, tile, tile, tile)``, 00's systolic model."""
    if not tile or rows < 1:
        return 1.0
    return rows / matmul_cycles(rows, tile, tile, tile, tile)


def _layer_time(name, flops, nbytes, machine: Machine, kn_fill: float, rows: int) -> LayerTime:
    compute_s = flops / (machine.peak_flops * kn_fill * streamed_share(rows, machine.mxu))
    return LayerTime(name, flops, nbytes, compute_s, nbytes / machine.bandwidth, kn_fill, rows)


def predict_step(
    layers: Sequence[LayerCost], machine: Machine, *, batch: int, host_s: float = 0.0
) -> StepPrediction:
    """Predict one training step of ``layers`` (costed for ``batch`` images) on ``machine``,
    with ``host_s`` of host time per step (measured; 0: not part of the prediction). On a TPU
    (a machine with an MXU) the bytes are padded (:func:`padded_bytes`)."""
    times = []
    for cost in training_costs(layers):
        m, k, n = cost.matmul or (0, 0, 0)
        fill = padding_efficiency(k, n, machine.mxu) if cost.matmul and machine.mxu else 1.0
        moved = padded_bytes(cost) if machine.mxu else cost.bytes
        times.append(_layer_time(cost.name, cost.flops, moved, machine, fill, m))
    optimizer_s = parameter_count(layers) * ADAM_BYTES_PER_PARAM / machine.bandwidth
    flops = mfu_mod.training_flops(layers)
    return StepPrediction(machine, batch, tuple(times), optimizer_s, host_s, flops)


def totals_step(
    flops: float, nbytes: float, machine: Machine, *, batch: int, host_s: float = 0.0
) -> StepPrediction:
    """A step known only by its totals (XLA's cost analysis of a whole training step): one
    "layer" whose matmul rows are the batch (a dense model's M)."""
    layer = _layer_time("step (XLA)", int(flops), int(nbytes), machine, 1.0, batch)
    return StepPrediction(machine, batch, (layer,), 0.0, host_s, int(flops))


@dataclass(frozen=True)
class Lever:
    """One lever's predicted effect: the step before and after it."""

    name: str
    before: StepPrediction
    after: StepPrediction

    @property
    def gain(self) -> float:
        """Images per second after / before."""
        return self.after.images_per_s / self.before.images_per_s

    def arithmetic(self) -> str:
        def step(p: StepPrediction) -> str:
            host, device = sig(p.host_s * 1e3), sig(p.device_s * 1e3)
            return f"{p.batch} images per max(host {host}, device {device}) ms"

        return f"{step(self.before)} -> {step(self.after)}: x{sig(self.gain, 3)}"


def lever(name: str, before: StepPrediction, after: StepPrediction) -> Lever:
    """The predicted gain of going from ``before`` to ``after`` (the one place it is computed)."""
    return Lever(name, before, after)


def in_bfloat16(p: StepPrediction) -> StepPrediction:
    """bf16 activations: every layer moves half its bytes at the same MXU rate (JAX's default
    precision already multiplies float32 in one bf16 pass on a TPU:
    https://docs.jax.dev/en/latest/201/precision.html); the float32 optimizer state stays."""
    halved = tuple(replace(lt, bytes=lt.bytes // 2, memory_s=lt.memory_s / 2) for lt in p.layers)
    return replace(p, layers=halved)


def k_steps_per_call(p: StepPrediction, k: int, per_step_s: float = 0.0) -> StepPrediction:
    """K steps in one device program: the host's cost per call is paid once per K steps
    (``per_step_s`` of it, such as copying each batch, is still paid every step)."""
    return replace(p, host_s=(p.host_s - per_step_s) / k + per_step_s)


def with_host(p: StepPrediction, host_s: float) -> StepPrediction:
    """The same device step with another host part (a lever that changes the host's work)."""
    return replace(p, host_s=host_s)


def fed_at(p: StepPrediction, images_per_s: float) -> StepPrediction:
    """The step when its input delivers ``images_per_s``: the host waits at least a batch's
    delivery per step (an input in worker processes overlaps it with the rest)."""
    return replace(p, host_s=max(p.host_s, p.batch / images_per_s))
