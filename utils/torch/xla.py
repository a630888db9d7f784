"""PyTorch/XLA helpers for notebook 06 (imports torch and torch_xla).

Importing this module picks the PJRT device *before* torch_xla loads (torch_xla reads
``PJRT_DEVICE`` once, when its runtime starts):

- a TPU found by :func:`utils.runtime.detect` -> ``PJRT_DEVICE=TPU``;
- anything else -> ``PJRT_DEVICE=CPU``: XLA compiles for the host CPU, so the same lazy-tensor
  code runs (and teaches) without a TPU. torch_xla 2.9 has no CUDA backend.

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
  ``MpDeviceLoader`` and ``xm.optimizer_step``) and for eager PyTorch on the CPU.
- :func:`benchmark`: images/s and step time of that loop on any device.
- :func:`launch_data_parallel`: data-parallel training on every device with ``torch_xla.launch``,
  in a fresh process (a process that has used its XLA device cannot launch), whose replicas
  report their shard sizes and a checksum of their weights back to the caller. Tested on the CPU
  backend only; the TPU path (one process per chip, ``xm.optimizer_step``) follows torch_xla's
  documented pattern.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset  # noqa: E402

from utils.fresh_process import FreshProcessError, run_python  # noqa: E402
from utils.torch.models import SeedCNN, images_to_float  # noqa: E402

__all__ = [
    "PJRT_CHOICE",
    "BenchResult",
    "DataParallelResult",
    "ReplicaReport",
    "TrainLog",
    "benchmark",
    "describe_device",
    "device",
    "evaluate",
    "launch_data_parallel",
    "make_loader",
    "metrics_delta",
    "metrics_summary",
    "pad_to_bucket",
    "runtime_started",
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
    lines = [PJRT_CHOICE, f"torch {torch.__version__}, torch_xla {torch_xla.__version__}"]
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
    reads of one value), ``fallbacks`` (``aten::`` op name -> calls that ran on the CPU because
    the op has no XLA lowering) and ``fallback_count`` (their sum).

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
    return {
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
    ``torch_xla.sync()`` (``MpDeviceLoader`` issues one per batch). ``xm.optimizer_step``
    all-reduces the gradients when several replicas train (one replica: a plain step).
    """
    optimizer.zero_grad()
    loss = loss_fn(model(images_to_float(images)), labels)
    loss.backward()
    if _is_xla(images.device):
        xm.optimizer_step(optimizer)
    else:
        optimizer.step()
    return loss.detach()


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
) -> TrainLog:
    """Train ``model`` (already on ``dev``) for ``epochs`` passes or ``max_steps`` steps.

    The losses stay on the device until the end (reading one each step would stall the device
    every step) and are then read once.
    """
    model.train()
    log = TrainLog()
    device_losses: list[torch.Tensor] = []
    start = time.perf_counter()
    for _ in range(epochs):
        for images, labels in _device_batches(loader, dev):
            device_losses.append(train_step(model, images, labels, optimizer))
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


@dataclass(frozen=True)
class BenchResult:
    """Throughput of :func:`benchmark` (timed steps only, warm-up excluded)."""

    device: str
    images_per_s: float
    step_ms: float
    steps: int
    batch_size: int
    warmup_s: float


def benchmark(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    dev: torch.device,
    batch_size: int,
    steps: int,
    warmup_steps: int = 3,
    lr: float = 0.01,
    seed: int = 0,
) -> BenchResult:
    """Train a fresh :class:`SeedCNN` on ``dev``: ``warmup_steps`` untimed (compilation on XLA),
    then ``steps`` timed steps. Same loop, loader and model for eager CPU and XLA."""
    torch.manual_seed(seed)
    model = SeedCNN().to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    needed = (warmup_steps + steps) * batch_size
    reps = -(-needed // len(labels))
    x = np.concatenate([images] * reps)[:needed]
    y = np.concatenate([labels] * reps)[:needed]
    n_warm = warmup_steps * batch_size
    first = make_loader(x[:n_warm], y[:n_warm], batch_size=batch_size, drop_last=True)
    rest = make_loader(x[n_warm:], y[n_warm:], batch_size=batch_size, drop_last=True)
    warm = train(model, first, optimizer, dev=dev)
    timed = train(model, rest, optimizer, dev=dev)
    return BenchResult(
        device=str(dev),
        images_per_s=timed.images / timed.seconds,
        step_ms=1000 * timed.seconds / timed.steps,
        steps=timed.steps,
        batch_size=batch_size,
        warmup_s=warm.seconds,
    )


def weights_checksum(model: nn.Module) -> str:
    """SHA-256 of all parameters' bytes (on the host): equal strings = bit-identical weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------- several devices


@dataclass(frozen=True)
class ReplicaReport:
    """What one replica of :func:`launch_data_parallel` reports back."""

    ordinal: int
    world_size: int
    device: str
    shard_size: int
    batch_size: int
    global_batch: int
    steps: int
    first_loss: float
    last_loss: float
    compile_count: int
    weights_sha256: str
    weights_sum: float


@dataclass(frozen=True)
class DataParallelResult:
    """Replica reports sorted by ordinal, plus the launcher process's output (for debugging)."""

    replicas: list[ReplicaReport]
    log: str

    @property
    def identical_weights(self) -> bool:
        """True when every replica ended with bit-identical weights."""
        return len({r.weights_sha256 for r in self.replicas}) == 1


_BARRIERS: dict[str, threading.Barrier] = {}
_SHARED_GRADS: dict[str, dict[int, list[torch.Tensor]]] = {}
_THREADS_LOCK = threading.Lock()
_INIT_LOCK = threading.Lock()


def _thread_barrier(key: str, parties: int) -> threading.Barrier:
    """One ``threading.Barrier`` per key, shared by the replica threads of this process."""
    with _THREADS_LOCK:
        _SHARED_GRADS.setdefault(key, {})
        return _BARRIERS.setdefault(key, threading.Barrier(parties))


def _host_mean_gradients(model: nn.Module, key: str, ordinal: int, barrier: threading.Barrier):
    """Average the gradients of thread replicas through host memory (XLA:CPU stand-in).

    What ``xm.optimizer_step`` does with an XLA all-reduce on a TPU, done by hand: every replica
    copies its gradients to the host, waits for the others, and sets the mean of all of them
    (summed in ordinal order, so every replica gets bit-identical values) as its gradient.
    Needed because XLA collectives between ``CPU_NUM_DEVICES`` devices hang in torch_xla 2.9
    (pytorch/xla#9089, seen here too).
    """
    params = [p for p in model.parameters() if p.grad is not None]
    shared = _SHARED_GRADS[key]
    shared[ordinal] = [p.grad.detach().cpu() for p in params]
    barrier.wait()  # every replica has posted its gradients
    replicas = [shared[i] for i in sorted(shared)]
    for i, p in enumerate(params):
        mean = torch.stack([grads[i] for grads in replicas]).sum(dim=0) / len(replicas)
        p.grad = mean.to(p.device)
    barrier.wait()  # everyone has read them before the next step overwrites them


def _dp_worker(index: int, workdir: str) -> None:
    """One replica (called by ``torch_xla.launch`` with its index): train, then report to a file."""
    config = json.loads((Path(workdir) / "config.json").read_text())
    data = np.load(Path(workdir) / "data.npz")
    dev = torch_xla.device()
    world, ordinal = xr.world_size(), xr.global_ordinal()
    cpu_threads = xr.device_type() == "CPU" and world > 1
    barrier = _thread_barrier(workdir, world) if cpu_threads else None

    # Every replica starts from the same weights: same seed, built under a lock because thread
    # replicas share torch's global random generator. (xm.broadcast_master_param(model) is the
    # collective way to do it on a TPU.)
    with _INIT_LOCK:
        torch.manual_seed(config["seed"])
        model = SeedCNN()
    model.to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    dataset = to_tensor_dataset(data["x"], data["y"])
    sampler = DistributedSampler(
        dataset, num_replicas=world, rank=ordinal, shuffle=True, seed=config["seed"]
    )
    loader = DataLoader(dataset, batch_size=config["batch_size"], sampler=sampler, drop_last=True)
    losses: list[torch.Tensor] = []
    for epoch in range(config["epochs"]):
        sampler.set_epoch(epoch)
        for images, labels in pl.MpDeviceLoader(loader, dev):
            if barrier is None:  # TPU: xm.optimizer_step all-reduces the gradients on the chips
                losses.append(train_step(model, images, labels, optimizer))
                continue
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(images_to_float(images)), labels)
            loss.backward()
            torch_xla.sync()  # gradients computed on this replica's device
            _host_mean_gradients(model, workdir, ordinal, barrier)
            optimizer.step()
            losses.append(loss.detach())
    xm.wait_device_ops()
    report = ReplicaReport(
        ordinal=ordinal,
        world_size=world,
        device=str(dev),
        shard_size=len(sampler),
        batch_size=config["batch_size"],
        global_batch=config["batch_size"] * world,
        steps=len(losses),
        first_loss=float(losses[0].cpu()) if losses else float("nan"),
        last_loss=float(losses[-1].cpu()) if losses else float("nan"),
        compile_count=_metric("CompileTime")[0],
        weights_sha256=weights_checksum(model),
        weights_sum=float(sum(p.detach().cpu().double().sum() for p in model.parameters())),
    )
    out = Path(workdir) / f"replica_{ordinal}.json"
    out.with_suffix(".tmp").write_text(json.dumps(asdict(report)))
    out.with_suffix(".tmp").replace(out)
    print(f"replica {ordinal}/{world} on {dev}: {report.steps} steps", flush=True)


def _launch_main(workdir: str) -> None:
    """Entry point of the launcher process: one replica per device via ``torch_xla.launch``."""
    torch_xla.launch(_dp_worker, args=(workdir,))


def launch_data_parallel(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    cpu_devices: int = 4,
    batch_size: int = 32,
    epochs: int = 1,
    lr: float = 0.01,
    momentum: float = 0.9,
    seed: int = 0,
    timeout_s: float = 600.0,
) -> DataParallelResult:
    """Train :class:`SeedCNN` data-parallel on every device, in a fresh process.

    ``torch_xla.launch`` runs one replica per device (TPU: one process per chip; CPU: one thread
    per virtual device, ``CPU_NUM_DEVICES=cpu_devices``). Each replica reads its shard
    (``DistributedSampler``), and ``xm.optimizer_step`` all-reduces the gradients, so all replicas
    apply the same update. (On the CPU backend the replicas average their gradients through host
    memory instead: XLA:CPU collectives hang in torch_xla 2.9, pytorch/xla#9089.)

    The launch happens in a new Python process because torch_xla refuses to launch from a
    process whose XLA runtime is already running (a notebook that used the device). Replicas
    write their :class:`ReplicaReport` to a temporary folder, read back here.

    Raises:
        FreshProcessError: the launcher process failed, ran past ``timeout_s`` or wrote no
            reports (the tail of its output is in the message).
        RuntimeError: on a TPU, this process already holds the chips (restart the runtime and
            call this before anything opens the XLA device).
    """
    pjrt = os.environ.get("PJRT_DEVICE", "CPU")
    if pjrt == "TPU" and runtime_started():
        raise RuntimeError(
            "This process already holds the TPU, so a launcher process cannot get the chips. "
            "Restart the runtime and call launch_data_parallel before using the XLA device "
            "(or run it from a script)."
        )
    with tempfile.TemporaryDirectory(prefix="xla_dp_") as workdir:
        np.savez(Path(workdir) / "data.npz", x=images, y=labels)
        config = {"batch_size": batch_size, "epochs": epochs, "lr": lr, "momentum": momentum}
        config["seed"] = seed
        (Path(workdir) / "config.json").write_text(json.dumps(config))
        env = {"PJRT_DEVICE": pjrt}
        if pjrt == "CPU":
            env["CPU_NUM_DEVICES"] = str(cpu_devices)
        code = f"from utils.torch.xla import _launch_main; _launch_main({workdir!r})"
        done = run_python(["-c", code], env=env, timeout_s=timeout_s)  # raises with the log tail
        log = done.stdout + done.stderr
        files = sorted(Path(workdir).glob("replica_*.json"))
        if not files:
            raise FreshProcessError(f"the launcher wrote no replica reports:\n{log[-3000:]}")
        reports = [ReplicaReport(**json.loads(f.read_text())) for f in files]
    return DataParallelResult(sorted(reports, key=lambda r: r.ordinal), log)
