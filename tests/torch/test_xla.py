"""Tests for utils.torch.xla and utils.torch.models on the XLA CPU device (``PJRT_DEVICE=CPU``).

torch_xla reads ``PJRT_DEVICE`` when its runtime starts, so it is set before the import. The
multi-device (SPMD) tests are in test_torch_launch.py and run in fresh processes.
"""

from __future__ import annotations

import os

os.environ["PJRT_DEVICE"] = "CPU"  # before torch_xla is imported (by utils.torch.xla)

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_xla")

from torch import nn  # noqa: E402

from utils.fresh_process import run_python_json  # noqa: E402
from utils.torch import xla  # noqa: E402
from utils.torch.models import SeedCNN, count_parameters, images_to_float  # noqa: E402


def _images(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), np.arange(n) % 10


def _linear(out_features: int) -> nn.Module:
    """A model that compiles in well under a second (distinct sizes = distinct graphs)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, out_features))


def test_seed_cnn_matches_the_keras_seed_model() -> None:
    model = SeedCNN()
    assert count_parameters(model) == 122_570  # Keras' model.summary() of the seed's CNN
    out = model(images_to_float(torch.zeros(2, 3, 32, 32, dtype=torch.uint8)))
    assert out.shape == (2, 10)


def test_pjrt_choice_is_cpu_here() -> None:
    assert os.environ["PJRT_DEVICE"] == "CPU"
    assert "PJRT_DEVICE=CPU" in xla.PJRT_CHOICE
    assert xla.device().type == "xla"


def test_describe_device_opens_the_cpu_device_but_can_describe_without_opening() -> None:
    assert "devices visible to this process" in xla.describe_device()
    assert xla.runtime_started()
    closed = xla.describe_device(open_device=False)
    assert "not opened yet" in closed and "PJRT_DEVICE=CPU" in closed
    # Stored outputs hold on any machine: no "+cu128"/"+cpu" build tag of this machine's torch.
    versions = closed.splitlines()[1]
    assert versions.startswith(f"torch {torch.__version__.split('+')[0]},") and "+" not in versions


def test_describe_device_leaves_an_unopened_tpu_alone() -> None:
    """A fresh process told PJRT_DEVICE=TPU (on a fake v5e-1): describing must not open it."""
    code = (
        "import json; from utils.torch import xla; text = xla.describe_device(); "
        "print('RESULT ' + json.dumps([text, xla.runtime_started()]))"
    )
    env = {"PJRT_DEVICE": "TPU", "TPU_ACCELERATOR_TYPE": "v5e-1"}
    text, started = run_python_json(code, env=env, timeout_s=120)
    assert not started
    assert "not opened yet (v5e-1, 1 chip(s)" in text


def test_choose_pjrt_device_keeps_a_preset_value() -> None:
    env = {"PJRT_DEVICE": "TPU"}
    assert "kept" in xla.choose_pjrt_device(env)
    assert env["PJRT_DEVICE"] == "TPU"


def test_loader_gives_channels_first_uint8_and_drop_last_drops() -> None:
    x, y = _images(10)
    batches = list(xla.make_loader(x, y, batch_size=4))
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert batches[0][0].shape == (4, 3, 32, 32) and batches[0][0].dtype == torch.uint8
    assert torch.equal(batches[0][0][1].permute(1, 2, 0), torch.from_numpy(x[1]))
    assert [b[0].shape[0] for b in xla.make_loader(x, y, batch_size=4, drop_last=True)] == [4, 4]
    with pytest.raises(ValueError):
        xla.to_tensor_dataset(x[..., :1], y)


def test_pad_to_bucket() -> None:
    padded, n = xla.pad_to_bucket(torch.ones(5), (4, 8, 16))
    assert n == 5 and padded.shape == (8,) and padded[5:].sum() == 0
    with pytest.raises(ValueError):
        xla.pad_to_bucket(torch.ones(17), (4, 8, 16))


def test_metrics_count_compilations_executions_transfers_and_fallbacks() -> None:
    dev = xla.device()
    before = xla.metrics_summary()
    a = torch.arange(12.0).reshape(3, 4).to(dev)
    b = (a * 2 + 1).sum(dim=0)
    traced = xla.metrics_delta(before, xla.metrics_summary())
    assert traced["compile_count"] == 0 and traced["execute_count"] == 0  # lazy: nothing ran yet
    assert traced["transfers_to_device"] >= 1

    import torch_xla

    torch_xla.sync()
    synced = xla.metrics_delta(before, xla.metrics_summary())
    assert synced["compile_count"] == 1 and synced["execute_count"] == 1

    value = b.sum().item()  # a new graph (compile + run) and a read of one value
    read = xla.metrics_delta(before, xla.metrics_summary())
    assert value == pytest.approx(sum(range(12)) * 2 + 12)
    assert read["local_scalar_dense"] == 1 and read["transfers_from_device"] >= 1
    assert read["compile_count"] == 2

    med = a.median()  # no XLA lowering in torch_xla 2.9: runs on the CPU
    assert float(med.cpu()) == pytest.approx(5.0)
    fell_back = xla.metrics_delta(before, xla.metrics_summary())
    assert fell_back["fallbacks"].get("aten::median") == 1
    assert fell_back["fallback_count"] >= 1
    assert isinstance(fell_back["compile_time_s"], float) and fell_back["compile_time_s"] > 0


def _compiles_over_epochs(drop_last: bool, out_features: int) -> list[int]:
    dev = xla.device()
    torch.manual_seed(0)
    model = _linear(out_features).to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _images(10)
    loader = xla.make_loader(x, y, batch_size=4, drop_last=drop_last)
    counts = []
    for _ in range(3):
        before = xla.metrics_summary()
        xla.train(model, loader, optimizer, dev=dev)
        counts.append(xla.metrics_delta(before, xla.metrics_summary())["compile_count"])
    return counts


def test_partial_last_batch_recompiles_and_drop_last_stops_it() -> None:
    ragged = _compiles_over_epochs(drop_last=False, out_features=7)
    even = _compiles_over_epochs(drop_last=True, out_features=9)
    assert sum(ragged) > sum(even)  # the batch of 2 is a new shape: more graphs to compile
    assert ragged[1:] == [0, 0] and even[1:] == [0, 0]  # after warm-up: nothing new
    assert even[0] >= 1


def test_training_lowers_the_loss_on_a_tiny_set() -> None:
    dev = xla.device()
    torch.manual_seed(0)
    model = SeedCNN().to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    y = np.arange(32) % 4  # learnable: the class sets the image's brightness
    x = np.broadcast_to((40 + 50 * y)[:, None, None, None], (32, 32, 32, 3)).astype(np.uint8)
    loader = xla.make_loader(x, y, batch_size=32, drop_last=True)
    log = xla.train(model, loader, optimizer, dev=dev, epochs=12)
    assert log.steps == 12 and log.images == 12 * 32
    assert np.mean(log.losses[-3:]) < log.losses[0] - 0.1
    acc = xla.evaluate(model, xla.make_loader(x, y, batch_size=16), dev=dev)
    assert 0.0 <= acc <= 1.0


def test_eager_cpu_path_runs_the_same_loop() -> None:
    torch.manual_seed(0)
    model = _linear(10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _images(8)
    log = xla.train(model, xla.make_loader(x, y, batch_size=4), optimizer, dev=torch.device("cpu"))
    assert log.steps == 2 and len(log.losses) == 2


def test_metrics_report_the_persistent_cache_counters() -> None:
    summary = xla.metrics_summary()
    for key in ("persistent_cache_hit", "persistent_cache_miss", "persistent_cache_load_failure"):
        assert summary[key] == 0  # no cache in this process


def test_simulated_devices_cannot_change_once_the_runtime_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    xla.device()  # the runtime is running with one CPU device
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    assert xla.ensure_simulated_devices(1) == 1  # what it has: fine
    with pytest.raises(RuntimeError, match="already started with 1 CPU device.*Restart"):
        xla.ensure_simulated_devices(4)
    with pytest.raises(ValueError):
        xla.ensure_simulated_devices(0)


def test_enable_spmd_refuses_after_the_device_was_used() -> None:
    import torch_xla.runtime as xr

    torch.ones(2, device=xla.device())
    with pytest.raises(xla.SpmdTooLateError, match="before anything touches the XLA device"):
        xla.enable_spmd()
    assert not xr.is_spmd()  # refused before torch_xla changed anything


def test_matmul_peak_is_measured_by_the_one_peak_function() -> None:
    for dev in (xla.device(), torch.device("cpu")):
        assert xla.matmul_peak(dev, n=64, repeats=1)() > 0
    out = xla.matmul(torch.device("cpu"), n=8, dtype=torch.bfloat16)()
    assert out.dtype == torch.bfloat16 and out.shape == (8, 8)
    with pytest.raises(ValueError):
        xla.matmul(torch.device("cpu"), n=0)
    assert not hasattr(xla, "matmul_flops_per_s")


def test_steps_runner_runs_the_given_step_on_fresh_batches() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 40)
    seen = []

    def step(x, y):
        seen.append((tuple(x.shape), str(x.device)))
        return y.float().sum()

    run = xla.steps_runner(step, images, labels, dev=torch.device("cpu"), batch_size=8, steps=3)
    assert run() == 24 and run() == 24
    assert seen == [((8, 3, 32, 32), "cpu")] * 6
    with pytest.raises(ValueError, match="cannot make"):
        xla.steps_runner(step, images, labels, dev=torch.device("cpu"), batch_size=8, steps=6)


def test_train_runs_the_step_it_is_given() -> None:
    """Notebook 06 passes its own copy of train_step: every batch goes through that step."""
    torch.manual_seed(0)
    model = _linear(10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _images(8)
    seen = []

    def step(model_, images, labels, optimizer_):
        seen.append(int(labels.shape[0]))
        return xla.train_step(model_, images, labels, optimizer_)

    log = xla.train(
        model, xla.make_loader(x, y, batch_size=4), optimizer, dev=torch.device("cpu"), step=step
    )
    assert seen == [4, 4] and len(log.losses) == 2
