"""Notebooks 00 and 01 keep the shape a learner relies on (issues 20 and 25).

Framework-free: reads the notebooks as JSON.

* Each has a header that says how long it takes on a free TPU and on a CPU and whether it runs
  there as shipped, an exercise at the end with a self-check, and a collapsed solution that the
  stored run applied (so nbval checks the check).
* 01 never stops in its set-up cell for want of TPU TensorFlow: the set-up cell asks for
  TensorFlow only when the learner opts in, and every code cell that uses TensorFlow or the
  course's TensorFlow helpers is gated on ``run_tf``, computed in a visible cell.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.nbcells import NOTEBOOKS, cells, heading, hidden, stdout, text

NB00 = NOTEBOOKS / "00_cpu_gpu_tpu.ipynb"
NB01 = NOTEBOOKS / "01_getting_onto_a_tpu.ipynb"


@pytest.mark.parametrize("path", [NB00, NB01], ids=["00", "01"])
def test_header_says_time_and_runs_as_shipped(path: Path) -> None:
    head = text(cells(path)[0])
    assert "| free TPU" in head and "| CPU" in head and "runs as shipped?" in head
    assert "TPU: not yet run" in head  # until a TPU results file is committed


@pytest.mark.parametrize("path", [NB00, NB01], ids=["00", "01"])
def test_exercise_with_self_check_and_applied_solution(path: Path) -> None:
    cs = cells(path)
    start = next(
        i
        for i, c in enumerate(cs)
        if c["cell_type"] == "markdown" and text(c).startswith("## Exercise")
    )
    recap = next(
        i
        for i, c in enumerate(cs)
        if c["cell_type"] == "markdown" and text(c).startswith("## Recap")
    )
    assert start < recap, "the exercise comes at the end of the main line"
    block = cs[start:recap]
    check = [c for c in block if text(c).startswith("# @title Check: the exercise")]
    solution = [c for c in block if text(c).startswith("# @title Solution")]
    assert len(check) == 1 and hidden(check[0])
    assert len(solution) == 1 and hidden(solution[0])
    # The stored run shows the learner's starting point failing the check and the solution passing
    # it (both compared by nbval, so a broken check fails the notebook tests).
    attempt = [c for c in block if c["cell_type"] == "code" and not hidden(c)]
    assert attempt and stdout(attempt[0]).count("Not yet") >= 1
    assert stdout(solution[0]).startswith(("Done", "batch")) and "Done" in stdout(solution[0])


@pytest.mark.parametrize("path", [NB00, NB01], ids=["00", "01"])
def test_appendix_after_recap(path: Path) -> None:
    heads = [text(c).splitlines()[0] for c in cells(path) if c["cell_type"] == "markdown"]
    recap = next(i for i, h in enumerate(heads) if h.startswith("## Recap"))
    appendices = [i for i, h in enumerate(heads) if h.startswith("## Appendix")]
    assert appendices and min(appendices) > recap


def test_01_setup_cell_needs_no_tensorflow_unless_opted_in() -> None:
    setup = text(cells(NB01)[1])
    assert 'needs=["tensorflow"] if INSTALL_TENSORFLOW_TPU else []' in setup


TF_USE = re.compile(
    r"\btf\.|\bstrategies\.|\btpu_connect\.|import tensorflow|utils\.tf\b"
    r"|per_replica_values\(|time_step\("
)


def test_01_every_tensorflow_cell_is_gated() -> None:
    cs = cells(NB01)
    gate = next(i for i, c in enumerate(cs) if "run_tf = " in text(c))
    assert not hidden(cs[gate]), "the gate is a visible cell"
    assert 'importlib.util.find_spec("tensorflow")' in text(cs[gate])
    for i, c in enumerate(cs):
        if c["cell_type"] != "code" or not TF_USE.search(text(c)):
            continue
        body = text(c)
        assert i > gate and "run_tf" in body, f"cell {i} uses TensorFlow without the run_tf gate"


def test_01_lists_devices_before_tensorflow() -> None:
    cs = cells(NB01)
    listing = next(i for i, c in enumerate(cs) if "LIST_JAX" in text(c))
    first_tf = next(
        i for i, c in enumerate(cs) if c["cell_type"] == "code" and "import tensorflow" in text(c)
    )
    assert listing < first_tf
    assert "fresh_process.run_python_json" in text(
        cs[listing]
    )  # the notebook's process keeps the TPU free


def _exercise_block(cs: list[dict]) -> list[dict]:
    start = next(i for i, c in enumerate(cs) if text(c).startswith("## Exercise"))
    recap = next(i for i, c in enumerate(cs) if text(c).startswith("## Recap"))
    return cs[start:recap]


def test_01_exercise_runs_on_a_free_tpu_as_shipped() -> None:
    """The exercise needs JAX only (both free TPU images ship it), never TensorFlow."""
    for c in _exercise_block(cells(NB01)):
        if c["cell_type"] == "code":
            assert not TF_USE.search(text(c)), text(c)
            assert "run_jax" in text(c), "every exercise cell says what it does without JAX"


def test_01_jax_in_process_is_placed_before_it_starts() -> None:
    """The notebook's own JAX splits the CPU (or stays off a TPU that TensorFlow will use) first."""
    cs = cells(NB01)
    in_process = [
        i
        for i, c in enumerate(cs)
        if c["cell_type"] == "code" and re.search(r"^\s*import jax\s*$", text(c), re.M)
    ]
    assert len(in_process) == 1, in_process
    body = text(cs[in_process[0]])
    first_import = re.search(r"^\s*import jax\s*$", body, re.M).start()
    assert 0 <= body.find("simulated_devices.request(SIMULATED_DEVICES)") < first_import
    assert 0 <= body.find('os.environ["JAX_PLATFORMS"] = "cpu"') < first_import
    assert "if run_jax:" in body
    listing = next(i for i, c in enumerate(cs) if "LIST_JAX" in text(c))
    first_tf = next(
        i for i, c in enumerate(cs) if c["cell_type"] == "code" and "import tensorflow" in text(c)
    )
    assert listing < in_process[0] < first_tf, "fresh-process listing, then JAX here, then TF"


def _assigned(source: str) -> set[str]:
    """Names a cell binds: assignments, imports, defs, loop targets, parameters."""
    tree = ast.parse("\n".join(ln for ln in source.splitlines() if not ln.startswith(("%", "!"))))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):  # lambda and function parameters
            names.add(node.arg)
    return names


def test_00_main_line_leaves_cpu_benchmark_detail_to_the_appendices() -> None:
    """The main line teaches what a TPU changes; CPU measurement detail lives after the recap,
    and no main-line cell reads a name that only an appendix defines."""
    cs = cells(NB00)
    recap = heading(cs, "## Recap")
    main = [c for c in cs[:recap] if c["cell_type"] == "code"]
    appendix = [c for c in cs[recap:] if c["cell_type"] == "code"]
    cpu_detail = re.compile(r"compare\.compare\(|cache_levels\(|plot_thread_scaling\(|SeedCNN\(")
    for c in main:
        assert not cpu_detail.search(text(c)), (
            f"CPU benchmark detail in the main line: {text(c)[:80]}"
        )
    first = heading(cs, "## 1 ")
    assert "v5e" in text(cs[first]) and "Appendix" in text(cs[first]), (
        "section 1 sets the TPU next to this machine"
    )
    defined_in_main = set().union(*(_assigned(text(c)) for c in main))
    only_in_appendix = set().union(*(_assigned(text(c)) for c in appendix)) - defined_in_main
    for c in main:
        used = {
            n.id
            for n in ast.walk(ast.parse(text(c)))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        used -= _assigned(text(c))  # its own names, local ones included
        assert not used & only_in_appendix, (
            f"main-line cell reads {sorted(used & only_in_appendix)}"
        )


def test_00_tpu_matmul_child_runs_and_reports(tmp_path: Path) -> None:
    """Section 1's TPU measurement runs its JAX script in a fresh process on a TPU runtime; here
    the same script runs on JAX's CPU backend (small n), so a typo in it fails before a TPU does."""
    from utils import fresh_process

    cs = cells(NB00)
    code = next(text(c) for c in cs if "TPU_MATMUL = " in text(c))
    script = re.search(r'TPU_MATMUL = """(.*?)"""', code, re.S)
    assert script, "section 1 defines TPU_MATMUL as a script"
    result = fresh_process.run_python_json(
        script.group(1).format(n=64, repeats=2),
        env={"JAX_PLATFORMS": "cpu"},
        timeout_s=240,
    )
    assert set(result) == {"kind", "gflops", "text"} and result["gflops"] > 0
    assert "GFLOP/s" in result["text"]
    assert 'rt.accelerator == "tpu"' in code and 'measured["tpu_matmul_bf16"]' in code
