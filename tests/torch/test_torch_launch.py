"""utils.torch.launch: fresh-process plumbing, debug-output parsing, trace summaries, and SPMD
on simulated CPU devices (each in a fresh process: SPMD and CPU_NUM_DEVICES are per process)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_xla")

from utils.fresh_process import FreshProcessError  # noqa: E402
from utils.torch import launch  # noqa: E402

SPMD_SCRIPT = """
import json, sys
import numpy as np, torch, torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset, default_collate
from utils.torch import xla
from utils.torch.models import SeedCNN, images_to_float

spmd = sys.argv[1] == "spmd"
if spmd:
    xla.enable_spmd()  # the guarded xr.use_spmd(): fine before any tensor
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


def test_child_env_sets_simulated_devices_on_cpu_only() -> None:
    assert launch.child_env(4, env={"PJRT_DEVICE": "CPU"}) == {
        "PJRT_DEVICE": "CPU",
        "CPU_NUM_DEVICES": "4",
    }
    assert launch.child_env(4, env={}) == {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4"}
    assert launch.child_env(4, env={"PJRT_DEVICE": "TPU"}) == {"PJRT_DEVICE": "TPU"}
    with pytest.raises(ValueError, match="simulated_devices"):
        launch.child_env(0)


def test_tpu_held_line() -> None:
    assert launch.tpu_held_line(runtime_started=True, env={"PJRT_DEVICE": "CPU"}) is None
    assert launch.tpu_held_line(runtime_started=False, env={"PJRT_DEVICE": "TPU"}) is None
    line = launch.tpu_held_line(runtime_started=True, env={"PJRT_DEVICE": "TPU"})
    assert line.startswith("Skipped") and "\n" not in line


def test_run_script_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="run the cell that writes it"):
        launch.run_script(tmp_path / "missing.py")
    quiet = tmp_path / "quiet.py"
    quiet.write_text("print('hello')\n")
    with pytest.raises(FreshProcessError, match="RESULT"):
        launch.run_script(quiet, timeout_s=60)
    assert launch.run_script(quiet, require_result=False, timeout_s=60).stdout == "hello\n"
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
    assert cause["graph"] == "step" and cause["inputs"] == 13 and cause["outputs"] == 1
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
    run = launch.run_script(
        script, env={"PT_XLA_DEBUG_LEVEL": "2"}, require_result=False, timeout_s=300
    )
    causes = launch.compilation_causes(run.stdout + run.stderr, keep_files=["recompile.py"])
    assert [c["cause"] for c in causes] == ["user torch_xla.sync"] * 2  # the second 4 is cached
    assert all(c["frames"] == ["<module> (recompile.py:5)"] for c in causes)


def test_spmd_on_two_simulated_devices_matches_one_device(tmp_path: Path) -> None:
    script = tmp_path / "spmd.py"
    script.write_text(SPMD_SCRIPT)
    spmd = launch.run_script(script, ["spmd"], simulated_devices=2, timeout_s=400).result
    one = launch.run_script(script, ["one"], simulated_devices=1, timeout_s=400).result
    assert spmd["spmd"] and spmd["devices"] == 2 and spmd["spec"] == "{devices=[2,1,1,1]0,1}"
    assert not one["spmd"] and one["devices"] == 1
    assert len(spmd["losses"]) == len(one["losses"]) == 4
    assert spmd["losses"] == pytest.approx(one["losses"], abs=1e-4)
    assert spmd["weights"] == pytest.approx(one["weights"], abs=1e-3)
    assert os.environ.get("CPU_NUM_DEVICES") is None  # the children got it, not this process
