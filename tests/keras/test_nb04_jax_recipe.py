"""Notebook 04's Part 1 recipe (Keras 3 on JAX, the route onto a free TPU's chips) runs.

The notebook writes the recipe to a script with a visible ``%%save_script`` cell (``%%writefile``
without its message) and runs it in a
fresh process (its kernel's Keras runs on TensorFlow and cannot switch backends). This test runs
the script as it stands in the notebook, with only its settings made smaller, in a fresh process
on 2 simulated CPU devices with the offline stand-in data.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from utils import fresh_process, simulated_devices

NB04 = Path(__file__).resolve().parents[2] / "notebooks" / "04_keras_cifar10_tpu.ipynb"
SETTINGS = {  # the script's plain settings at its top, and the test's smaller values
    "PER_REPLICA_BATCH": ("None", "16"),
    "STEPS_PER_EPOCH": ("32", "8"),  # the training set: 8 global batches of 32
    "EPOCHS": ("3", "2"),
    "STEPS_PER_EXECUTION": ("8", "2"),
    "PRECISION": ('"mixed_bfloat16"', '"mixed_bfloat16"'),
    # 72 test images: not a multiple of the global batch (32), so drop_remainder must cut
    "TEST_IMAGES": ("1024", "72"),
}


def notebook_cells() -> list[dict]:
    return json.loads(NB04.read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def recipe() -> str:
    """The script Part 1's %%save_script cell writes (its first line, the magic, removed)."""
    cells = notebook_cells()
    start = next(i for i, c in enumerate(cells) if text(c).startswith("## Part 1 · "))
    end = next(i for i, c in enumerate(cells) if text(c).startswith("## Exercise A: "))
    (script,) = [
        text(c)
        for c in cells[start:end]
        if c["cell_type"] == "code" and text(c).startswith("%%save_script")
    ]
    return script.split("\n", 1)[1]


def setting(code: str, name: str) -> str:
    (value,) = re.findall(rf"^{name} = (.+?)  #", code, re.M)
    return value


def test_the_recipe_is_visible_and_run_in_a_fresh_process() -> None:
    cells = notebook_cells()
    start = next(i for i, c in enumerate(cells) if text(c).startswith("## Part 1 · "))
    end = next(i for i, c in enumerate(cells) if text(c).startswith("## Part 2 · "))
    writer = next(i for i, c in enumerate(cells) if text(c).startswith("%%save_script"))
    runner = text(cells[writer + 1])
    assert start < writer < end, "the script is written in Part 1"
    assert not cells[writer]["metadata"].get("cellView"), "the script cell is visible"
    assert "fresh_process.run_python([str(recipe_file)]" in runner, runner
    assert not cells[writer + 1]["metadata"].get("cellView"), "the cell that runs it is visible"


def test_the_recipe_states_the_levers() -> None:
    code = recipe()
    for line in (
        'os.environ["KERAS_BACKEND"] = "jax"',
        "keras.distribution.DataParallel(devices=devices)",
        "set_global_policy(PRECISION)",
        "data.drop_remainder(",
        "steps_per_execution=STEPS_PER_EXECUTION",
        "subset=subset",
        "STEPS_PER_EPOCH * global_batch",
        '"steps_per_epoch": steps_per_epoch',
    ):
        assert line in code, line
    for name, (value, _) in SETTINGS.items():
        assert setting(code, name) == value, (name, setting(code, name))
    assert code.index('os.environ["KERAS_BACKEND"]') < code.index("import keras")


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None or importlib.util.find_spec("keras") is None,
    reason="needs jax and keras",
)
def test_the_recipe_trains_on_two_simulated_devices() -> None:
    code = recipe()
    for name, (value, small) in SETTINGS.items():
        code = code.replace(f"\n{name} = {value}  #", f"\n{name} = {small}  #", 1)
        assert setting(code, name) == small, name
    code += (
        "\n"
        'print("RESULT " + json.dumps({"devices": len(devices), "global_batch": global_batch,'
        ' "policy": model.dtype_policy.name, "loss": history.history["loss"],'
        ' "train": len(x_train), "test": len(x_test)}))\n'
    )
    env = {
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": simulated_devices.child_flags(2),
        "COURSE_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    out = fresh_process.run_python_json(code, env=env, timeout_s=900)
    assert out["devices"] == 2 and out["global_batch"] == 32, out
    assert out["policy"] == "mixed_bfloat16", out
    # STEPS_PER_EPOCH global batches to train on; the test images cut to whole batches
    assert out["train"] == 8 * 32 and out["test"] == 64, out
    assert len(out["loss"]) == 2 and all(v == v for v in out["loss"]), out  # trained, finite


def exercise_a(cells: list[dict]) -> tuple[str, str, str, str]:
    """Exercise A's placeholder, solution, run and check cells (the code cells of its section)."""
    start = next(i for i, c in enumerate(cells) if text(c).startswith("## Exercise A: "))
    end = next(i for i, c in enumerate(cells) if i > start and text(c).startswith("## "))
    assert text(cells[end]).startswith("## Part 2 · "), "Exercise A ends Part 1"
    code = [c for c in cells[start:end] if c["cell_type"] == "code"]
    placeholder, solution, run, check = code
    hidden = [bool(c["metadata"].get("cellView")) for c in code]
    assert hidden == [False, True, False, True], hidden
    return text(placeholder), text(solution), text(run), text(check)


def exercise_a_problems(cells: list[dict]) -> list[str]:
    """What is wrong with Exercise A's structure (an empty list if nothing is)."""
    placeholder, solution, run, check = exercise_a(cells)
    problems = []
    if not placeholder.startswith("my_steps_per_execution = None  #"):
        problems.append("the placeholder is not `my_steps_per_execution = None`")
    if not solution.startswith("# @title Solution"):
        problems.append("the solution is not a titled collapsed cell")
    for chosen in (
        4,
        None,
    ):  # the solution keeps a learner's value and fills in only the placeholder
        scope: dict = {"my_steps_per_execution": chosen}
        exec(solution, scope)  # noqa: S102 - the notebook's own cell
        value = scope["my_steps_per_execution"]
        if chosen is not None and value != chosen:
            problems.append(f"the solution replaced the learner's {chosen} with {value}")
        if chosen is None and not (isinstance(value, int) and value != 8):
            problems.append(
                f"the solution's value {value!r} is not a whole number other than the default 8"
            )
    if (
        'f"STEPS_PER_EXECUTION={my_steps_per_execution}"' not in run
        or "str(recipe_file)" not in run
    ):
        problems.append("the run does not pass the learner's value to Part 1's script")
    if not check.startswith("# @title Check") or "fresh_process.result_of(lever_log)" not in check:
        problems.append("the check does not read the script's RESULT line")
    if "assert not problems" not in check:
        problems.append("the check does not assert")
    return problems


def test_exercise_a_changes_one_lever_of_the_script() -> None:
    assert exercise_a_problems(notebook_cells()) == []
    code = recipe()
    assert (
        "for override in overrides:" in code
        and '"steps_per_execution": STEPS_PER_EXECUTION' in code
    )


def test_exercise_a_fails_with_an_unconditional_solution() -> None:
    """Planted bug: a solution that overwrites the learner's value."""
    cells = notebook_cells()
    start = next(i for i, c in enumerate(cells) if text(c).startswith("## Exercise A: "))
    i = next(j for j in range(start, len(cells)) if text(cells[j]).startswith("# @title Solution"))
    planted = text(cells[i]).replace("if my_steps_per_execution is None:\n    ", "")
    assert planted != text(cells[i])
    cells[i] = {**cells[i], "source": planted.splitlines(keepends=True)}
    assert any("replaced the learner's" in p for p in exercise_a_problems(cells))


def test_exercise_a_check_asserts_the_levers_effects() -> None:
    check = exercise_a(notebook_cells())[3]
    for what in (
        'run["steps_per_execution"] != chosen',
        'run["platform"]',
        'run["devices"]',
        'run["train_images"] % run["global_batch"]',
        'run["steps_per_epoch"]',
        'run["executions_per_epoch"]',
        'first["executions_per_epoch"]',
        "loss[-1] < loss[0]",
    ):
        assert what in check, what
    assert "images/s" not in check and "time" not in check, "no speed assertions"


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None or importlib.util.find_spec("keras") is None,
    reason="needs jax and keras",
)
def test_the_recipe_takes_a_command_line_override(tmp_path: Path) -> None:
    code = recipe()
    for name, (value, small) in SETTINGS.items():
        code = code.replace(f"\n{name} = {value}  #", f"\n{name} = {small}  #", 1)
    script = tmp_path / "keras_jax_recipe.py"
    script.write_text(code)
    env = {
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": simulated_devices.child_flags(2),
        "COURSE_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    done = fresh_process.run_python(
        # "-f kernel.json": a notebook kernel's own arguments, which the script must skip
        [str(script), "-f", "kernel.json", "STEPS_PER_EXECUTION=3", "EPOCHS=1"]
        + ["STEPS_PER_EPOCH=5"],
        env=env,
        timeout_s=900,
    )
    out = fresh_process.result_of(done.stdout)
    assert out["steps_per_execution"] == 3 and out["epochs"] == 1 and len(out["loss"]) == 1, out
    assert (out["devices"], out["platform"], out["global_batch"]) == (2, "cpu", 32), out
    assert out["steps_per_epoch"] == 5 and out["train_images"] == 5 * 32, out
    assert out["executions_per_epoch"] == [2], out  # ceil(5 / 3), counted by the script's callback
