"""utils.torch.launch: fresh-process plumbing and debug-output parsing. SPMD on simulated CPU
devices matching one device is 06's check cell (nbval runs it in `make test`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_xla")

from utils.fresh_process import FreshProcessError, result_of  # noqa: E402
from utils.torch import launch  # noqa: E402


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
