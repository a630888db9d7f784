"""utils.keras.ladder (no timing asserted), on whichever backend the test process has.

The JAX half (utils.jax.ladder_bench: the scanned loop, Keras' launches, Grain) is checked where
it is taught: 09's check cells assert one program per K steps, K launches under
steps_per_execution and whole batches, and nbval runs 09 in `make test`.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from utils import compare, roofline
from utils.keras import ladder


def test_each_rung_changes_one_lever_from_the_one_before() -> None:
    specs = ladder.ladder_specs(128, knee=512, steps=8)
    assert len(specs) == 6
    changes = [ladder.changed_levers(a, b) for a, b in zip(specs, specs[1:], strict=False)]
    assert changes == [
        {"drop_remainder"},
        {"batch", "learning_rate"},
        {"policy"},
        {"steps"},
        {"input_dtype"},
    ]
    assert all(ladder.one_lever(a, b) for a, b in zip(specs, specs[1:], strict=False))
    assert not ladder.one_lever(specs[0], specs[3]) and not ladder.one_lever(specs[0], specs[0])


def test_adam_scales_with_the_square_root_of_the_batch() -> None:
    specs = ladder.ladder_specs(128, knee=512)
    assert specs[2].batch == 512 and specs[2].learning_rate == pytest.approx(2e-3)
    assert ladder.sqrt_scaled_lr(1e-3, 128, 128) == 1e-3  # the knee at the seed's batch
    assert ladder.ladder_specs(128, knee=128)[2].learning_rate == pytest.approx(1e-3)


def test_bytes_per_step_fall_fourfold_with_uint8() -> None:
    specs = ladder.ladder_specs(128, knee=256)
    assert specs[4].bytes_per_step == 256 * 32 * 32 * 3 * 4 == 4 * specs[5].bytes_per_step
    assert [s.peak_key for s in specs] == ["float32"] * 3 + ["bfloat16"] * 3


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


@given(st.floats(1e-6, 1e-2), st.sampled_from([64, 128, 256]))
def test_the_v5e_knee_and_each_lever_alone_follow_the_host_and_device_parts(
    loop_s: float, batch: int
) -> None:
    """Where the chip's part of the seed's step outlasts the host's, only bf16 pays (the
    host-side levers gain nothing and the knee is the smallest batch); where the host's part is
    far longer, K steps per call and a larger batch pay and bf16 gains nothing (the 5 % bar
    of every verdict decides the knee)."""
    alone = ladder.lever_alone(loop_s, float("inf"), batch=batch, steps=4)
    seed = alone["bf16"].before
    if seed.host_s * 2 <= roofline.in_bfloat16(seed).device_s:  # device-bound, bf16 too
        assert alone["bf16"].gain > 1.5
        assert alone["4 steps/call"].gain == pytest.approx(1)
        assert alone["batch x2"].gain < 1.05  # only the optimizer's fixed bytes amortise
        knee, _ = ladder.v5e_ladder(loop_s, float("inf"), 1e9, batch=batch, batches=(64, 128, 256),
                                    steps=4)  # fmt: skip
        assert knee == 64
    if seed.host_s >= 4 * seed.device_s:  # host-bound by far
        assert alone["bf16"].gain == pytest.approx(1)
        assert alone["4 steps/call"].gain > 2 and alone["batch x2"].gain > 1.5
