"""PyTorch/XLA helpers for notebook 06 (imports torch and torch_xla).

Importing this module first checks that torch and torch_xla match (:func:`torch_xla_problem`: a
mismatch would die in ``import torch_xla`` with an undefined symbol), then sets ``PJRT_DEVICE``
unless it is set (torch_xla reads it once, when its runtime starts): ``TPU`` where
:func:`utils.runtime.detect` finds one, else ``CPU``, where XLA compiles the same lazy graphs for
the host (torch_xla 2.9 has no GPU backend).

Then, in the order notebook 06 uses them: the device, torch_xla's own counters as numbers, a
CIFAR-10 ``DataLoader``, padding to buckets, one training loop for the XLA device and eager
PyTorch, and a steps runner and a matmul peak for :func:`utils.compare.compare`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from utils import runtime  # framework-free
from utils.mfu import measured_peak
from utils.results import version


def torch_xla_problem(versions: Mapping[str, str | None] | None = None) -> str | None:
    """What is wrong with the installed torch/torch_xla pair, with the fix; None when they match.

    torch_xla X.Y is built against torch X.Y, although its package metadata does not say so.
    Reads package metadata only (``versions`` defaults to what is installed).
    """
    v = versions or {name: version(name) for name in ("torch", "torch_xla")}
    torch_v, xla_v = v.get("torch"), v.get("torch_xla")
    if not xla_v or (torch_v and runtime.same_release(torch_v, xla_v)):
        return None
    pair = xla_v.split("+")[0]
    return (
        f"torch {torch_v or '(not installed)'} does not match torch_xla {xla_v}: torch_xla {pair} "
        f"only works with torch {pair}, and importing it would fail with '_XLAC ... undefined "
        f"symbol' (pytorch/xla#8292). Fix: pip install torch=={pair} torch_xla=={pair} (on "
        "Colab's TPU runtime, undo your torch upgrade or start a fresh runtime), then restart "
        "the runtime."
    )


if _problem := torch_xla_problem():
    raise RuntimeError(_problem)
# torch_xla reads PJRT_DEVICE once, when its runtime starts: choose it before importing it.
if not os.environ.get("PJRT_DEVICE"):  # a TPU -> TPU; anything else: XLA's CPU backend
    os.environ["PJRT_DEVICE"] = "TPU" if runtime.detect().accelerator == "tpu" else "CPU"

import torch  # noqa: E402 - torch_xla must see PJRT_DEVICE first

with warnings.catch_warnings():
    # torch_xla warns whenever the `tensorflow` package is installed in the same environment;
    # the course never imports both in one process.
    warnings.filterwarnings("ignore", message=".*tensorflow.*can conflict", category=UserWarning)
    import torch_xla  # noqa: E402

import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.debug.metrics as met  # noqa: E402
import torch_xla.distributed.parallel_loader as pl  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from utils.torch.models import images_to_float  # noqa: E402


def runtime_started() -> bool:
    """True once this process opened its XLA runtime; on a TPU it then holds the chips until it
    ends, and no other process can use them."""
    return bool(torch_xla._XLAC._xla_runtime_is_initialized())


def describe_device() -> str:
    """``PJRT_DEVICE``, the versions and this process's devices; an unopened TPU stays unopened."""
    text = (
        f"PJRT_DEVICE={os.environ['PJRT_DEVICE']}, torch {torch.__version__.split('+')[0]}, "
        f"torch_xla {torch_xla.__version__.split('+')[0]}: "
    )
    if os.environ["PJRT_DEVICE"] == "TPU" and not runtime_started():
        return text + "device not opened yet (the first torch_xla.device() takes the chips)"
    return text + f"device {torch_xla.device()}, {xr.global_runtime_device_count()} visible"


def _samples(name: str) -> tuple[int, float]:
    data = met.metric_data(name)
    return (int(data[0]), float(data[1])) if data else (0, 0.0)


def metrics_summary() -> dict:
    """torch_xla's debug metrics as numbers, once queued device work has finished.

    ``compile_count``/``compile_time_s`` (XLA compilations; a cached graph does not count),
    ``execute_count``, ``transfers_to_device``/``_from_device``, ``local_scalar_dense``
    (``.item()``-style reads) and ``fallbacks``: ``aten::`` op -> calls run on the CPU because
    the op has no XLA lowering.
    """
    xm.wait_device_ops()
    compiles, compile_ns = _samples("CompileTime")
    fallbacks = {
        n: int(met.counter_value(n) or 0) for n in met.counter_names() if n.startswith("aten::")
    }
    return {
        "compile_count": compiles,
        "compile_time_s": compile_ns / 1e9,
        "execute_count": _samples("ExecuteTime")[0],
        "transfers_to_device": _samples("TransferToDeviceTime")[0],
        "transfers_from_device": _samples("TransferFromDeviceTime")[0],
        "local_scalar_dense": fallbacks.get("aten::_local_scalar_dense", 0),
        "fallbacks": fallbacks,
    }


def metrics_delta(before: dict, after: dict) -> dict:
    """What happened between two :func:`metrics_summary` results (``after - before``)."""
    out = {k: v - before[k] for k, v in after.items() if k != "fallbacks"}
    old = before["fallbacks"]
    out["fallbacks"] = {
        k: n - old.get(k, 0) for k, n in after["fallbacks"].items() if n != old.get(k, 0)
    }
    return out


def make_loader(images: np.ndarray, labels: np.ndarray, **options: Any) -> DataLoader:
    """A ``DataLoader`` of ``(uint8 images (B, 3, H, W), int64 labels)`` from NHWC uint8 arrays.

    ``options`` go to the ``DataLoader`` (``batch_size``, ``shuffle``, ``drop_last``: every batch
    the same shape, since a new shape is a new compilation); shuffling is seeded.
    """
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).contiguous()
    y = torch.from_numpy(np.asarray(labels).astype(np.int64).reshape(-1))
    return DataLoader(TensorDataset(x, y), generator=torch.Generator().manual_seed(0), **options)


def pad_to_bucket(
    seq: torch.Tensor, buckets: tuple[int, ...], value: float = 0.0
) -> tuple[torch.Tensor, int]:
    """Pad a 1-D tensor at the end to the smallest bucket that holds it; also return its length.

    A handful of bucket lengths means a handful of compiled graphs, not one per input length.
    """
    n = int(seq.shape[0])
    size = min((b for b in buckets if b >= n), default=None)
    if size is None:
        raise ValueError(f"length {n} is longer than the largest bucket {max(buckets)}")
    return nn.functional.pad(seq, (0, size - n), value=value), n


def train_step(model, images, labels, optimizer, bf16=False):  # shown in notebook 06 as is
    """One optimisation step on a batch already on the model's device; returns the loss tensor.

    On an XLA device this only *records* the step; the graph compiles and runs at the next
    ``torch_xla.sync()`` (``MpDeviceLoader`` issues one per batch), or as one graph under
    ``torch_xla.compile``. ``bf16``: matmuls and convolutions in bfloat16 (``torch.autocast``),
    weights and the optimiser in float32. The same code trains data-parallel under SPMD.
    """
    optimizer.zero_grad()
    with torch.autocast("xla", dtype=torch.bfloat16, enabled=bf16):  # bf16 matmuls, f32 weights
        loss = nn.functional.cross_entropy(model(images_to_float(images)), labels)
    loss.backward()
    optimizer.step()
    return loss.detach()  # stays on the device: read it once, at the end


def _batches(loader: Iterable, dev: torch.device):
    """Batches (tuples of tensors) on ``dev``; on XLA through ``MpDeviceLoader`` (background copy,
    a sync per batch)."""
    if dev.type == "xla":
        return pl.MpDeviceLoader(loader, dev)
    return (tuple(t.to(dev) for t in batch) for batch in loader)


def _wait(dev: torch.device) -> None:
    """End the pending XLA step and wait for the device (eager CPU work is already done)."""
    if dev.type == "xla":
        torch_xla.sync()
        xm.wait_device_ops()


def train(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    *,
    dev: torch.device,
    epochs: int = 1,
    step: Callable[..., torch.Tensor] | None = None,
) -> list[float]:
    """Train ``model`` (already on ``dev``) for ``epochs`` passes; return the loss of each step.

    ``step(model, images, labels, optimizer)`` defaults to :func:`train_step`. The losses stay on
    the device and are read once, at the end (a read per step would stall the device).
    """
    model.train()
    step = step or train_step
    losses = [step(model, x, y, optimizer) for _ in range(epochs) for x, y in _batches(loader, dev)]
    _wait(dev)
    return [float(t.cpu()) for t in losses]


def _padded(loader: DataLoader):
    """``(images, labels, valid)`` batches: a smaller batch padded with zero rows to
    ``loader.batch_size``, ``valid`` marking its real rows (one shape, one compiled graph)."""
    size = loader.batch_size
    for images, labels in loader:
        extra = size - int(labels.shape[0])
        yield (
            torch.cat([images, images.new_zeros((extra, *images.shape[1:]))]),
            torch.cat([labels, labels.new_zeros(extra)]),
            torch.arange(size) < int(labels.shape[0]),
        )


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader, *, dev: torch.device) -> float:
    """Accuracy of ``model`` on every image of ``loader``; summed on the device, read once.

    A smaller last batch is padded to the batch size and its padding masked out (notebook 03's
    cure), so evaluation compiles one graph whatever the number of images.
    """
    model.eval()
    correct = torch.zeros((), dtype=torch.int64).to(dev)  # data: every batch one graph
    for images, labels, valid in _batches(_padded(loader), dev):
        hits = model(images_to_float(images)).argmax(dim=1) == labels
        correct += (hits & valid).sum()
    _wait(dev)  # the last batch as a step like the others, not as a read (another graph)
    model.train()
    total = len(loader) * loader.batch_size if loader.drop_last else len(loader.dataset)
    return int(correct.cpu()) / max(total, 1)


def steps_runner(
    step: Callable[..., object], loader: DataLoader, *, dev: torch.device, steps: int
) -> Callable[[], int]:
    """A ``run`` for :class:`utils.compare.Variant`: ``step(images, labels)`` on the next ``steps``
    batches of ``loader``, waited for; returns the images processed."""
    if len(loader) < steps:
        raise ValueError(f"{len(loader)} batches cannot make {steps} steps")

    def run() -> int:
        for _, (x, y) in zip(range(steps), _batches(loader, dev), strict=False):
            step(x, y)
        _wait(dev)
        return steps * loader.batch_size

    return run


def matmul_peak(
    dev: torch.device, *, n: int = 1024, dtype: torch.dtype = torch.float32, repeats: int = 3
) -> Callable[[], float]:
    """A callable measuring the FLOP/s of one ``(n, n) @ (n, n)`` at ``dtype`` on ``dev`` now
    (:func:`utils.mfu.measured_peak`): a peak for ``compare(peaks=...)`` on a CPU."""
    gen = torch.Generator().manual_seed(0)
    a, b = ((torch.randn(n, n, generator=gen) / n**0.5).to(dtype).to(dev) for _ in range(2))

    def product() -> torch.Tensor:
        out = a @ b  # kept alive, or the lazy graph would have nothing to run
        _wait(dev)
        return out

    return lambda: measured_peak(product, n, repeats=repeats)
