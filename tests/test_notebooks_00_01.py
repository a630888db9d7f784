"""Notebooks 00 and 01 keep the shape a learner relies on (issue 35).

Reads the notebooks as JSON; three tests run their child scripts in fresh processes on the CPU
(00's TPU matmul on JAX, 01's device listings on JAX and PyTorch/XLA).

* Each has a short header with objectives and one metadata line, fits the prose and code budgets,
  and stores its exercise unsolved: a collapsed solution applied only with ``SHOW_SOLUTIONS``, and
  a check whose stored output says what is still missing.
* 00 teaches steady-state timing in interleaved rounds (``utils.compare``) and MXU alignment
  (``utils.systolic``) on its main line, and states the current hardware generations once.
* 01 keeps its ``COLAB_TPU_ADDR`` lesson (``runtime.try_resolver``), listings that name each
  device once, its table of which stack runs where, and a TensorFlow ``## Part 2`` whose
  TensorFlow cells gate themselves with ``bootstrap.tf_runs_here``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, text

NB00 = NOTEBOOKS / "00_cpu_gpu_tpu.ipynb"
NB01 = NOTEBOOKS / "01_getting_onto_a_tpu.ipynb"
BOTH = pytest.mark.parametrize("path", [NB00, NB01], ids=["00", "01"])


def _markdown(path: Path) -> list[str]:
    return [text(c) for c in cells(path) if c["cell_type"] == "markdown"]


def _code(cs: list[dict]) -> list[dict]:
    return [c for c in cs if c["cell_type"] == "code"]


@BOTH
def test_header_states_objectives(path: Path) -> None:
    head = _markdown(path)[0]
    assert "objectives" in head.lower()  # the budgets: tests/test_lean.py


@BOTH
def test_after_the_recap_only_part_2(path: Path) -> None:
    heads = [m.splitlines()[0] for m in _markdown(path) if m]
    recap = heads.index("## Recap")
    assert all(
        h.startswith(("## Part 2", "## Appendix"))
        for h in heads[recap + 1 :]
        if h.startswith("## ")
    )
    last = cells(path)[-1]
    assert hidden(last) and text(last).count("results.record(") == 1


def _parse(source: str) -> ast.Module:
    return ast.parse("\n".join(ln for ln in source.splitlines() if not ln.startswith(("%", "!"))))


def _bound(source: str) -> set[str]:
    """Names a cell binds: assignments, imports, defs, loop targets, parameters."""
    tree = _parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


@BOTH
def test_main_line_reads_nothing_only_part_2_defines(path: Path) -> None:
    """On a free TPU a learner runs the main line only: no main-line cell reads a name that
    only a cell after the recap binds."""
    cs = cells(path)
    recap = heading(cs, "## Recap")
    main, after = _code(cs[1:recap]), _code(cs[recap:-1])
    only_after = set().union(set(), *(_bound(text(c)) for c in after))
    only_after -= set().union(*(_bound(text(c)) for c in main))
    for c in main:
        used = {n.id for n in ast.walk(_parse(text(c))) if isinstance(n, ast.Name)}
        assert not used & only_after, f"main-line cell reads {sorted(used & only_after)}"


def test_00_teaches_timing_and_mxu_alignment_on_its_main_line() -> None:
    cs = cells(NB00)
    main = "\n".join(text(c) for c in _code(cs[: heading(cs, "## Recap")]))
    for call in ("compare.compare(", "compare.median_interval(", ".sentence()", "bench.calls_for(",
                 "systolic.simulate(", "systolic.padding_efficiency("):  # fmt: skip
        assert call in main, call
    heads = [m.splitlines()[0] for m in _markdown(NB00) if m]
    assert any("interleaved rounds" in h for h in heads) and any(
        "multiples of 128" in h for h in heads
    )


def test_00_states_the_current_generations_once() -> None:
    md = _markdown(NB00)
    joined = "\n".join(md)
    for fact in ("TPU 8t", "TPU 8i", "2026-04-22", "Rubin", "2026-01-05"):
        assert sum(fact in m for m in md) == 1, f"{fact!r} should be stated in one cell"
    assert "current generation is Blackwell" not in joined
    assert "newest TPU with published per-chip figures (TPU7x)" not in joined


def test_00_tpu_matmul_child_runs_and_reports() -> None:
    """Section 1's TPU measurement runs its JAX script in a fresh process on a TPU runtime; here
    the same script runs on JAX's CPU backend (small n), so a typo in it fails before a TPU does."""
    from utils import fresh_process

    code = next(text(c) for c in cells(NB00) if "TPU_MATMUL = " in text(c))
    script = re.search(r'TPU_MATMUL = """(.*?)"""', code, re.S)
    assert script, "section 1 defines TPU_MATMUL as a script"
    result = fresh_process.run_python_json(
        script.group(1).format(n=64, repeats=2), env={"JAX_PLATFORMS": "cpu"}, timeout_s=240
    )
    assert set(result) == {"kind", "gflops", "text"} and result["gflops"] > 0
    assert "GFLOP/s" in result["text"]
    assert 'rt.accelerator == "tpu"' in code and 'measured["tpu_matmul_bf16"]' in code


def test_01_installs_tensorflow_only_when_asked() -> None:
    cs = cells(NB01)
    params = next(i for i, c in enumerate(cs) if "parameters" in c["metadata"].get("tags", []))
    assert 'needs=["tensorflow"] if INSTALL_TENSORFLOW_TPU else []' in text(cs[params + 1])


TF_USE = re.compile(
    r"\btf\.|\bstrategies\.|\btpu_connect\.|import tensorflow|utils\.tf\b|try_resolver\("
)


def test_01_keeps_the_colab_tpu_addr_lesson_and_the_table() -> None:
    cs = cells(NB01)
    lesson = next(c for c in _code(cs) if "try_resolver(" in text(c))
    assert 'os.environ.get("COLAB_TPU_ADDR"' in text(lesson) and "runtime.TPU_TODAY" in text(lesson)
    assert "timeout_s=CONNECT_TIMEOUT_S" in text(lesson)
    table = [m for m in _markdown(NB01) if "| runtime |" in m]
    assert len(table) == 1 and all(
        r in table[0] for r in ("Colab v5e-1", "Kaggle v5e-8", "Cloud TPU VM")
    )


def test_01_every_tensorflow_cell_is_gated_and_tensorflow_waits_for_part_2() -> None:
    cs = cells(NB01)
    part2 = heading(cs, "## Part 2")
    for i, c in enumerate(cs):
        if c["cell_type"] != "code" or not TF_USE.search(text(c)):
            continue
        assert "if bootstrap.tf_runs_here(rt, " in text(c), f"cell {i} is not gated"
        assert "import tensorflow" not in text(c) or i > part2, f"cell {i} imports TF before Part 2"


def test_01_jax_is_placed_before_it_starts() -> None:
    """Fresh-process listings first, then the notebook's own JAX (the CPU split, or kept off a TPU
    that TensorFlow will use, before ``import jax``), then TensorFlow."""
    cs = cells(NB01)
    listing = next(i for i, c in enumerate(cs) if "LIST_JAX" in text(c))
    assert "fresh_process.run_python_json" in text(cs[listing])
    in_process = [
        i for i, c in enumerate(_code(cs)) if re.search(r"^\s*import jax\s*$", text(c), re.M)
    ]
    assert len(in_process) == 1
    own = _code(cs)[in_process[0]]
    body = text(own)
    first_import = re.search(r"^\s*import jax\s*$", body, re.M).start()
    assert 0 <= body.find("simulated_devices.request(SIMULATED_DEVICES)") < first_import
    assert 0 <= body.find('os.environ["JAX_PLATFORMS"] = "cpu"') < first_import
    first_tf = next(i for i, c in enumerate(cs) if "import tensorflow" in text(c))
    assert listing < cs.index(own) < first_tf


def test_01_exercise_needs_jax_only() -> None:
    cs = cells(NB01)
    for c in _code(cs[heading(cs, "## Exercise") : heading(cs, "## Recap")]):
        assert not TF_USE.search(text(c)), text(c)
        assert "run_jax" in text(c), "every exercise cell says what it does without JAX"


TWO_JAX_CPUS = {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}


@pytest.mark.parametrize(
    ("script", "module", "env"),
    [
        ("LIST_JAX", "jax", TWO_JAX_CPUS),
        ("LIST_TORCH_XLA", "torch_xla", {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "2"}),
    ],
)
def test_01_listings_name_each_device_once(script: str, module: str, env: dict) -> None:
    """Section 3's listings, run as the notebook runs them (a fresh process) over two CPU devices:
    one distinct name per device, not one device's name repeated."""
    import importlib.util

    from utils import fresh_process

    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    code = next(text(c) for c in cells(NB01) if f"{script} = " in text(c))
    child = re.search(rf'{script} = """(.*?)"""', code, re.S)
    assert child, f"section 3 defines {script} as a script"
    found = fresh_process.run_python_json(child.group(1), env=env, timeout_s=300)
    assert len(found["devices"]) == 2 == len(set(found["devices"])), found
