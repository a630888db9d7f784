"""utils.keras.ladder and the JAX half in utils.jax.ladder_bench (no timing asserted).

The Keras part runs on whichever backend the test process has (TensorFlow by default); the JAX
part (the scanned loop, Keras' launches, Grain) runs in a fresh process with KERAS_BACKEND=jax.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from utils import compare, fresh_process
from utils.keras import ladder


def test_each_rung_changes_one_lever_from_the_one_before() -> None:
    specs = ladder.ladder_specs(128, knee=512, steps=8)
    assert len(specs) == 7
    changes = [ladder.changed_levers(a, b) for a, b in zip(specs, specs[1:], strict=False)]
    assert changes == [
        {"drop_remainder"},
        {"batch", "learning_rate"},
        {"policy"},
        {"steps"},
        {"input_dtype"},
        {"feed"},
    ]
    assert all(ladder.one_lever(a, b) for a, b in zip(specs, specs[1:], strict=False))
    assert not ladder.one_lever(specs[0], specs[3]) and not ladder.one_lever(specs[0], specs[0])


def test_adam_scales_with_the_square_root_of_the_batch() -> None:
    specs = ladder.ladder_specs(128, knee=512)
    assert specs[2].batch == 512 and specs[2].learning_rate == pytest.approx(2e-3)
    assert ladder.sqrt_scaled_lr(1e-3, 128, 128) == 1e-3  # the knee at the seed's batch
    assert ladder.ladder_specs(128, knee=128)[2].learning_rate == pytest.approx(1e-3)


def test_bytes_per_step_fall_fourfold_with_uint8_and_to_zero_on_the_device() -> None:
    specs = ladder.ladder_specs(128, knee=256)
    assert specs[4].bytes_per_step == 256 * 32 * 32 * 3 * 4 == 4 * specs[5].bytes_per_step
    assert dataclasses.replace(specs[5], feed="device").bytes_per_step == 0
    assert [s.peak_key for s in specs] == ["float32"] * 3 + ["bfloat16"] * 4


def _fake(seconds: dict[str, list[float]]) -> compare.Comparison:
    variants = tuple(compare.Variant(n, lambda: None, 1.0) for n in seconds)
    return compare.Comparison(variants, {n: tuple(s) for n, s in seconds.items()})


def test_the_knee_is_where_doubling_stops_paying() -> None:
    names = {64: "b64", 128: "b128", 256: "b256"}
    rounds = 8
    # per image: 64 -> 128 twice as fast every round, 128 -> 256 the same speed
    result = _fake({"b64": [2.0] * rounds, "b128": [1.0] * rounds, "b256": [1.0] * rounds})
    assert ladder.knee(result, names) == 128
    always = _fake({"b64": [4.0] * rounds, "b128": [2.0] * rounds, "b256": [1.0] * rounds})
    assert ladder.knee(always, names) == 256  # doubling always paid: the largest tried


def test_fit_rungs_train_whole_batches_and_report_accuracy_and_mfu() -> None:
    x = np.random.default_rng(0).random((40, 32, 32, 3), dtype=np.float32)
    y = np.arange(40, dtype=np.int32) % 10
    specs = ladder.ladder_specs(16, knee=32)[:3]
    rungs = [ladder.fit_rung(s, x, y) for s in specs]
    assert [r.images for r in rungs] == [40, 32, 32]
    tiny = ladder.fit_rung(specs[1], x, y, tiny=True)
    assert tiny.model.count_params() == 32 * 32 * 3 * 10 + 10 and tiny.variant().flops is None
    huge = {"float32": lambda: 1e18, "bfloat16": lambda: 1e18}
    result = compare.compare([r.variant() for r in rungs], rounds=2, peaks=huge)
    names = [s.name for s in specs]
    accuracy = {r.spec.name: r.accuracy(x, y) for r in rungs}
    table = ladder.table(result, names, accuracy)
    assert all(n in table for n in names) and "MFU" in table and "accuracy" in table
    pairs = [(names[1], names[0]), (names[2], names[1]), (names[2], names[0])]
    assert ladder.step_pairs(names) == pairs
    spread = [(0.9, 1.1), (1.8, 2.2), (2.7, 3.3)]
    fig = ladder.plot_ladder(names, [1.0, 2.0, 3.0], spread, [(5.0, 9.0)] * 3, ["-"] * 3)
    assert fig.axes[0].get_yscale() == "log"


JAX_CHILD = r"""
import json, numpy as np
from utils.keras import ladder
from utils.jax import ladder_bench as lb
from utils.jax.compiles import CompileLog

x8 = np.random.default_rng(0).integers(0, 255, (64, 32, 32, 3), dtype=np.uint8)
y = (np.arange(64) % 10).astype("int32")
x = x8.astype("float32") / 255
specs = ladder.ladder_specs(8, knee=16, steps=2)
calls, launches = lb.keras_launches(ladder.build_model(specs[1]), x[:32], y[:32], 8, 4)
model = ladder.build_model(specs[4])
state, program = lb.scanned_trainer(model, model.optimizer, model.loss)
with CompileLog() as log:
    for _ in range(2):
        state, losses = program(state, x[:32].reshape(2, 16, 32, 32, 3), y[:32].reshape(2, 16))
rungs = [lb.build_rung(s, x, x8, y) for s in specs[4:]]
rungs.append(lb.scan_rung(dataclasses.replace(specs[5], name="8", feed="device"), x8, y))
for r in rungs:
    r.run()
print("RESULT " + json.dumps({"calls": calls, "launches": launches, "steps": len(losses),
      "programs": log.count("program"), "images": [r.images for r in rungs],
      "accuracy": [r.accuracy(x, y) for r in rungs]}))
"""


def test_jax_half_one_program_per_k_steps_and_keras_k_launches() -> None:
    code = "import dataclasses\n" + JAX_CHILD
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    out = fresh_process.run_python_json(code, env=env, timeout_s=900)
    assert out["calls"] == 1 and out["launches"] == 4, out  # Keras: K programs per call
    assert out["steps"] == 2 and out["programs"] == 1, out  # the scan: one program, K steps
    assert out["images"] == [64, 64, 64, 64], out
    assert all(0 <= a <= 1 for a in out["accuracy"]), out
