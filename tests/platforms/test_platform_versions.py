"""The platform venv of `make test-platforms` really has the platform's versions.

Runs only there (COURSE_PLATFORM=colab|kaggle, set by make); elsewhere it is skipped.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PLATFORM = os.environ.get("COURSE_PLATFORM")
pytestmark = pytest.mark.skipif(not PLATFORM, reason="only inside `make test-platforms`")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.split("#")[0].strip())
        if match:
            pins[match[1]] = match[2]
    return pins


def test_installed_versions_match_the_platform_pins() -> None:
    pins = _pins(HERE / f"{PLATFORM}-tpu-constraints.txt")
    assert pins, "no pins read"
    wrong = {}
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # on the image but not needed by the notebooks: not in the platform venv
        if installed != version:
            wrong[name] = (installed, version)
    assert not wrong, f"installed vs pinned: {wrong}"
    for needed in ("jax", "keras", "numpy"):
        assert importlib.metadata.version(needed), needed
