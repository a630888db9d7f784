"""utils.keras.ladder: six rungs, one lever each, measured with utils.compare (no timing asserted).

Backend-agnostic: runs on whichever Keras backend the test process has (TensorFlow by default).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from utils import compare, flops, mfu, roofline
from utils.keras import ladder


def test_each_rung_changes_one_lever_from_the_one_before() -> None:
    specs = ladder.ladder_specs(128, batch_scale=4, steps_per_execution=8, mxu_width=128)
    assert len(specs) == 6
    changes = [ladder.changed_levers(a, b) for a, b in zip(specs, specs[1:], strict=False)]
    assert changes == [
        {"drop_remainder"},
        {"batch", "learning_rate"},
        {"policy"},
        {"steps_per_execution"},
        {"widths"},
    ]
    assert all(ladder.one_lever(a, b) for a, b in zip(specs, specs[1:], strict=False))
    assert specs[2].batch == 512 and specs[2].learning_rate == pytest.approx(4e-3)
    assert specs[5].widths == (128, 128, 128, 128)
    assert not ladder.one_lever(specs[0], specs[3])  # three levers at once
    assert not ladder.one_lever(specs[0], specs[0])  # no lever at all


def test_each_rung_divides_by_the_peak_of_its_own_dtype() -> None:
    specs = ladder.ladder_specs(32)
    assert [s.peak_key for s in specs] == ["float32"] * 3 + ["bfloat16"] * 3
    seed = specs[0]
    assert seed.flops_per_image == mfu.training_flops(flops.seed_cnn_costs(1))
    wide = specs[5]
    assert wide.flops_per_image == mfu.training_flops(
        flops.seed_cnn_costs(1, channels=(128, 128, 128), dense=128)
    )


def test_rungs_train_the_same_images_and_match_the_cost_model() -> None:
    x = np.random.default_rng(0).random((70, 32, 32, 3), dtype=np.float32)
    y = np.arange(70, dtype=np.int32) % 10
    specs = ladder.ladder_specs(8, batch_scale=2, steps_per_execution=2, mxu_width=16)
    rungs = ladder.build_rungs(specs, x, y)
    assert [r.images for r in rungs] == [70] + [64] * 5  # cut to whole batches of 16
    assert [ladder.steps_per_call(r) for r in rungs] == [9, 8, 4, 4, 4, 4]
    for r in rungs:
        c1, c2, c3, dense = r.spec.widths
        costs = flops.seed_cnn_costs(1, channels=(c1, c2, c3), dense=dense)
        assert r.model.count_params() == roofline.parameter_count(costs)
        assert r.variant().flops == r.spec.flops_per_image * r.images
    assert "bfloat16" in str(rungs[3].model.layers[0].compute_dtype)
    assert "float32" in str(rungs[2].model.layers[0].compute_dtype)
    with pytest.raises(ValueError):
        ladder.build_rungs(specs, x[:10], y[:10])


def test_the_rungs_compared_give_a_verdict_per_step_and_mfu() -> None:
    x = np.random.default_rng(1).random((40, 32, 32, 3), dtype=np.float32)
    y = np.arange(40, dtype=np.int32) % 10
    specs = ladder.ladder_specs(8, batch_scale=2, steps_per_execution=2, mxu_width=16)[:3]
    rungs = ladder.build_rungs(specs, x, y)
    huge = {"float32": lambda: 1e18, "bfloat16": lambda: 1e18}
    seen = []
    variants = [r.variant() for r in rungs]
    result = compare.compare(variants, rounds=2, peaks=huge, progress=lambda r, n: seen.append(r))
    assert seen == [1, 2]
    pairs = ladder.step_pairs(rungs, course=specs[2].name)
    assert pairs == [
        (specs[1].name, specs[0].name),
        (specs[2].name, specs[1].name),
        (specs[2].name, specs[0].name),
    ]
    states = {result.verdict(a, b).state for a, b in pairs}
    assert states <= {"faster", "slower", "no difference"}
    accuracy = {r.spec.name: r.accuracy(x, y) for r in rungs}
    text = ladder.table(result, rungs, accuracy)
    assert all(s.name in text for s in specs) and "MFU" in text
    assert all(0 < result.mfu(s.name) <= 1 for s in specs)
    lines = ladder.report(result, rungs, x, y).splitlines()
    assert lines[: len(specs) + 1] == text.splitlines()  # the table, then one verdict per step
    assert len(lines) == len(specs) + 1 + len(ladder.step_pairs(rungs))
    assert all(" vs " in line or " than " in line for line in lines[len(specs) + 1 :])


def test_tiny_rung_measures_the_host_without_mfu() -> None:
    x = np.zeros((20, 32, 32, 3), np.float32)
    y = np.zeros(20, np.int32)
    spec = dataclasses.replace(ladder.ladder_specs(8)[1], steps_per_execution=2)
    tiny = ladder.tiny_rung(spec, x, y)
    assert tiny.images == 16 and tiny.model.count_params() == 32 * 32 * 3 * 10 + 10
    variant = tiny.variant()
    assert variant.flops is None and variant.peak is None and variant.work == 16
    tiny.run()
