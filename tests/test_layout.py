"""The layout keeps its promise: a module's place says which framework importing it loads."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("tensorflow", "torch", "torch_xla", "jax", "keras", "flax", "optax")
STACKS = {"tf": "tensorflow", "torch": "torch", "keras": "keras", "jax": "jax"}


def _modules(folder: Path, package: str) -> list[str]:
    return sorted(f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__")


CORE = _modules(ROOT / "utils", "utils")


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
    assert {"utils.runtime", "utils.bootstrap", "utils.results"} <= set(CORE)
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


# Layers, lowest first: the core; the stacks (utils.keras is shared by the TF and JAX stacks);
# the maintainer tools. A module may import its own layer or a lower one, never a higher one.
STACK_FRAMEWORKS = {
    "tf": {"tensorflow", "keras"},
    "keras": {"keras", "tensorflow", "jax"},  # Keras 3 and the backends it runs on
    "jax": {"jax", "jaxlib", "keras", "optax", "flax"},
    "torch": {"torch", "torch_xla", "torchvision"},
}
STACK_MAY_USE = {"tf": {"keras"}, "jax": {"keras"}, "keras": set(), "torch": set()}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, at any depth (in functions, ``if``, ``try``), by ``ast``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module == "utils":  # from utils import tf -> utils.tf
                found += [(node.lineno, f"utils.{alias.name}") for alias in node.names]
    return found


def _layer(module: str) -> str | None:
    """``core``, a stack name, ``tools``, or None for a module outside ``utils``."""
    parts = module.split(".")
    if parts[0] != "utils":
        return None
    if len(parts) > 1 and parts[1] in (*STACK_FRAMEWORKS, "tools"):
        return parts[1]
    return "core"


def _problems(path: Path) -> list[str]:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    layer = _layer(module)
    problems = []
    for line, name in imports_of(path):
        top, target = name.split(".")[0], _layer(name)
        where = f"{path.relative_to(ROOT)}:{line} imports {name}"
        if top in FRAMEWORKS and layer in ("core", "tools"):
            problems.append(f"{where}: a framework in the {layer} (move it to a stack)")
        elif top in FRAMEWORKS and layer in STACK_FRAMEWORKS and top not in STACK_FRAMEWORKS[layer]:
            problems.append(f"{where}: not a framework of utils.{layer}")
        elif target == "tools" and layer != "tools":
            problems.append(f"{where}: the maintainer tools are the top layer")
        elif target in STACK_FRAMEWORKS and layer == "core":
            problems.append(f"{where}: the core never imports a stack")
        elif target in STACK_FRAMEWORKS and layer in STACK_FRAMEWORKS and target != layer:
            if target not in STACK_MAY_USE[layer]:
                problems.append(f"{where}: utils.{layer} may not import utils.{target}")
    return problems


def test_no_import_crosses_the_layers_at_any_depth() -> None:
    """Also imports inside functions: a core function that imports Keras is a stack module."""
    problems = [p for path in sorted((ROOT / "utils").rglob("*.py")) for p in _problems(path)]
    assert not problems, "\n".join(problems)


def test_the_layout_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f():\n    if True:\n        import keras.ops\n        from utils.tf import x\n"
    )
    assert [name for _, name in imports_of(sample)] == ["keras.ops", "utils.tf"]


def test_the_maps_name_every_module() -> None:
    """utils/__init__.py's docstring names every core and tools module; CONTRIBUTING's layout
    table names every module of every layer (a new module goes on the maps)."""
    import utils

    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    table = contributing[contributing.index("| place |") : contributing.index("Layers, lowest")]
    missing_doc = [m for m in CORE if f"``{m.rsplit('.', 1)[1]}``" not in (utils.__doc__ or "")]
    assert not missing_doc, f"utils/__init__.py's docstring does not name {missing_doc}"
    every = [p.stem for p in (ROOT / "utils").rglob("*.py") if p.stem != "__init__"]
    missing_table = sorted(m for m in every if f"`{m}`" not in table)
    assert not missing_table, f"CONTRIBUTING's layout table does not name {missing_table}"


def test_every_home_in_contributings_one_home_table_exists() -> None:
    """CONTRIBUTING's "one job, one home" table names modules and their functions: each module
    imports without a framework check here (read with ast) and defines each function named."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    table = text.split("One job, one home", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|")[2] for line in table.splitlines()[2:] if line.startswith("|")]
    assert len(rows) >= 8, table
    for cell in rows:
        for part in cell.split(";"):
            module, *rest = re.findall(r"`([\w.]+)`", part)
            path = ROOT / (module.replace(".", "/") + ".py")
            if not path.exists():  # utils.keras.models.seed_cnn: a module, then a function
                module, rest = module.rsplit(".", 1)[0], [module.rsplit(".", 1)[1], *rest]
                path = ROOT / (module.replace(".", "/") + ".py")
            defined = {
                n.name
                for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            } | {
                t.id
                for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(n, ast.Assign | ast.AnnAssign)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)
            }
            missing = [name for name in rest if name not in defined]
            assert not missing, f"CONTRIBUTING names {missing} in {module}, which has none"
