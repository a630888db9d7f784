"""Notebook 04's section 1b recipe (Keras 3 on JAX, the route onto a free TPU's chips) runs.

The notebook writes the recipe to a script with a visible ``%%writefile`` cell and runs it in a
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

from utils import fresh_process

NB04 = Path(__file__).resolve().parents[2] / "notebooks" / "04_keras_cifar10_tpu.ipynb"
SETTINGS = {  # the script's plain settings at its top, and the test's smaller values
    "PER_REPLICA_BATCH": ("128", "16"),
    "EPOCHS": ("3", "2"),
    "STEPS_PER_EXECUTION": ("8", "2"),
    "PRECISION": ('"mixed_bfloat16"', '"mixed_bfloat16"'),
    # 520 and 72 images: neither a multiple of the global batch (32), so drop_remainder must cut
    "IMAGES": ("(4096, 1024)", "(520, 72)"),
}


def notebook_cells() -> list[dict]:
    return json.loads(NB04.read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def recipe() -> str:
    """The script the section 1b %%writefile cell writes (its first line, the magic, removed)."""
    cells = notebook_cells()
    start = next(i for i, c in enumerate(cells) if text(c).startswith("## 1b. "))
    end = next(i for i, c in enumerate(cells) if i > start and text(c).startswith("## "))
    (script,) = [
        text(c)
        for c in cells[start:end]
        if c["cell_type"] == "code" and text(c).startswith("%%writefile")
    ]
    return script.split("\n", 1)[1]


def setting(code: str, name: str) -> str:
    (value,) = re.findall(rf"^{name} = (.+?)  #", code, re.M)
    return value


def test_the_recipe_is_visible_and_run_in_a_fresh_process() -> None:
    cells = notebook_cells()
    start = next(i for i, c in enumerate(cells) if text(c).startswith("## 1b. "))
    writer = next(i for i, c in enumerate(cells) if text(c).startswith("%%writefile"))
    runner = text(cells[writer + 1])
    assert start < writer, "the script is written in section 1b"
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
        "subset=IMAGES",
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
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "COURSE_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    out = fresh_process.run_python_json(code, env=env, timeout_s=900)
    assert out["devices"] == 2 and out["global_batch"] == 32, out
    assert out["policy"] == "mixed_bfloat16", out
    assert out["train"] % 32 == 0 and out["test"] % 32 == 0, out  # one static batch shape
    assert len(out["loss"]) == 2 and all(v == v for v in out["loss"]), out  # trained, finite
