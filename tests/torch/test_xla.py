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
torch_xla = pytest.importorskip("torch_xla")

from torch import nn  # noqa: E402

from utils.fresh_process import run_python_json  # noqa: E402
from utils.torch import xla  # noqa: E402
from utils.torch.models import SeedCNN, images_to_float  # noqa: E402


def _images(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), np.arange(n) % 10


def _linear(out_features: int) -> nn.Module:
    """A model that compiles in well under a second (distinct sizes = distinct graphs)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, out_features))


def test_seed_cnn_matches_the_keras_seed_model() -> None:
    model = SeedCNN()
    assert sum(p.numel() for p in model.parameters()) == 122_570  # Keras' summary of the seed
    out = model(images_to_float(torch.zeros(2, 3, 32, 32, dtype=torch.uint8)))
    assert out.shape == (2, 10)


def test_pjrt_device_is_cpu_here() -> None:
    assert os.environ["PJRT_DEVICE"] == "CPU"
    assert torch_xla.device().type == "xla"


def test_describe_device_names_the_backend_versions_and_devices() -> None:
    text = xla.describe_device()
    assert text.startswith("PJRT_DEVICE=CPU,") and "1 visible" in text and xla.runtime_started()
    # Stored outputs hold on any machine: no "+cu128"/"+cpu" build tag of this machine's torch.
    assert f"torch {torch.__version__.split('+')[0]}," in text and "+" not in text


def test_describe_device_leaves_an_unopened_tpu_alone() -> None:
    """A fresh process told PJRT_DEVICE=TPU: describing must not open it."""
    code = (
        "import json; from utils.torch import xla; text = xla.describe_device(); "
        "print('RESULT ' + json.dumps([text, xla.runtime_started()]))"
    )
    text, started = run_python_json(code, env={"PJRT_DEVICE": "TPU"}, timeout_s=120)
    assert not started
    assert "PJRT_DEVICE=TPU" in text and "not opened yet" in text


def test_matching_pairs_pass_and_a_mismatch_is_named_with_its_fix() -> None:
    assert xla.torch_xla_problem() is None  # the course's own environment matches
    assert xla.torch_xla_problem({"torch": "2.9.0+cu128", "torch_xla": "2.9.0"}) is None
    assert xla.torch_xla_problem({"torch": "2.11.0", "torch_xla": None}) is None  # no torch_xla
    text = xla.torch_xla_problem({"torch": "2.10.0", "torch_xla": "2.9.0"})
    assert "torch 2.10.0 does not match torch_xla 2.9.0" in text and "pytorch/xla#8292" in text
    assert "pip install torch==2.9.0 torch_xla==2.9.0" in text and "restart" in text
    assert "torch (not installed)" in xla.torch_xla_problem({"torch": None, "torch_xla": "2.9.0"})


def test_loader_gives_channels_first_uint8_and_drop_last_drops() -> None:
    x, y = _images(10)
    batches = list(xla.make_loader(x, y, batch_size=4))
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert batches[0][0].shape == (4, 3, 32, 32) and batches[0][0].dtype == torch.uint8
    assert torch.equal(batches[0][0][1].permute(1, 2, 0), torch.from_numpy(x[1]))
    assert [b[0].shape[0] for b in xla.make_loader(x, y, batch_size=4, drop_last=True)] == [4, 4]


def test_pad_to_bucket() -> None:
    padded, n = xla.pad_to_bucket(torch.ones(5), (4, 8, 16))
    assert n == 5 and padded.shape == (8,) and padded[5:].sum() == 0
    with pytest.raises(ValueError):
        xla.pad_to_bucket(torch.ones(17), (4, 8, 16))


def test_metrics_count_compilations_executions_transfers_and_fallbacks() -> None:
    dev = torch_xla.device()
    before = xla.metrics_summary()
    a = torch.arange(12.0).reshape(3, 4).to(dev)
    b = (a * 2 + 1).sum(dim=0)
    traced = xla.metrics_delta(before, xla.metrics_summary())
    assert traced["compile_count"] == 0 and traced["execute_count"] == 0  # lazy: nothing ran yet
    assert traced["transfers_to_device"] >= 1

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
    assert isinstance(fell_back["compile_time_s"], float) and fell_back["compile_time_s"] > 0


def _compiles_over_epochs(drop_last: bool, out_features: int) -> list[int]:
    dev = torch_xla.device()
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
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = SeedCNN().to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    y = np.arange(32) % 4  # learnable: the class sets the image's brightness
    x = np.broadcast_to((40 + 50 * y)[:, None, None, None], (32, 32, 32, 3)).astype(np.uint8)
    loader = xla.make_loader(x, y, batch_size=32, drop_last=True)
    losses = xla.train(model, loader, optimizer, dev=dev, epochs=12)
    assert len(losses) == 12 and all(isinstance(v, float) for v in losses)
    assert np.mean(losses[-3:]) < losses[0] - 0.1
    acc = xla.evaluate(model, xla.make_loader(x, y, batch_size=16), dev=dev)
    assert 0.0 <= acc <= 1.0


def test_evaluation_counts_every_image_through_one_graph() -> None:
    """A last, smaller batch (10 images at batch 4: 4, 4, 2) is padded and masked: the accuracy is
    the plain one over all 10 images, and no second evaluation graph compiles for its shape."""
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = _linear(11).to(dev)  # a size no other test compiles
    x, y = _images(10, seed=3)
    images = torch.from_numpy(x).permute(0, 3, 1, 2)
    with torch.no_grad():  # the plain accuracy, eagerly on the CPU, all 10 images at once
        hits = model.cpu()(images_to_float(images)).argmax(1) == torch.from_numpy(y)
    plain = float(hits.float().mean())
    model.to(dev)
    compiles = []
    for n in (8, 10):  # whole batches first, then one more, partial batch of the same size
        before = xla.metrics_summary()
        accuracy = xla.evaluate(model, xla.make_loader(x[:n], y[:n], batch_size=4), dev=dev)
        compiles.append(xla.metrics_delta(before, xla.metrics_summary())["compile_count"])
    assert accuracy == pytest.approx(plain)
    assert compiles[0] >= 1 and compiles[1] == 0, compiles  # the partial batch reused the graph
    cpu = xla.evaluate(model.cpu(), xla.make_loader(x, y, batch_size=4), dev=torch.device("cpu"))
    assert cpu == pytest.approx(plain)


def test_eager_cpu_path_runs_the_same_loop() -> None:
    torch.manual_seed(0)
    model = _linear(10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = _images(8)
    losses = xla.train(
        model, xla.make_loader(x, y, batch_size=4), optimizer, dev=torch.device("cpu")
    )
    assert len(losses) == 2


def test_matmul_peak_is_measured_by_the_one_peak_function() -> None:
    for dev in (torch_xla.device(), torch.device("cpu")):
        assert xla.matmul_peak(dev, n=64, repeats=1)() > 0
    assert xla.matmul_peak(torch.device("cpu"), n=8, dtype=torch.bfloat16, repeats=1)() > 0


def test_steps_runner_runs_the_given_step_on_fresh_batches() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 40)
    loader = xla.make_loader(images, labels, batch_size=8, shuffle=True, drop_last=True)
    seen = []

    def step(x, y):
        seen.append((tuple(x.shape), x.device.type))
        return y.float().sum()

    for dev in (torch.device("cpu"), torch_xla.device()):
        run = xla.steps_runner(step, loader, dev=dev, steps=3)
        assert run() == 24 and run() == 24
        assert seen[-6:] == [((8, 3, 32, 32), dev.type)] * 6
    with pytest.raises(ValueError, match="cannot make"):
        xla.steps_runner(step, loader, dev=torch.device("cpu"), steps=6)


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

    losses = xla.train(
        model, xla.make_loader(x, y, batch_size=4), optimizer, dev=torch.device("cpu"), step=step
    )
    assert seen == [4, 4] and len(losses) == 2
