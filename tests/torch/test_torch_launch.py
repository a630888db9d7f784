"""utils.torch.launch: fresh-process plumbing, debug-output parsing, and SPMD
on simulated CPU devices (each in a fresh process: SPMD and CPU_NUM_DEVICES are per process)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_xla")

from utils.fresh_process import FreshProcessError, result_of  # noqa: E402
from utils.torch import launch  # noqa: E402

SPMD_SCRIPT = """
import json, sys
import numpy as np, torch, torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset, default_collate
from utils.torch.models import SeedCNN, images_to_float

spmd = sys.argv[1] == "spmd"
if spmd:
    xr.use_spmd()  # first: before any tensor touches the device
n = xr.global_runtime_device_count()
device = torch_xla.device()
torch.manual_seed(0)
model = SeedCNN().to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
rng = np.random.default_rng(0)
x = torch.from_numpy(rng.integers(0, 256, (64, 3, 32, 32), dtype=np.uint8))
y = torch.from_numpy(rng.integers(0, 10, 64))
loader = DataLoader(TensorDataset(x, y), batch_size=16, drop_last=True,
                    collate_fn=lambda b: dict(zip(("x", "y"), default_collate(b))))
sharding = None
if spmd:
    mesh = xs.Mesh(np.arange(n), (n,), ("data",))
    sharding = {"x": xs.ShardingSpec(mesh, ("data", None, None, None)),
                "y": xs.ShardingSpec(mesh, ("data",))}
losses = []
for b in pl.MpDeviceLoader(loader, device, input_sharding=sharding):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images_to_float(b["x"])), b["y"])
    loss.backward()
    opt.step()
    losses.append(loss.detach())
spec = torch_xla._XLAC._get_xla_sharding_spec(b["x"]) if spmd else ""
print("RESULT " + json.dumps({
    "devices": n, "spmd": xr.is_spmd(), "spec": spec,
    "losses": torch.stack(losses).cpu().tolist(),
    "weights": [float(p.detach().cpu().double().sum()) for p in model.parameters()],
}))
"""


def test_children_get_the_pjrt_backend_and_the_simulated_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    script = tmp_path / "env.py"
    keys = ("PJRT_DEVICE", "CPU_NUM_DEVICES", "EXTRA")
    script.write_text(
        f"import json, os\nprint('RESULT ' + json.dumps([os.environ[k] for k in {keys}]))"
    )
    run = launch.run_script(script, simulated_devices=4, env={"EXTRA": "x"}, timeout_s=60)
    assert result_of(run.stdout) == ["CPU", "4", "x"]


def test_tpu_held_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    assert launch.tpu_held_line(runtime_started=True) is None
    monkeypatch.setenv("PJRT_DEVICE", "TPU")
    assert launch.tpu_held_line(runtime_started=False) is None
    line = launch.tpu_held_line(runtime_started=True)
    assert line.startswith("Skipped") and "\n" not in line


def test_run_script_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="run the cell that writes it"):
        launch.run_script(tmp_path / "missing.py")
    quiet = tmp_path / "quiet.py"
    quiet.write_text("print('hello')\n")
    assert launch.run_script(quiet, timeout_s=60).stdout == "hello\n"
    failing = tmp_path / "failing.py"
    failing.write_text("raise SystemExit(3)\n")
    with pytest.raises(FreshProcessError, match="exited with 3"):
        launch.run_script(failing, timeout_s=60)


BAR = "=" * 40
CANNED = (
    "\n".join(
        "Compilation Analysis: " + line
        for line in [
            BAR,
            "Compilation Cause",
            "  most likely user code trying to access tensor value before torch_xla.sync",
            "Graph Info: ",
            "  Graph Name: step",
            "  Graph Hash: 7842dedbb026bddca1531becabed01db",
            "  Number of Graph Inputs: 13",
            "  Number of Graph Outputs: 1",
            "Python Frame Triggered Execution: ",
            "  step (/home/someone/project/train.py:27)",
            "  inner (/usr/lib/python3.11/contextlib.py:81)",
            "  <module> (/home/someone/project/train.py:30)",
            "-" * 40,
        ]
    )
    + "\nExecution Analysis: Execution Cause\nExecution Analysis:   user torch_xla.sync\n"
)


def test_compilation_causes_drop_paths_and_hashes() -> None:
    (cause,) = launch.compilation_causes(CANNED, keep_files=["train.py"])
    assert cause["cause"].startswith("most likely user code trying to access tensor value")
    assert cause["frames"] == ["step (train.py:27)", "<module> (train.py:30)"]
    assert "someone" not in json.dumps(cause) and "7842" not in json.dumps(cause)
    (everything,) = launch.compilation_causes(CANNED)
    assert len(everything["frames"]) == 3
    assert launch.compilation_causes("no debug output here") == []


def test_debug_level_2_reports_a_recompilation(tmp_path: Path) -> None:
    script = tmp_path / "recompile.py"
    script.write_text(
        "import torch, torch_xla\n"
        "d = torch_xla.device()\n"
        "for n in (3, 4, 4):\n"
        "    y = (torch.ones(n, device=d) * 2).sum()\n"
        "    torch_xla.sync()\n"
    )
    run = launch.run_script(script, env={"PT_XLA_DEBUG_LEVEL": "2"}, timeout_s=300)
    causes = launch.compilation_causes(run.stdout + run.stderr, keep_files=["recompile.py"])
    assert [c["cause"] for c in causes] == ["user torch_xla.sync"] * 2  # the second 4 is cached
    assert all(c["frames"] == ["<module> (recompile.py:5)"] for c in causes)


def test_spmd_on_two_simulated_devices_matches_one_device(tmp_path: Path) -> None:
    script = tmp_path / "spmd.py"
    script.write_text(SPMD_SCRIPT)
    spmd = result_of(launch.run_script(script, ["spmd"], simulated_devices=2, timeout_s=400).stdout)
    one = result_of(launch.run_script(script, ["one"], simulated_devices=1, timeout_s=400).stdout)
    assert spmd["spmd"] and spmd["devices"] == 2 and spmd["spec"] == "{devices=[2,1,1,1]0,1}"
    assert not one["spmd"] and one["devices"] == 1
    assert len(spmd["losses"]) == len(one["losses"]) == 4
    assert spmd["losses"] == pytest.approx(one["losses"], abs=1e-4)
    assert spmd["weights"] == pytest.approx(one["weights"], abs=1e-3)
    assert os.environ.get("CPU_NUM_DEVICES") is None  # the children got it, not this process
