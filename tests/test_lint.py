"""The code is ruff-clean and ruff-formatted: utils, tests and the notebooks' code cells."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(command: list[str]) -> None:
    assert RUFF, "ruff is not installed: make test installs it from requirements.txt"
    done = subprocess.run([RUFF, *command, "utils", "tests", "notebooks"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"run `make format`:\n{done.stdout[-3000:]}{done.stderr[-1000:]}"
