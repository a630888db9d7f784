"""PyTorch/XLA helpers for notebook 06 (imports torch and torch_xla).

Importing this module picks the PJRT device *before* torch_xla loads (torch_xla reads
``PJRT_DEVICE`` once, when its runtime starts):

- a TPU found by :func:`utils.runtime.detect` -> ``PJRT_DEVICE=TPU``;
- anything else -> ``PJRT_DEVICE=CPU``: XLA compiles for the host CPU, so the same lazy-tensor
  code runs (and teaches) without a TPU. torch_xla 2.9 has no CUDA backend.

Before torch_xla is imported, :func:`utils.torch.stacks.check_torch_xla` checks that torch and
torch_xla match (a mismatch would die in the import with an undefined symbol).

A ``PJRT_DEVICE`` that is already set is kept. :data:`PJRT_CHOICE` says what was decided and why;
:func:`describe_device` prints it with the devices found, without opening a TPU that this process
has not opened yet (opening takes the chips until the process ends; :func:`runtime_started`).

What is here, in the order notebook 06 uses it:

- :func:`metrics_summary` / :func:`metrics_delta`: torch_xla's own counters as numbers
  (compilations, executions, transfers, ``aten::`` CPU fallbacks).
- :func:`make_loader`: a ``DataLoader`` over a ``TensorDataset`` of the shared CIFAR-10 arrays
  (uint8, channels first; the conversion to float happens on the device).
- :func:`pad_to_bucket`: pad variable-length inputs to a few fixed lengths (fewer compilations).
- :func:`train_step`, :func:`train`, :func:`evaluate`: one training loop for the XLA device (with
  ``MpDeviceLoader``) and for eager PyTorch on the CPU.
- :func:`steps_runner`: a number of training steps as one call, on any device, for
  :func:`utils.compare.compare` (interleaved rounds, warm-up excluded, a verdict);
  :func:`matmul` / :func:`matmul_peak`: the matmul the CPU's stand-in peak is measured on
  (by :func:`utils.mfu.measured_peak`, the course's one peak), on the training's device and dtype.
- :func:`ensure_simulated_devices` and :func:`enable_spmd`: the two things that must happen
  before this process's XLA runtime starts, checked, with a clear error instead of a silently
  ignored ``CPU_NUM_DEVICES`` or a crash.

Running code in a fresh process (SPMD, the compilation cache, debug output) is in
:mod:`utils.torch.launch`.
"""

from __future__ import annotations

import hashlib
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np


def choose_pjrt_device(env: os._Environ[str] | dict[str, str] | None = None) -> str:
    """Set ``PJRT_DEVICE`` in ``env`` (default ``os.environ``) for this runtime; explain the choice.

    Must run before ``import torch_xla``; importing this module does it.
    """
    env = os.environ if env is None else env
    if env.get("PJRT_DEVICE"):
        return f"PJRT_DEVICE={env['PJRT_DEVICE']} was already set; kept it."
    from utils import runtime  # framework-free

    rt = runtime.detect(env=env)
    if rt.accelerator == "tpu":
        env["PJRT_DEVICE"] = "TPU"
        kind = rt.tpu.accelerator_type if rt.tpu and rt.tpu.accelerator_type else "TPU"
        return f"Found a TPU ({kind}): PJRT_DEVICE=TPU, torch_xla compiles for its chips."
    env["PJRT_DEVICE"] = "CPU"
    why = "torch_xla 2.9 has no GPU backend" if rt.accelerator == "gpu" else "no TPU here"
    return (
        f"No TPU found ({why}): PJRT_DEVICE=CPU. XLA compiles the same lazy graphs for this CPU, "
        "so every lesson runs; the speed-ups need a TPU."
    )


PJRT_CHOICE: str = choose_pjrt_device()

from utils.torch import stacks  # noqa: E402 - framework-free

# A torch that does not match torch_xla makes `import torch_xla` die with an undefined symbol:
# say which versions and how to fix it first.
stacks.check_torch_xla()

import torch  # noqa: E402 - torch_xla must see PJRT_DEVICE first

with warnings.catch_warnings():
    # torch_xla warns whenever the `tensorflow` package is installed in the same environment.
    # The course keeps both in one venv but never imports them in the same process.
    warnings.filterwarnings("ignore", message=".*tensorflow.*can conflict", category=UserWarning)
    import torch_xla  # noqa: E402

import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.debug.metrics as met  # noqa: E402
import torch_xla.distributed.parallel_loader as pl  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Sampler, TensorDataset  # noqa: E402

from utils import simulated_devices as simulated  # noqa: E402 - framework-free
from utils.mfu import measured_peak  # noqa: E402 - framework-free
from utils.torch.models import images_to_float  # noqa: E402

__all__ = [
    "PJRT_CHOICE",
    "SpmdTooLateError",
    "TrainLog",
    "describe_device",
    "device",
    "enable_spmd",
    "ensure_simulated_devices",
    "evaluate",
    "make_loader",
    "matmul",
    "matmul_peak",
    "metrics_delta",
    "metrics_summary",
    "pad_to_bucket",
    "runtime_started",
    "steps_runner",
    "to_tensor_dataset",
    "train",
    "train_step",
    "weights_checksum",
]


# --------------------------------------------------------------------------- device


def device() -> torch.device:
    """This process's XLA device: ``torch_xla.device()`` (``xm.xla_device()`` is deprecated)."""
    return torch_xla.device()


def runtime_started() -> bool:
    """True once this process has opened its XLA runtime (first ``torch_xla.device()`` or tensor).

    On a TPU the process then holds the chips until it ends: no other process (a launcher, a
    TensorFlow notebook) can use them.
    """
    return bool(torch_xla._XLAC._xla_runtime_is_initialized())


def describe_device(*, open_device: bool | None = None) -> str:
    """A few lines: the PJRT choice, versions, and this process's device.

    Opening the device starts the XLA runtime, which on a TPU takes the chips for good (see
    :func:`runtime_started`). So by default (``open_device=None``) the device is opened only when
    that costs nothing: on the CPU backend, or when the runtime has already started. On a TPU not
    yet opened, the chips are described from :func:`utils.runtime.detect` instead, which reads
    files and environment variables only.
    """
    if open_device is None:
        open_device = os.environ.get("PJRT_DEVICE") != "TPU" or runtime_started()
    # Release numbers only: the "+cu128"/"+cpu" local tag names this machine's build, not the API.
    release = torch.__version__.split("+")[0]
    lines = [PJRT_CHOICE, f"torch {release}, torch_xla {torch_xla.__version__.split('+')[0]}"]
    if open_device:
        dev = device()
        lines.append(
            f"device: {dev} (type {xr.device_type()}), "
            f"devices visible to this process: {xr.global_runtime_device_count()}"
        )
        return "\n".join(lines)
    from utils import runtime  # framework-free

    tpu = runtime.detect().tpu
    kind = (tpu.accelerator_type if tpu else None) or "TPU"
    chips = f"{tpu.chips} chip(s)" if tpu and tpu.chips else "chips: count unknown"
    lines.append(
        f"device: not opened yet ({kind}, {chips} on this host, from utils.runtime). "
        "The first torch_xla.device() call takes the chips for this process until it ends."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------- metrics


def _metric(name: str) -> tuple[int, float]:
    """(number of samples, accumulated value) of a torch_xla metric; (0, 0.0) if never recorded."""
    data = met.metric_data(name)
    if data is None:
        return 0, 0.0
    count, accumulator, _samples = data
    return int(count), float(accumulator)


def metrics_summary(*, wait: bool = True) -> dict[str, int | float | dict[str, int]]:
    """torch_xla's debug metrics as plain numbers.

    Keys: ``compile_count`` and ``compile_time_s`` (XLA compilations; a cached graph does not
    count), ``execute_count`` (graphs run on the device), ``transfers_to_device`` and
    ``transfers_from_device`` (host<->device copies), ``local_scalar_dense`` (``.item()``-style
    reads of one value), ``persistent_cache_hit``/``_miss``/``_load_failure`` (the on-disk
    compilation cache of ``xr.initialize_cache``: a load failure means a cached program was
    found but could not be used, so it was compiled again), ``fallbacks`` (``aten::`` op
    name -> calls that ran on the CPU because the op has no XLA lowering) and
    ``fallback_count`` (their sum).

    Args:
        wait: first wait for queued device work (execution is asynchronous), so the counts are
            final and the same from run to run.
    """
    if wait:
        xm.wait_device_ops()
    compiles, compile_ns = _metric("CompileTime")
    executes, _ = _metric("ExecuteTime")
    to_device, _ = _metric("TransferToDeviceTime")
    from_device, _ = _metric("TransferFromDeviceTime")
    fallbacks = {
        name: int(met.counter_value(name) or 0)
        for name in sorted(met.counter_names())
        if name.startswith("aten::")
    }
    cache = {
        key: int(met.counter_value(name) or 0)
        for key, name in (
            ("persistent_cache_hit", "PersistentCacheHit"),
            ("persistent_cache_miss", "PersistentCacheMiss"),
            ("persistent_cache_load_failure", "PersistentCacheDeserializeFailure"),
        )
    }
    return {
        **cache,
        "compile_count": compiles,
        "compile_time_s": compile_ns / 1e9,
        "execute_count": executes,
        "transfers_to_device": to_device,
        "transfers_from_device": from_device,
        "local_scalar_dense": fallbacks.get("aten::_local_scalar_dense", 0),
        "fallback_count": sum(fallbacks.values()),
        "fallbacks": fallbacks,
    }


def metrics_delta(before: Mapping, after: Mapping) -> dict[str, int | float | dict[str, int]]:
    """What happened between two :func:`metrics_summary` results (``after - before``, per key)."""
    out: dict[str, int | float | dict[str, int]] = {}
    for key, value in after.items():
        if isinstance(value, Mapping):
            old = before.get(key, {})
            diff = {k: v - old.get(k, 0) for k, v in value.items() if v - old.get(k, 0)}
            out[key] = diff
        else:
            out[key] = value - before.get(key, 0)
    return out


# --------------------------------------------------------------------------- data


def to_tensor_dataset(images: np.ndarray, labels: np.ndarray) -> TensorDataset:
    """uint8 NHWC images + integer labels (``utils.data.load_cifar10``) -> a ``TensorDataset``.

    Images become uint8 ``(N, 3, H, W)`` (PyTorch's channels-first layout); labels int64.
    """
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"expected NHWC images with 3 channels, got shape {images.shape}")
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).contiguous()
    if x.dtype != torch.uint8:
        raise ValueError(f"expected uint8 images, got {x.dtype}")
    y = torch.from_numpy(np.asarray(labels).astype(np.int64).reshape(-1))
    return TensorDataset(x, y)


def make_loader(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    batch_size: int,
    shuffle: bool = False,
    drop_last: bool = False,
    seed: int = 0,
    sampler: Sampler | None = None,
) -> DataLoader:
    """A ``DataLoader`` of ``(uint8 images (B, 3, 32, 32), int64 labels (B,))`` batches.

    ``drop_last=True`` drops the last, smaller batch: every batch then has the same shape, which
    is what an XLA device wants (a new shape means a new compilation). ``seed`` fixes the shuffle.
    """
    dataset = to_tensor_dataset(images, labels)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle if sampler is None else False,
        sampler=sampler,
        drop_last=drop_last,
        generator=generator,
    )


def pad_to_bucket(
    seq: torch.Tensor, buckets: tuple[int, ...], value: float = 0.0
) -> tuple[torch.Tensor, int]:
    """Pad a 1-D tensor at the end to the smallest bucket length that holds it.

    Returns the padded tensor and the original length (to build a mask). With a handful of bucket
    lengths, an XLA device compiles a handful of graphs instead of one per input length.
    """
    n = int(seq.shape[0])
    fitting = [b for b in sorted(buckets) if b >= n]
    if not fitting:
        raise ValueError(f"length {n} is longer than the largest bucket {max(buckets)}")
    return nn.functional.pad(seq, (0, fitting[0] - n), value=value), n


# --------------------------------------------------------------------------- training


def _is_xla(dev: torch.device) -> bool:
    return torch.device(dev).type == "xla"


def train_step(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy,
) -> torch.Tensor:
    """One optimisation step on a batch already on the model's device; returns the loss tensor.

    On an XLA device this only *records* the step; the graph compiles and runs at the next
    ``torch_xla.sync()`` (``MpDeviceLoader`` issues one per batch). The same code trains
    data-parallel under SPMD (the compiler inserts the all-reduce); only the multi-process
    recipe needs ``xm.optimizer_step``.
    """
    optimizer.zero_grad()
    loss = loss_fn(model(images_to_float(images)), labels)  # uint8 -> float in [0, 1] on the device
    loss.backward()
    optimizer.step()
    return loss.detach()  # stays on the device: read it once, at the end


@dataclass
class TrainLog:
    """What :func:`train` did: loss per step, steps, images and wall-clock seconds."""

    losses: list[float] = field(default_factory=list)
    steps: int = 0
    images: int = 0
    seconds: float = 0.0


def _device_batches(loader: DataLoader, dev: torch.device):
    """Batches on ``dev``; on XLA via ``MpDeviceLoader`` (background copy, a sync per batch)."""
    if _is_xla(dev):
        return pl.MpDeviceLoader(loader, dev)
    return ((x.to(dev), y.to(dev)) for x, y in loader)


def train(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    *,
    dev: torch.device,
    epochs: int = 1,
    max_steps: int | None = None,
    step: Callable[..., torch.Tensor] | None = None,
) -> TrainLog:
    """Train ``model`` (already on ``dev``) for ``epochs`` passes or ``max_steps`` steps.

    ``step(model, images, labels, optimizer)`` makes one step and returns the loss tensor
    (default :func:`train_step`; notebook 06 passes its own, editable copy). The losses stay on
    the device until the end (reading one each step would stall the device every step) and are
    then read once.
    """
    step = step or train_step
    model.train()
    log = TrainLog()
    device_losses: list[torch.Tensor] = []
    start = time.perf_counter()
    for _ in range(epochs):
        for images, labels in _device_batches(loader, dev):
            device_losses.append(step(model, images, labels, optimizer))
            log.steps += 1
            log.images += int(labels.shape[0])
            if max_steps is not None and log.steps >= max_steps:
                break
        if max_steps is not None and log.steps >= max_steps:
            break
    if _is_xla(dev):
        torch_xla.sync()
        xm.wait_device_ops()
    log.seconds = time.perf_counter() - start
    log.losses = [float(t) for t in (t.cpu() for t in device_losses)]
    return log


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, *, dev: torch.device) -> float:
    """Accuracy of ``model`` on ``loader``; the correct-count is summed on the device, read once."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=dev)
    total = 0
    for images, labels in _device_batches(loader, dev):
        correct += (model(images_to_float(images)).argmax(dim=1) == labels).sum()
        total += int(labels.shape[0])
    model.train()
    return int(correct.cpu()) / max(total, 1)


def steps_runner(
    step: Callable[[torch.Tensor, torch.Tensor], object],
    images: np.ndarray,
    labels: np.ndarray,
    *,
    dev: torch.device,
    batch_size: int,
    steps: int,
    seed: int = 0,
) -> Callable[[], int]:
    """A ``run`` for :class:`utils.compare.Variant`: ``steps`` calls of ``step(images, labels)``.

    Batches come from :func:`make_loader` (shuffled, ``drop_last``) through the same device
    iterator as :func:`train` (``MpDeviceLoader`` on XLA: one graph per step). Each call returns
    only when the device has finished (XLA: ``wait_device_ops``; eager: the last loss is read), so
    the timed region holds the work. Returns the images processed.

    Raises:
        ValueError: fewer than ``steps`` full batches in ``images``.
    """
    loader = make_loader(
        images, labels, batch_size=batch_size, shuffle=True, drop_last=True, seed=seed
    )
    if len(loader) < steps:
        raise ValueError(f"{len(loader)} batches of {batch_size} cannot make {steps} steps")

    def run() -> int:
        out: object = None
        for i, (x, y) in enumerate(_device_batches(loader, dev)):
            out = step(x, y)
            if i + 1 == steps:
                break
        if _is_xla(dev):
            torch_xla.sync()
            xm.wait_device_ops()
        else:
            first = out[0] if isinstance(out, tuple) else out
            float(first)  # eager: reading the loss waits for the step
        return steps * batch_size

    return run


def weights_checksum(model: nn.Module) -> str:
    """SHA-256 of all parameters' bytes (on the host): equal strings = bit-identical weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------- before the runtime


def ensure_simulated_devices(count: int) -> int:
    """Check that this process has ``count`` devices; on the CPU backend, ask for them.

    ``CPU_NUM_DEVICES`` is read once, when the XLA runtime starts: set afterwards, it is
    silently ignored. So before the runtime starts this sets it; afterwards it raises if the
    device count differs. On a TPU the count is the chips', and ``count`` is not checked.

    Returns the number of devices (without starting the runtime when it has not started).

    Raises:
        RuntimeError: the runtime already started with another number of CPU devices.
    """
    simulated.check_count(count, "count")
    if os.environ.get("PJRT_DEVICE") != "CPU":
        return xr.global_runtime_device_count() if runtime_started() else count
    if not runtime_started():
        os.environ["CPU_NUM_DEVICES"] = str(count)
        return count
    have = xr.global_runtime_device_count()
    if have != count:
        raise RuntimeError(
            f"This process's XLA runtime already started with {have} CPU device(s), so setting "
            f"CPU_NUM_DEVICES={count} now changes nothing (it is read once, at start). Restart "
            "the kernel and set it before the first XLA tensor, or run the multi-device code in "
            "a fresh process (utils.torch.launch.run_script)."
        )
    return have


class SpmdTooLateError(RuntimeError):
    """SPMD was asked for after this process had put tensors on its XLA device."""


def enable_spmd() -> None:
    """``xr.use_spmd()``, but refused once the runtime has started.

    ``xr.use_spmd()`` called late does not raise in torch_xla 2.9: it warns, moves existing
    tensors to the SPMD device, and on the CPU backend with several devices the process then
    dies with a segmentation fault at its next computation (seen on this course's machine).
    This raises a clear error instead and leaves the process as it was.

    Raises:
        SpmdTooLateError: the runtime started (a tensor or ``torch_xla.device()`` came first).
    """
    if runtime_started() or torch_xla._XLAC._xla_get_spmd_config_is_locked():
        raise SpmdTooLateError(
            "SPMD must be switched on before anything touches the XLA device, and this process "
            "has already used it (torch_xla.device() or a tensor). Calling xr.use_spmd() now "
            "would move every existing tensor and, on the CPU backend, can crash the process. "
            "Put xr.use_spmd() first in a fresh process: restart the kernel, or run the SPMD "
            "script in its own process (utils.torch.launch.run_script)."
        )
    xr.use_spmd()


# --------------------------------------------------------------------------- peak rate


def matmul(
    dev: torch.device, *, n: int = 1024, dtype: torch.dtype = torch.float32
) -> Callable[[], object]:
    """A zero-argument callable: one ``(n, n) @ (n, n)`` at ``dtype`` on ``dev``, waited for.

    On an XLA device it is one compiled graph (the first call compiles; later calls reuse it),
    the same compile path as a torch_xla training step. Time it with
    :func:`utils.mfu.measured_peak` (or pass :func:`matmul_peak` to ``compare(peaks=...)``).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    gen = torch.Generator().manual_seed(0)
    a = (torch.randn(n, n, generator=gen) / n**0.5).to(dtype).to(dev)
    b = (torch.randn(n, n, generator=gen) / n**0.5).to(dtype).to(dev)

    def product() -> object:
        out = a @ b
        if _is_xla(dev):
            torch_xla.sync()
            xm.wait_device_ops()
        else:
            out[0, 0].item()
        return out

    return product


def matmul_peak(
    dev: torch.device, *, n: int = 1024, dtype: torch.dtype = torch.float32, repeats: int = 3
) -> Callable[[], float]:
    """A callable measuring that matmul's FLOP/s now (:func:`utils.mfu.measured_peak`).

    Pass it to ``utils.compare.compare(peaks={...})``: it is then measured in every round.
    """
    fn = matmul(dev, n=n, dtype=dtype)
    return lambda: measured_peak(fn, n, repeats=repeats)
