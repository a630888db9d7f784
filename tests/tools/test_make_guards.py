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


@pytest.mark.parametrize("version", ["3.10.13", "3.14.0"])
def test_venv_built_with_another_python_is_refused(tmp_path: Path, version: str) -> None:
    """Before: only $(PYTHON) was checked; a .venv of another Python went on to pip install."""
    proc = _make(_course_copy(tmp_path, version), "check-venv")
    assert proc.returncode != 0
    assert f"The existing .venv was built with Python {version[:4]}" in proc.stdout
    assert "needs 3.11-3.13" in proc.stdout
    assert "rm -rf .venv && make setup PYTHON=python3.13" in proc.stdout


def test_venv_elsewhere_is_checked_too(tmp_path: Path) -> None:
    """`make setup PYTHON=python3.13 VENV=...` builds and checks another venv, not .venv."""
    folder = _course_copy(tmp_path, "3.10.13")
    (folder / ".venv").rename(folder / "venv313")
    proc = _make(folder, "check-venv", "VENV=venv313")
    assert proc.returncode != 0 and "The existing venv313 was built with Python 3.10" in proc.stdout
    dry = _make(folder, "-n", "setup", "VENV=other", "PYTHON=python3.13")
    assert "other/bin/python -m pip install -q -r requirements.txt" in dry.stdout


def test_python_outside_3_11_to_3_13_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    folder = _course_copy(tmp_path, None)
    fake = tmp_path / "python3.10"
    fake.write_text(
        "#!/bin/sh\nexec "
        + sys.executable
        + ' -c "import sys; sys.version_info = (3, 10, 0); exec(sys.argv[2])" -c "$2"\n'
    )
    fake.chmod(0o755)
    proc = _make(folder, "setup", f"PYTHON={fake}")
    assert proc.returncode != 0
    assert "This course needs Python 3.11-3.13" in proc.stdout + proc.stderr
    assert not (folder / ".venv").exists()


def test_broken_venv_is_refused(tmp_path: Path) -> None:
    proc = _make(_course_copy(tmp_path, "3.11.7", python_runs=False), "check-venv")
    assert proc.returncode != 0 and "The existing .venv is broken" in proc.stdout


@pytest.mark.parametrize("version", ["3.11.7", "3.13.0", None])
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


def test_make_test_runs_every_suite(tmp_path: Path) -> None:
    """What `make test` and `make test-unit` run, read from make's dry run: the torch_xla tests,
    both nbval shards (every notebook once) and the book. A misspelt variable (`$(XLA_TEST)`)
    drops a suite silently; this fails instead."""
    folder = _course_copy(tmp_path, None)
    shutil.copytree(ROOT / "notebooks", folder / "notebooks", symlinks=True)
    shutil.copy(ROOT / "requirements-book.txt", folder / "requirements-book.txt")
    unit = _make(folder, "-n", "test-unit").stdout
    assert "-m pytest tests/torch" in unit and "--ignore=tests/torch" in unit, unit
    full = _make(folder, "-n", "test", "COURSE_CHROMIUM=/bin/sh").stdout
    assert "&& .venv/bin/python -m pytest -p no:cacheprovider tests/torch" in full, full
    assert "tests/book/build_book.py && build/venv-book/bin/python -m pytest" in full
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    shown = [n for n in notebooks if full.count(f"notebooks/{n}") == 1]
    assert shown == notebooks, f"each notebook once in make test's nbval shards: {full}"


def test_no_browser_stops_at_once_with_the_command(tmp_path: Path) -> None:
    """A fresh machine without Chromium, not root (or no apt-get): make test stops before any
    install or test, in seconds, and says the one command to run."""
    folder = _course_copy(tmp_path, None)
    fake_bin = tmp_path / "bin"  # `id -u` says 1000: not root
    fake_bin.mkdir()
    (fake_bin / "id").write_text("#!/bin/sh\necho 1000\n")
    (fake_bin / "id").chmod(0o755)
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["make", "-s", "-C", str(folder), "browser", "COURSE_CHROMIUM=/nonexistent/chromium"],
        capture_output=True, text=True, timeout=30, env=env,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "there is none at /nonexistent/chromium" in proc.stdout, proc.stdout + proc.stderr
    assert "apt-get update && apt-get install -y chromium" in proc.stdout
    ok = _make(folder, "browser", "COURSE_CHROMIUM=/bin/sh")
    assert ok.returncode == 0 and ok.stdout == "", ok.stdout + ok.stderr
