"""Notebook 04's section 1b recipe (Keras 3 on JAX, the route onto a free TPU's chips) runs.

The notebook shows the lines as markdown (its kernel's Keras runs on TensorFlow and cannot switch
backends), so this test runs them: the code block as it stands in the notebook, with only its
sizes made small, in a fresh process on 2 simulated CPU devices with the offline stand-in data.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from utils import fresh_process

NB04 = Path(__file__).resolve().parents[2] / "notebooks" / "04_keras_cifar10_tpu.ipynb"
SIZES = "PER_REPLICA_BATCH, EPOCHS, STEPS_PER_EXECUTION = 128, 10, 32"
LOAD = "data.load_cifar10(normalize=True)"


def recipe() -> str:
    cells = json.loads(NB04.read_text(encoding="utf-8"))["cells"]
    (section,) = [
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## 1b. ")
    ]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def test_the_recipe_states_the_levers() -> None:
    code = recipe()
    for line in (
        'os.environ["KERAS_BACKEND"] = "jax"',
        "keras.distribution.DataParallel(devices=devices)",
        'set_global_policy("mixed_bfloat16")',
        "data.drop_remainder(",
        "steps_per_execution=STEPS_PER_EXECUTION",
        SIZES,
        LOAD,
    ):
        assert line in code, line
    assert code.index('os.environ["KERAS_BACKEND"]') < code.index("import keras")


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None or importlib.util.find_spec("keras") is None,
    reason="needs jax and keras",
)
def test_the_recipe_trains_on_two_simulated_devices() -> None:
    code = (
        recipe()
        .replace(SIZES, "PER_REPLICA_BATCH, EPOCHS, STEPS_PER_EXECUTION = 16, 2, 2")
        # 520 and 72 images: neither a multiple of the global batch (32), so drop_remainder must cut
        .replace(LOAD, "data.load_cifar10(normalize=True, subset=(520, 72))")
    )
    code += (
        "\nimport json\n"
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
