"""The Makefile's guards (issue 16): an existing .venv built with another Python, make run TIMEOUT.

Runs ``make`` on a copy of the Makefile in a temporary folder, only targets that install nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _course_copy(tmp_path: Path, venv_version: str | None, python_runs: bool = True) -> Path:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "requirements.txt", tmp_path / "requirements.txt")
    if venv_version is not None:
        (tmp_path / ".venv" / "bin").mkdir(parents=True)
        (tmp_path / ".venv" / "pyvenv.cfg").write_text(
            f"home = /somewhere/bin\nversion = {venv_version}\n"
        )
        if python_runs:
            (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return tmp_path


def _make(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-s", "-C", str(folder), *args], capture_output=True, text=True, timeout=60
    )


def test_venv_built_with_another_python_is_refused(tmp_path: Path) -> None:
    """Before: only $(PYTHON) was checked; a 3.13 .venv went on to pip install into it."""
    proc = _make(_course_copy(tmp_path, "3.13.1"), "check-venv")
    assert proc.returncode != 0
    assert "The existing .venv was built with Python 3.13" in proc.stdout
    assert "rm -rf .venv && make setup PYTHON=python3.11" in proc.stdout


def test_broken_venv_is_refused(tmp_path: Path) -> None:
    proc = _make(_course_copy(tmp_path, "3.11.7", python_runs=False), "check-venv")
    assert proc.returncode != 0 and "The existing .venv is broken" in proc.stdout


@pytest.mark.parametrize("version", ["3.11.7", None])
def test_good_or_missing_venv_passes(tmp_path: Path, version: str | None) -> None:
    proc = _make(_course_copy(tmp_path, version), "check-venv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_setup_runs_the_venv_check_before_installing(tmp_path: Path) -> None:
    # A dry run (-n) executes nothing: it lists the recipes in the order make would run them.
    proc = _make(_course_copy(tmp_path, "3.9.18"), "-n", "setup")
    text = proc.stdout
    assert "pyvenv.cfg" in text and "pip install" in text
    assert text.index("pyvenv.cfg") < text.index("pip install")


def test_make_run_passes_timeout(tmp_path: Path) -> None:
    folder = _course_copy(tmp_path, None)
    default = _make(folder, "-n", "run")
    text = default.stdout
    assert "--timeout 1800" in text, text + default.stderr
    custom = _make(folder, "-n", "run", "TIMEOUT=60", "NB=04")
    assert "--timeout 60 --only 04" in custom.stdout
