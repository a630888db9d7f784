"""``speed_check(model, data)``: a few short, measured probes of a learner's compiled Keras 3
model on the JAX backend, and a ranked to-do list with the gain each fix is predicted to give
on one TPU v5e chip. Importing this loads Keras (and JAX): set ``KERAS_BACKEND=jax`` first.

It lives in ``utils.jax`` because it reads JAX's compile log (``utils.jax.compiles``) and XLA's
cost analysis (``utils.keras`` may not import ``utils.jax``). Six probes, measured here:

1. ``recompiles``: ``fit`` on a few batches (the last, ragged one included when it can be seen)
   after a one-batch warm-up; every ``train_step`` compilation logged then is a recompilation
   (a last batch that ``fit`` cannot split over the devices is reported, not raised).
2. ``batch``: batch per chip against the MXU's cost per weight tile (``utils.systolic``'s model:
   the batch, M, streams through unpadded; loading, filling and draining the array is a fixed
   cost that a larger M amortises); its gain is the whole v5e step's, from XLA's counts at the
   batch and at twice it (what grows per sample; the weights' bytes do not), the host's loop
   plus copying the added samples (at the rate measured here), or the MXU share's alone where
   there is no cost analysis.
3. ``dtype``: the model's dtype policy; float32 activations move twice the bytes of bf16 (a
   float32 matmul already runs on the MXU in one bf16 pass under JAX's default precision), worth
   only what the host's part of a v5e step leaves to gain.
4. ``dispatch``: ``fit``'s host loop per step (batch-begin instants, asynchronous dispatch)
   against the predicted v5e step's math (this machine's compiled step is printed beside it):
   the chip idles ``1 - device / host`` of a step when the host is slower; and the device
   programs per execution, counted (up to Keras 3.15 the JAX trainer runs
   ``steps_per_execution=K`` as K programs, not one scanned program).
5. ``input``: the input alone (a few batches drawn, timed) against what the predicted v5e step
   consumes (this machine's step is printed beside it); in-memory arrays are not measured.
6. ``mfu``: XLA's FLOP and byte counts of the step (per device: times the devices), MFU against
   the ceiling ``utils.mfu.choose_peaks`` gives (a TPU's published peak; elsewhere the best
   matmul rate measured next to the step, float32 or bfloat16; above 100 % raises) and the v5e
   verdict: compute- or memory-bound.

The v5e step is predicted from the step's FLOPs and bytes and the v5e's published figures
(``utils.roofline.totals_step``), overlapped with the host loop measured here; each gain comes
from the course's one predictor (``utils.roofline.lever``), its arithmetic on its line, and
problems are ranked by the upper end. The model's
variables are restored afterwards; an iterator's first batches are consumed. Runs in seconds
for a small model on a CPU.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import keras
import numpy as np

from utils import mfu as mfu_mod
from utils import roofline, systolic
from utils.bench import time_fn
from utils.jax.compiles import CompileLog
from utils.jax.peak import matmul
from utils.keras import timing
from utils.roofline import PUBLISHED

__all__ = [
    "Finding",
    "Measured",
    "findings_of",
    "mxu_share",
    "rank",
    "report",
    "speed_check",
    "v5e_step",
    "v5e_step_at",
]

V5E = PUBLISHED["v5e"]
TILE = mfu_mod.TPU_CHIPS["v5e"][2]  # the v5e's MXU edge
IDLE_LIMIT = 0.25  # the device waiting this share of a step (or more) on the host: a problem
FAILED = "fit() failed"
SCAN_STEPS = 32  # steps in one scanned program, for the predicted dispatch gain
STATUSES = ("problem", "ok", "info", "not measured")
_TPU_KINDS = (("v5 lite", "v5e"), ("v5e", "v5e"), ("v6", "v6e"), ("v5", "v5p"), ("v4", "v4"))
_TPU_KINDS += (("v3", "v3"), ("v2", "v2"), ("7x", "tpu7x"))  # jax's device_kind -> generation


@dataclass(frozen=True)
class Finding:
    """One probe's verdict; ``gain`` is the predicted v5e speed-up ``(low, high)``."""

    probe: str
    status: str
    evidence: str
    problem: str = ""
    fix: str = ""
    gain: tuple[float, float] = (1.0, 1.0)
    arithmetic: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES or not 0 < self.gain[0] <= self.gain[1]:
            raise ValueError(f"bad finding: status {self.status!r}, gain {self.gain!r}")


@dataclass(frozen=True)
class Measured:
    """Everything the probes measured (seconds, FLOPs, bytes); ``None``: not measured."""

    platform: str
    devices: int
    batch: int
    policy: str
    data_kind: str
    samples: int | None
    recompiles: tuple[str, ...]
    probe_s: float
    probe_steps: int
    last_seen: bool
    t_step: float
    t_host: float
    t_dev: float
    spe: int
    programs: float
    input_s: tuple[float, ...] | None
    flops: float | None
    bytes: float | None
    ceiling: float | None
    per_sample: tuple[float, float] | None = None  # FLOPs, bytes each extra sample adds per device
    copy_per_sample_s: float = 0.0  # the host copying one sample's arrays (measured here)


def mxu_share(batch: int, tile: int = TILE) -> float:
    """The share of a weight tile's MXU cycles that stream ``batch`` rows, by the course's one MXU
    model (``utils.systolic.matmul_cycles``: load the tile, then stream M rows plus the fill and
    drain; M is not padded). It grows with the batch towards 1."""
    if batch < 1 or tile < 1:
        raise ValueError(f"need batch >= 1 and tile >= 1, got {batch}, {tile}")
    return batch / systolic.matmul_cycles(batch, tile, tile, tile, tile)


def mxu_overhead(tile: int = TILE) -> int:
    """Cycles per weight tile that are not streaming: loading, filling and draining the array."""
    return systolic.matmul_cycles(1, tile, tile, tile, tile) - 1


def rank(findings: Sequence[Finding]) -> list[Finding]:
    """Problems first, largest predicted gain (upper end, then lower) first; then the rest."""
    order = {s: i for i, s in enumerate(STATUSES)}
    return sorted(findings, key=lambda f: (order[f.status], -f.gain[1], -f.gain[0]))


def gain_text(gain: tuple[float, float]) -> str:
    lo, hi = gain
    if math.isinf(lo):
        return "the run cannot finish without the fix"
    return f"up to x{hi:.3g}" if lo < 1.01 or hi / lo < 1.05 else f"x{lo:.3g}-{hi:.3g}"


def report(findings: Sequence[Finding]) -> str:
    """The numbered to-do list, then the probes that passed, informed or could not measure."""
    ranked = rank(findings)
    todo = [f for f in ranked if f.status == "problem"]
    lines = ["To do, largest predicted TPU v5e gain first:" if todo else "To do: nothing found."]
    for i, f in enumerate(todo, 1):
        lines += [f"{i:>2}. {f.problem}", f"    evidence: {f.evidence}", f"    fix: {f.fix}"]
        lines.append(f"    predicted v5e gain: {gain_text(f.gain)} ({f.arithmetic})")
    heads = {"ok": "No problem found", "info": "Info", "not measured": "Could not measure"}
    for f in ranked[len(todo) :]:
        lines.append(f"{heads[f.status]} - {f.probe}: {f.evidence}")
    return "\n".join(lines)


def v5e_step(m: Measured) -> roofline.StepPrediction | None:
    """The predicted v5e step per chip: XLA's FLOPs and bytes on the v5e's published figures,
    overlapped with the host loop measured here (None: no cost analysis)."""
    if not m.flops or not m.bytes:
        return None
    per_chip = max(m.batch // max(m.devices, 1), 1)
    return roofline.totals_step(m.flops, m.bytes, V5E, batch=per_chip, host_s=m.t_host)


def v5e_step_at(m: Measured, per_chip: int) -> roofline.StepPrediction | None:
    """The predicted v5e step at another batch per chip: XLA's totals grown by what each sample
    adds (``m.per_sample``), the host's loop plus copying the added samples (None: no cost
    analysis at two batches)."""
    if not m.flops or not m.bytes or m.per_sample is None:
        return None
    extra = per_chip - max(m.batch // max(m.devices, 1), 1)
    flops, nbytes = (total + max(grow, 0.0) * extra for total, grow in zip(
        (m.flops, m.bytes), m.per_sample, strict=True))  # fmt: skip
    host_s = m.t_host + max(extra, 0) * m.devices * m.copy_per_sample_s  # the host copies all
    return roofline.totals_step(flops, nbytes, V5E, batch=per_chip, host_s=host_s)


def _recompiles(m: Measured) -> Finding:
    seen = "the last batch included" if m.last_seen else "the last batch not seen"
    fix = f"x, y = x[: len(x) // {m.batch} * {m.batch}], y[: len(y) // {m.batch} * {m.batch}]"
    if not m.recompiles:
        ev = f"0 compilations after warm-up over {m.probe_steps} batches ({seen})"
        return Finding("recompiles", "ok", ev)
    if m.recompiles[0].startswith(FAILED):
        problem = "fit() fails on the last batch"
        why = f"every batch must split evenly over the {m.devices} device(s)"
        return Finding("recompiles", "problem", m.recompiles[0], problem, fix, (math.inf,) * 2, why)
    compile_s = max(0.0, m.probe_s - m.probe_steps * m.t_step)
    steps = math.ceil(m.samples / m.batch) if m.samples else m.probe_steps
    hi = 1.0 + compile_s / max(steps * m.t_step, 1e-9)
    ev = f"train_step compiled {len(m.recompiles)} more time(s) after warm-up, for "
    ev += "; ".join(m.recompiles) + f" (~{compile_s:.1f} s; {m.samples or '?'} samples)"
    fix += f"  # tf.data: .batch({m.batch}, drop_remainder=True); or pad to {m.batch}"
    why = f"one extra compile of {compile_s:.1f} s per fit() against a {steps}-step epoch"
    problem = "A new batch shape after warm-up (a ragged last batch?) recompiles the step"
    return Finding("recompiles", "problem", ev, problem, fix, (1.0, max(hi, 1.0)), why)


def _batch(m: Measured) -> Finding:
    per_chip, fixed = max(m.batch // max(m.devices, 1), 1), mxu_overhead()
    share = mxu_share(per_chip)
    ev = f"batch per chip {per_chip} ({m.batch} over {m.devices} device(s)) streams {share:.0%} "
    ev += f"of a {TILE}x{TILE} weight tile's MXU cycles ({fixed} load, fill and drain it)"
    if per_chip >= fixed:
        return Finding("batch", "ok", ev)
    target = 2 ** math.ceil(math.log2(fixed))
    before, after = v5e_step(m), v5e_step_at(m, target)
    if before is None or after is None:
        gain = mxu_share(target) / share
        why = f"MXU share {share:.2f} -> {mxu_share(target):.2f} alone: no cost analysis"
    else:  # the whole step: the host's loop and the weights' bytes spread over more samples
        predicted = roofline.lever("batch", before, after)
        gain, why = predicted.gain, predicted.arithmetic()
    if gain < 1.01:
        return Finding("batch", "info", f"{ev}: a larger batch gains nothing on a v5e ({why})")
    fix = f"batch_size = {target * m.devices}  # {target} per chip clears it; then 09's knee, "
    fix += "Adam's rate x sqrt"
    host_bound = before is not None and before.host_s >= before.device_s
    cause = "the host's loop sets a v5e step, which a larger batch spreads" if host_bound else (
        "a larger batch fills more of the MXU")  # fmt: skip
    problem = f"Batch per chip {per_chip} is below the MXU's {fixed}-cycle load and drain; {cause}"
    return Finding("batch", "problem", ev, problem, fix, (1.0, gain), why)


def _dtype(m: Measured) -> Finding:
    ev = f"dtype policy {m.policy}"
    if "bfloat16" in m.policy:
        return Finding("dtype", "ok", ev + ": bf16 activations, half the bytes")
    p = v5e_step(m)
    gain, why = 2.0, "half the activation bytes; no cost analysis to cap it"
    if p is not None:
        predicted = roofline.lever("bf16", p, roofline.in_bfloat16(p))
        gain, why = predicted.gain, f"half the bytes: {predicted.arithmetic()}"
    ev += " (compute not bfloat16)"
    if gain < 1.01:
        ev += f": bf16 gains nothing on a v5e ({why}): the host's part sets the step"
        return Finding("dtype", "info", ev)
    fix = 'keras.mixed_precision.set_global_policy("mixed_bfloat16")  # before building'
    problem = f"The {m.policy} policy moves twice the bytes a v5e step needs"
    return Finding("dtype", "problem", ev, problem, fix, (1.0, gain), why)


def _dispatch(m: Measured) -> Finding:
    ev = f"host loop {m.t_host * 1e3:.3g} ms/step (fit's pace, async); compiled step alone "
    ev += f"{m.t_dev * 1e3:.3g} ms here, fit step {m.t_step * 1e3:.3g} ms; "
    ev += f"{m.programs:.3g} device program(s) per execution (steps_per_execution={m.spe})"
    p = v5e_step(m)
    device = p.device_s if p is not None else m.t_dev  # judged for the v5e when it can be
    idle = max(0.0, 1.0 - device / max(m.t_host, device))
    on = "a v5e" if p is not None else f"this {m.platform}"
    ev += f". On {on} the step's math takes {device * 1e6:.3g} us: the chip idles {idle:.0%}"
    if idle < IDLE_LIMIT:
        return Finding("dispatch", "ok", ev)
    fix = f"jax.lax.scan over {SCAN_STEPS} train steps in one jitted program (not Keras's loop)"
    problem = f"The chip waits on the host loop {idle:.0%} of each step"
    if p is None:
        lo = hi = max(m.t_host, m.t_dev) / max(m.t_dev, m.t_host / SCAN_STEPS, 1e-9)
        why = f"step max(host, device) -> max(host/{SCAN_STEPS}, device) here"
    else:
        predicted = roofline.lever("K steps", p, roofline.k_steps_per_call(p, SCAN_STEPS))
        lo = hi = predicted.gain
        why = f"{SCAN_STEPS} steps per call: {predicted.arithmetic()}"
    return Finding("dispatch", "problem", ev, problem, fix, (max(lo, 1.0), max(hi, 1.0)), why)


def _input(m: Measured) -> Finding:
    if m.input_s is None:
        return Finding("input", "not measured", f"data is {m.data_kind}, nothing to measure")
    timed = m.input_s[1:] or m.input_s
    rate_in = m.batch * len(timed) / max(sum(timed), 1e-9)
    p = v5e_step(m)
    rate_need = m.batch / max(m.t_host, m.t_step) if p is None else p.images_per_s * m.devices
    on = "a predicted v5e step" if p is not None else f"this {m.platform}'s step"
    ev = f"{m.data_kind} delivers {rate_in:,.0f} samples/s; {on} consumes "
    ev += f"{rate_need:,.0f} (this {m.platform}'s step {m.batch / m.t_step:,.0f})"
    if rate_in >= rate_need:
        return Finding("input", "ok", ev)
    fix = "ds = ds.prefetch(tf.data.AUTOTUNE)  # or Grain with worker processes / data on device"
    gain, why = rate_need / rate_in, f"{rate_need:,.0f} / {rate_in:,.0f} samples/s"
    if p is not None:
        predicted = roofline.lever("input", roofline.fed_at(p, rate_in / m.devices), p)
        gain, why = predicted.gain, f"an input that keeps up: {predicted.arithmetic()}"
    problem = "The input is slower than a v5e's training step (input-bound)"
    return Finding("input", "problem", ev, problem, fix, (gain, gain), why)


def _mfu(m: Measured) -> Finding:
    if not m.flops or not m.bytes:
        return Finding("mfu", "not measured", "MFU: no FLOP count for this model (cost analysis)")
    if m.ceiling is None:
        return Finding("mfu", "not measured", f"MFU: no ceiling for {m.platform}")
    value = mfu_mod.mfu(m.flops * m.devices, m.t_step, m.ceiling)
    intensity = m.flops / m.bytes
    bound = "compute-bound" if intensity >= V5E.ridge else "memory-bound"
    of = f"this {m.platform}'s best matmul rate, {m.ceiling / 1e9:,.0f} GFLOP/s"
    if m.platform == "tpu":
        of = f"{m.devices} chip(s)' published bf16 peak"
    ev = f"MFU {value:.1%} (share of {of}); {m.flops * m.devices / 1e9:.3g} GFLOP and "
    ev += f"{m.bytes * m.devices / 1e6:.3g} MB per step: {intensity:.0f} FLOP/byte against the "
    ev += f"v5e ridge {V5E.ridge:.0f}: {bound} on a v5e"
    return Finding("mfu", "info", ev)


def findings_of(m: Measured) -> list[Finding]:
    """The six probes' findings from the measurements, ranked."""
    probes = (_recompiles, _batch, _dtype, _dispatch, _input, _mfu)
    return rank([probe(m) for probe in probes])


def _as_batch(item: Any) -> tuple[np.ndarray, ...]:
    parts = item if isinstance(item, tuple | list) else (item,)
    return tuple(np.asarray(p) for p in parts)


def _timed(draw: Callable[[], Any], n: int) -> tuple[list[tuple[np.ndarray, ...]], list[float]]:
    batches, seconds = [], []
    for _ in range(n):
        start = time.perf_counter()
        try:
            item = draw()
        except (StopIteration, IndexError):
            break
        seconds.append(time.perf_counter() - start)
        batches.append(_as_batch(item))
    return batches, seconds


def _load(data: Any, batch_size: int | None, n: int) -> tuple[list, str, int | None, Any, bool]:
    """(probe batches, kind, samples, input seconds per batch or None, last batch seen)."""
    if isinstance(data, tuple | list) and all(hasattr(a, "shape") for a in data):
        arrays = [np.asarray(a) for a in data]
        size, b = len(arrays[0]), batch_size or 32
        starts = [s for s in (0, b) if s + b <= size] + ([size - size % b] if size % b else [])
        batches = [tuple(a[s : s + b] for a in arrays) for s in starts]
        return batches, "in-memory arrays", size, None, True
    if isinstance(data, keras.utils.PyDataset):
        count = len(data)
        batches, seconds = _timed(iter(data[i] for i in range(min(n, count))).__next__, n)
        if count > n:
            batches.append(_as_batch(data[count - 1]))
        return batches, "a PyDataset (read serially)", None, seconds, True
    if hasattr(data, "__iter__"):
        tf_data = type(data).__module__.startswith("tensorflow")
        kind = "a tf.data.Dataset" if tf_data else "an iterator"
        batches, seconds = _timed(iter(data).__next__, n)
        return batches, kind, None, seconds, len(batches) < n  # ran out: its end was seen
    raise TypeError(f"data must be (x, y) arrays or an iterable of batches, not {type(data)}")


def _replay(batches: Sequence[tuple[np.ndarray, ...]]) -> Iterator[tuple[np.ndarray, ...]]:
    yield from batches


def _compiles_after_warmup(model: Any, batches: list) -> tuple[tuple[str, ...], float]:
    """Warm up on the first batch, then fit on all: each train_step compiled now is a recompile."""
    model.fit(_replay(batches[:1]), epochs=1, verbose=0)
    n_data = len(batches[0])
    with CompileLog() as log:
        start = time.perf_counter()
        try:
            model.fit(_replay(batches), epochs=1, verbose=0)
        except Exception as error:  # e.g. a last batch that does not split over the devices
            shape = "x".join(map(str, batches[-1][0].shape))
            return (f"{FAILED} on a batch of {shape}: {type(error).__name__}",), 0.0
        seconds = time.perf_counter() - start
    shapes = tuple(", ".join(e.shapes[-n_data:]) for e in log.of("train_step"))
    return shapes, seconds


def _groups(model: Any) -> tuple[list, ...]:
    """The variables in the order of Keras's JAX ``train_step(state, data)`` state."""
    groups = (model.trainable_variables, model.non_trainable_variables)
    return (*groups, model.optimizer.variables, model.metrics_variables)


def _compiled_step(model: Any, batch: tuple) -> tuple[Any, tuple, tuple, Any, Any]:
    """Keras's ``train_step`` compiled for ``batch``: (program, state, data, FLOPs, bytes per
    device from XLA's cost analysis, or None)."""
    dist = keras.distribution.distribution()
    data = tuple(batch)
    if dist is not None:
        data = tuple(jax.device_put(a, dist.get_data_layout(a.shape).backend_layout) for a in data)
    state = tuple([v.value for v in group] for group in _groups(model))
    compiled = jax.jit(model.train_step).lower(state, data).compile()
    cost = compiled.cost_analysis()
    cost = (cost[0] if isinstance(cost, list | tuple) and cost else cost) or {}
    return compiled, state, data, cost.get("flops"), cost.get("bytes accessed")


def _per_sample(model: Any, batch: tuple, flops: Any, nbytes: Any) -> tuple[float, float] | None:
    """What one more sample adds to the step's FLOPs and bytes per device: XLA's counts at twice
    the batch, less those at the batch (None without a cost analysis)."""
    if not flops or not nbytes:
        return None
    *_, flops2, bytes2 = _compiled_step(model, tuple(np.concatenate([a, a]) for a in batch))
    if not flops2 or not bytes2:
        return None
    per_device = max(len(batch[0]) // _devices(), 1)
    return (flops2 - flops) / per_device, (bytes2 - nbytes) / per_device


def _copy_per_sample(batch: tuple, repeats: int = 5) -> float:
    """Seconds the host takes to copy one sample's arrays (the best of ``repeats`` copies of the
    whole batch, per sample)."""
    timing = time_fn(lambda: [np.array(a, copy=True) for a in batch], repeats=repeats)
    return min(timing.samples) / max(len(batch[0]), 1)


def _device_step(model: Any, batch: tuple, repeats: int = 5) -> tuple[float, Any, Any]:
    """(best seconds of the compiled step alone, its FLOPs and bytes per device or None)."""
    compiled, state, data, flops, nbytes = _compiled_step(model, batch)
    timing = time_fn(lambda: jax.block_until_ready(compiled(state, data)), repeats=repeats)
    return min(timing.samples), flops, nbytes


def _ceiling(platform: str, kind: str, chips: int) -> float | None:
    """``utils.mfu.ceiling``: a TPU's published peak x chips (None for a TPU
    it has no figure for); elsewhere this run's best matmul, float32 or bfloat16, in FLOP/s."""
    gen = next((g for key, g in _TPU_KINDS if key in kind.lower()), None)
    if platform == "tpu" and gen is None:
        return None
    n = 1024  # measured next to the step it divides: a shared machine's rate varies

    def measure(dtype: str) -> Callable[[], float]:
        return lambda: mfu_mod.measured_peak(matmul(n, dtype), n, repeats=3)

    tpu = gen if platform == "tpu" else None
    return mfu_mod.ceiling(measure, tpu_generation=tpu, chips=chips)()


def _device() -> Any:
    """The first device: its ``platform`` and ``device_kind`` choose the ceiling."""
    return jax.devices()[0]


def _devices() -> int:
    """Devices the batch is split over: the batch axis of the distribution's mesh, else 1."""
    dist = keras.distribution.distribution()
    mesh, name = getattr(dist, "device_mesh", None), getattr(dist, "batch_dim_name", None)
    return int(mesh.shape[mesh.axis_names.index(name)]) if mesh and name in mesh.axis_names else 1


def speed_check(
    model: Any,
    data: Any,
    *,
    batch_size: int | None = None,
    input_batches: int = 6,
    steps: int = 16,
    show: bool = True,
) -> list[Finding]:
    """Probe ``model`` (compiled) on ``data`` and print the ranked to-do list; return it.

    ``data``: ``(x, y)`` arrays (batched by ``batch_size``, Keras's 32 by default), a Python
    generator or iterable of ``(x, y)`` batches, a ``keras.utils.PyDataset`` or a
    ``tf.data.Dataset`` of batches (``input_batches`` are drawn and timed). ``steps``: steps
    per timed epoch. Trains a few dozen steps, then restores the model's variables.
    """
    if keras.backend.backend() != "jax":
        raise RuntimeError(f"speed_check needs KERAS_BACKEND=jax, not {keras.backend.backend()}")
    batches, kind, samples, input_s, last_seen = _load(data, batch_size, input_batches)
    if not batches:
        raise ValueError("data gave no batch")
    device, devices = _device(), _devices()
    saved = [(v, keras.ops.convert_to_numpy(v.value)) for g in _groups(model) for v in g]
    try:
        with warnings.catch_warnings():  # fit on a generator: "shuffle ignored", "ran out"
            warnings.filterwarnings("ignore", category=UserWarning)
            recompiles, probe_s = _compiles_after_warmup(model, batches)
            t_step, t_host, programs = timing.fit_pace(model, batches[0], steps)
            t_dev, flops, nbytes = _device_step(model, batches[0])
            per_sample = _per_sample(model, batches[0], flops, nbytes)
    finally:
        for variable, value in saved:
            variable.assign(value)
    achieved = (flops or 0.0) * devices / t_step
    ceiling = _ceiling(device.platform, device.device_kind, devices)
    for _ in range(2):  # a shared CPU's rate varies: one below the step's is measured again
        if ceiling is None or ceiling >= achieved:
            break
        ceiling = max(ceiling, _ceiling(device.platform, device.device_kind, devices) or 0.0)
    measured = Measured(
        device.platform, devices, len(batches[0][0]), model.dtype_policy.name, kind, samples,
        recompiles, probe_s, len(batches), last_seen, t_step, t_host, t_dev,
        int(model.steps_per_execution), programs, None if input_s is None else tuple(input_s),
        flops, nbytes, ceiling, per_sample, _copy_per_sample(batches[0]),
    )  # fmt: skip
    found = findings_of(measured)
    if show:
        print(f"speed_check on {device.platform} ({devices} device(s)), batch {measured.batch}:")
        print(report(found))
    return found
