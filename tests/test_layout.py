"""The layout keeps its promise: a module's place says which framework importing it loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("tensorflow", "torch", "torch_xla", "jax", "keras", "flax", "optax")
STACKS = {"tf": "tensorflow", "torch": "torch", "keras": "keras", "jax": "jax"}


def _modules(folder: Path, package: str) -> list[str]:
    return sorted(f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__")


CORE = _modules(ROOT / "utils", "utils") + _modules(ROOT / "utils" / "tools", "utils.tools")


def _loaded_after_import(module: str) -> list[str]:
    code = (
        f"import importlib, json, sys; importlib.import_module({module!r}); "
        f"print(json.dumps(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_core_list_is_complete() -> None:
    assert {"utils.runtime", "utils.tpu_address", "utils.tools.run_course"} <= set(CORE)
    assert not any(m.startswith(("utils.tf.", "utils.torch.")) for m in CORE)


@pytest.mark.parametrize("module", CORE)
def test_core_module_loads_no_framework(module: str) -> None:
    assert _loaded_after_import(module) == []


def test_every_stack_subpackage_says_what_it_loads() -> None:
    for folder, framework in STACKS.items():
        init = ROOT / "utils" / folder / "__init__.py"
        if not init.exists():
            continue
        doc = init.read_text(encoding="utf-8").lower()
        assert "importing" in doc and framework.split("flow")[0] in doc, init


def test_no_stack_module_sits_in_the_core() -> None:
    """A top-level utils module that imports a framework at its top belongs in a subpackage."""
    for path in (ROOT / "utils").glob("*.py"):
        head = path.read_text(encoding="utf-8")
        for framework in FRAMEWORKS:
            assert f"\nimport {framework}\n" not in head, path
            assert f"\nfrom {framework} import" not in head, path
