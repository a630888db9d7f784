"""utils.jax.speed_check: the pure parts here (properties), the probes in fresh processes.

This process's Keras may run on TensorFlow (lane a imports tests/keras and tests/tf too), so the
probes run with ``KERAS_BACKEND=jax`` in children: this file run as a script, one child on one
CPU device (a clean model, four with one planted problem each, and the clean model on a faked
TPU v5e device) and one child on two simulated devices with a ``DataParallel`` distribution.
Nothing asserts a speed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import sys
import time
from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("keras")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from utils import fresh_process, mfu, roofline, systolic  # noqa: E402
from utils.jax import speed_check as sc  # noqa: E402

# A step whose v5e part (2.5e8 bytes: ~305 us, memory-bound) outlasts its host loop (0.2 ms).
CLEAN = sc.Measured(
    platform="cpu", devices=1, batch=512, policy="mixed_bfloat16", data_kind="in-memory arrays",
    samples=1024, recompiles=(), probe_s=0.2, probe_steps=2, last_seen=True, t_step=0.05,
    t_host=0.0002, t_dev=0.05, spe=1, programs=1.0, input_s=None, flops=2.3e10, bytes=2.5e8,
    ceiling=1e12,
)  # fmt: skip
PLANTED = {
    "recompiles": {"recompiles": ("float32[4,64], int32[4]",), "probe_s": 1.5, "samples": 1028},
    "dtype": {"policy": "float32"},
    "batch": {"batch": 100, "samples": 200},
    "input": {"input_s": (0.5,) * 6, "data_kind": "an iterator", "samples": None},
    "dispatch": {"t_host": 0.1, "t_step": 0.1},
}


def problems(found: list[sc.Finding]) -> list[str]:
    return [f.probe for f in found if f.status == "problem"]


# --- pure parts -----------------------------------------------------------------------------


@given(st.integers(1, 10_000), st.sampled_from([128, 256]))
def test_the_mxu_share_is_the_systolic_models_and_grows_with_the_batch(batch: int, t: int) -> None:
    """M streams unpadded (a batch that is no multiple of the tile loses nothing for that); a
    larger M amortises the load, fill and drain, towards 1."""
    share = sc.mxu_share(batch, t)
    assert share == batch / systolic.matmul_cycles(batch, t, t, t, t)
    assert 0 < share < sc.mxu_share(batch + 1, t) < 1
    assert (share >= 0.5) == (batch >= sc.mxu_overhead(t)) and sc.mxu_overhead(t) == 3 * t - 2


def test_mxu_share_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        sc.mxu_share(0)


def test_a_clean_measurement_has_no_problem() -> None:
    found = sc.findings_of(CLEAN)
    assert problems(found) == []
    assert {f.probe for f in found} == {"recompiles", "batch", "dtype", "dispatch", "input", "mfu"}
    assert found[-1].status == "not measured" and "in-memory arrays" in found[-1].evidence


@pytest.mark.parametrize("probe", sorted(PLANTED))
def test_one_planted_problem_is_the_only_one_and_first(probe: str) -> None:
    found = sc.findings_of(dataclasses.replace(CLEAN, **PLANTED[probe]))
    assert problems(found) == [probe]
    assert found[0].probe == probe and found[0].gain[1] > 1 and found[0].fix
    assert f"1. {found[0].problem}" in sc.report(found)


@given(st.sets(st.sampled_from(sorted(PLANTED)), min_size=1))
def test_every_planted_problem_is_found_and_ranked_by_its_upper_gain(planted: set[str]) -> None:
    changes = {k: v for p in sorted(planted) for k, v in PLANTED[p].items()}
    found = sc.findings_of(dataclasses.replace(CLEAN, **changes))
    # A host-bound step (the dispatch plant) has no dtype gain to offer (see the test below),
    # nor has a compute-bound one: batch 100 streams too few rows to hide the MXU's fixed cost.
    assert sc.v5e_step(dataclasses.replace(CLEAN, **PLANTED["batch"])).bound == "compute"
    expected = planted - ({"dtype"} if planted & {"dispatch", "batch"} else set())
    assert set(problems(found)) == expected
    gains = [f.gain[1] for f in found if f.status == "problem"]
    assert gains == sorted(gains, reverse=True)
    assert [f.status for f in found[: len(expected)]] == ["problem"] * len(expected)


@given(st.lists(st.tuples(st.sampled_from(sc.STATUSES), st.floats(1, 100), st.floats(0, 99))))
def test_rank_is_a_permutation_with_problems_first(rows: list[tuple[str, float, float]]) -> None:
    found = [sc.Finding(f"p{i}", s, "e", gain=(lo, lo + d)) for i, (s, lo, d) in enumerate(rows)]
    ranked = sc.rank(found)
    assert sorted(f.probe for f in ranked) == sorted(f.probe for f in found)
    order = [sc.STATUSES.index(f.status) for f in ranked]
    assert order == sorted(order)
    highs = [f.gain[1] for f in ranked if f.status == "problem"]
    assert highs == sorted(highs, reverse=True)


def _small_batch(per_sample: tuple[float, float] | None, **changes: Any) -> sc.Finding:
    """The batch finding for CLEAN's step at batch 50 (its totals are the step at 50)."""
    m = dataclasses.replace(CLEAN, batch=50, per_sample=per_sample, **changes)
    return next(f for f in sc.findings_of(m) if f.probe == "batch")


def test_a_batch_whose_growing_bytes_set_the_step_gains_nothing() -> None:
    """A memory-bound v5e step whose bytes all grow with the batch, the host far quicker: a
    larger batch fills more of the MXU but moves as many bytes per sample, so the step gains
    nothing (the MXU share alone would promise about x5)."""
    flops = CLEAN.flops / 10
    linear = (flops / 50, CLEAN.bytes / 50)  # every FLOP and byte grows with the batch
    assert sc.v5e_step(dataclasses.replace(CLEAN, batch=50, flops=flops)).bound == "memory"
    finding = _small_batch(linear, flops=flops)
    assert finding.status == "info" and "gains nothing" in finding.evidence, finding
    assert _small_batch(None, flops=flops).gain[1] > 4  # no cost analysis: the MXU share's alone


def test_weights_that_do_not_grow_with_the_batch_make_it_pay() -> None:
    """Bytes that stay (the weights) and FLOPs that grow: ten times the batch per step pays."""
    finding = _small_batch((CLEAN.flops / 50, 0.0))
    assert finding.status == "problem" and finding.gain[1] > 3, finding
    assert "50 images per max(" in finding.arithmetic
    assert "512 images per max(" in finding.arithmetic


@given(st.integers(1, 381), st.floats(0, 1), st.floats(1e-6, 1e-2))
def test_the_batch_gain_is_the_whole_steps_and_at_most_the_batch_ratio(
    per_chip: int, byte_growth: float, host_s: float
) -> None:
    """FLOPs that grow with the batch (its matmul rows) and bytes that grow at most with it (the
    weights stay): a larger batch never shortens a step, so images/s grow at most by the batch
    ratio; the batch is a problem exactly where the predicted step gains 1 % or more."""
    per_sample = (CLEAN.flops / per_chip, CLEAN.bytes / per_chip * byte_growth)
    m = dataclasses.replace(CLEAN, batch=per_chip, per_sample=per_sample, t_host=host_s)
    finding = next(f for f in sc.findings_of(m) if f.probe == "batch")
    whole = roofline.lever("batch", sc.v5e_step(m), sc.v5e_step_at(m, 512)).gain
    assert 1 - 1e-9 <= whole <= 512 / per_chip * (1 + 1e-9)
    assert (finding.status == "problem") == (whole >= 1.01)
    if finding.status == "problem":
        assert finding.gain == (1.0, pytest.approx(whole))


@given(st.integers(1, 381), st.floats(1e-9, 1e-5))
def test_copying_the_added_samples_costs_the_host(per_chip: int, copy_s: float) -> None:
    """A larger batch is more bytes for the host to copy each step: the predicted gain falls
    with the copy's cost, strictly where the host still sets the larger step."""
    per_sample = (CLEAN.flops / per_chip, 0.0)  # the weights' bytes stay: a host-bound step
    m = dataclasses.replace(CLEAN, batch=per_chip, per_sample=per_sample, t_host=1e-3)
    free, costly = (dataclasses.replace(m, copy_per_sample_s=c) for c in (0.0, copy_s))

    def gain(x: sc.Measured) -> float:
        return roofline.lever("batch", sc.v5e_step(x), sc.v5e_step_at(x, 512)).gain

    after = sc.v5e_step_at(free, 512)
    assert gain(costly) <= gain(free)
    if after.host_s >= after.device_s:
        assert gain(costly) < gain(free)
    assert sc.v5e_step_at(costly, 512).host_s == pytest.approx(1e-3 + (512 - per_chip) * copy_s)


def test_the_edges_of_each_verdict() -> None:
    def verdict(probe: str, **changes: Any) -> str:
        found = sc.findings_of(dataclasses.replace(CLEAN, **changes))
        return next(f.status for f in found if f.probe == probe)

    assert verdict("batch", batch=1024, devices=2) == "ok"
    assert verdict("batch", batch=764, devices=2) == "ok"  # 382 per chip: 3 x 128 - 2
    assert verdict("batch", batch=762, devices=2) == "problem"
    # A v5e chip idle IDLE_LIMIT of a step (or more) is a problem; judged by the v5e's math,
    # not by this machine's compiled step (t_dev), however slow that is.
    assert sc.IDLE_LIMIT == 0.25
    device = sc.v5e_step(CLEAN).device_s
    assert verdict("dispatch", t_host=device / 0.75 * 1.001, t_dev=1.0) == "problem"
    assert verdict("dispatch", t_host=device / 0.75 * 0.999, t_dev=1e-9) == "ok"
    # Input exactly as fast as a v5e step (host-bound: 512 samples per 0.5 s) keeps up.
    assert verdict("input", t_host=0.5, input_s=(9.0, 0.5, 0.5)) == "ok"
    assert verdict("input", t_host=0.5, input_s=(0.0, 0.51, 0.51)) == "problem"
    assert verdict("mfu", flops=None) == "not measured"


def test_an_input_that_keeps_up_here_but_not_with_a_v5e_step_comes_first() -> None:
    """Here a step takes 50 ms (10,240 samples/s); the input gives 12,800/s, but a predicted v5e
    step (~305 us) consumes ~1.7 million/s: input-bound on the chip, ranked first."""
    here = CLEAN.batch / CLEAN.t_step
    fast_enough_here = dataclasses.replace(CLEAN, input_s=(0.04,) * 6, data_kind="an iterator")
    assert CLEAN.batch / 0.04 > here
    found = sc.findings_of(fast_enough_here)
    assert problems(found) == ["input"] and found[0].probe == "input"
    v5e_step = sc.v5e_step(CLEAN).step_s
    assert found[0].gain[1] == pytest.approx(0.04 / v5e_step) and found[0].gain[1] > 100


@given(st.floats(1e-5, 1.0), st.floats(1e6, 1e9), st.floats(1e7, 1e14))
def test_a_host_bound_step_gets_no_dtype_gain_beyond_its_host_share(
    t_host: float, nbytes: float, flops: float
) -> None:
    """bf16 shortens the device's part of a v5e step, never the host's: the gain is at most the
    whole step over its host part, and a step the host paces gets none (info, not a problem)."""
    m = dataclasses.replace(
        CLEAN, policy="float32", t_host=t_host, bytes=nbytes, flops=flops, t_step=1e3, t_dev=1e3
    )
    p = sc.v5e_step(m)
    dtype = next(f for f in sc.findings_of(m) if f.probe == "dtype")
    assert dtype.gain[1] <= p.step_s / t_host * (1 + 1e-9) and dtype.gain[1] <= 2 + 1e-9
    if t_host >= p.device_s:
        assert dtype.status == "info" and "host's part sets the step" in dtype.evidence
    elif dtype.status == "problem":
        assert dtype.gain[1] > 1


@given(st.floats(1e-5, 1e-2), st.floats(1e3, 1e7))
def test_speed_check_and_the_ladder_predict_the_same_gain_lever_by_lever(
    loop_s: float, delivered: float
) -> None:
    """09's predicted ladder (utils.keras.ladder.v5e_ladder) and speed_check's findings, given
    the same step before each lever, predict the same gain for bf16, K steps per call and the
    input; speed_check reports the K-steps lever only where the chip idles IDLE_LIMIT or more."""
    from utils.keras import ladder

    _, levers = ladder.v5e_ladder(
        loop_s, math.inf, delivered, batch=128, batches=(128,), steps=4
    )  # copy_bps=inf: the host's part is fit's loop alone, as speed_check measures it
    by = {lev.name: lev for lev in levers}
    batch_s = 128 / delivered
    m = dataclasses.replace(
        CLEAN, policy="float32", batch=128, t_host=loop_s, data_kind="an iterator",
        input_s=(batch_s,) * 3,
    )  # fmt: skip

    def finding(probe: str, before: Any, **changes: Any) -> sc.Finding:
        patched = mock.patch.object(sc, "v5e_step", return_value=before)
        with patched, mock.patch.object(sc, "SCAN_STEPS", 4):
            found = sc.findings_of(dataclasses.replace(m, t_host=before.host_s, **changes))
        return next(f for f in found if f.probe == probe)

    dtype = finding("dtype", by["bf16"].before)
    assert dtype.gain[1] == pytest.approx(by["bf16"].gain) or (
        dtype.status == "info" and by["bf16"].gain < 1.01
    )
    steps = by["4 steps/call"]
    dispatch = finding("dispatch", steps.before, policy="mixed_bfloat16")
    if dispatch.status == "problem":
        assert dispatch.gain[1] == pytest.approx(max(steps.gain, 1.0))
    else:  # the chip idles less than IDLE_LIMIT: K steps can cut at most that share
        assert steps.gain < 1 / (1 - sc.IDLE_LIMIT) + 1e-9
    feed = finding("input", by["input"].before)
    assert feed.status == ("problem" if by["input"].gain < 1 else "ok")
    if feed.status == "problem":
        assert feed.gain[1] == pytest.approx(1 / by["input"].gain, rel=1e-6)


@pytest.mark.parametrize(
    ("kind", "generation"),
    [("TPU v5 lite", "v5e"), ("TPU v6 lite", "v6e"), ("TPU v5", "v5p"), ("TPU v4", "v4"),
     ("TPU7x", "tpu7x")],
)  # fmt: skip
def test_a_tpu_run_divides_by_its_chips_published_peak(kind: str, generation: str) -> None:
    """The TPU branch (a faked device kind): the published bf16 peak in FLOP/s x chips, and a
    v5e-8-sized step gives an MFU well inside 100 % instead of raising."""
    ceiling = sc._ceiling("tpu", kind, 8)
    assert ceiling == mfu.TPU_CHIPS[generation][0] * 1e12 * 8
    m = dataclasses.replace(CLEAN, platform="tpu", devices=8, batch=4096, ceiling=ceiling)
    found = {f.probe: f for f in sc.findings_of(dataclasses.replace(m, t_step=1e-3, t_dev=1e-3))}
    assert (
        found["mfu"].status == "info" and "8 chip(s)' published bf16 peak" in found["mfu"].evidence
    )
    assert sc._ceiling("tpu", "TPU v99", 8) is None


def test_a_fit_that_fails_on_the_last_batch_comes_first() -> None:
    failed = (f"{sc.FAILED} on a batch of 3x64: IndivisibleError",)
    found = sc.findings_of(dataclasses.replace(CLEAN, recompiles=failed, batch=100, devices=2))
    assert [f.probe for f in found[:2]] == ["recompiles", "batch"]
    assert "cannot finish" in sc.report(found) and "IndivisibleError" in sc.report(found)


def test_an_mfu_above_one_raises_instead_of_printing() -> None:
    with pytest.raises(mfu.MeasurementError):
        sc.findings_of(dataclasses.replace(CLEAN, t_step=1e-6))
    # Two devices: the FLOPs XLA reports are per device, MFU counts both.
    assert sc.findings_of(dataclasses.replace(CLEAN, t_step=2e-4, flops=1.2e8))
    with pytest.raises(mfu.MeasurementError):
        sc.findings_of(dataclasses.replace(CLEAN, devices=2, t_step=2e-4, flops=1.2e8))


def test_the_data_each_kind_gives_to_the_probes() -> None:
    import keras

    x, y = _arrays(260)
    batches, kind, samples, input_s, last_seen = sc._load((x, y), 128, 4)
    assert [len(b[0]) for b in batches] == [128, 128, 4] and input_s is None and last_seen
    assert (kind, samples) == ("in-memory arrays", 260)
    batches, kind, samples, input_s, last_seen = sc._load(_slow(0.0), None, 3)
    assert len(batches) == len(input_s) == 3 and kind == "an iterator" and not last_seen

    class Pages(keras.utils.PyDataset):
        def __len__(self) -> int:
            return 5

        def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
            return x[i * 64 : (i + 1) * 64], y[i * 64 : (i + 1) * 64]  # the last one holds 4

    batches, kind, _, input_s, last_seen = sc._load(Pages(), None, 2)
    assert [len(b[0]) for b in batches] == [64, 64, 4] and len(input_s) == 2 and last_seen
    with pytest.raises(TypeError, match="iterable of batches"):
        sc._load(42, None, 2)


def test_a_tf_data_dataset_is_drawn_and_timed_as_an_iterable() -> None:
    tf = pytest.importorskip("tensorflow")
    x, y = _arrays(260)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(128)
    batches, kind, samples, input_s, last_seen = sc._load(dataset, None, 6)
    assert kind == "a tf.data.Dataset" and samples is None and last_seen  # it ran out
    assert [b[0].shape for b in batches] == [(128, 64), (128, 64), (4, 64)] and len(input_s) == 3


# --- the probes, in fresh processes ---------------------------------------------------------


def _model(policy: str = "mixed_bfloat16", steps_per_execution: int = 1) -> Any:
    import keras

    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    # One 32,768-wide layer: hundreds of MB per step, so a v5e's step (memory-bound) outlasts
    # the host loop measured here and the chip never waits on it (no dispatch finding).
    dense = keras.layers.Dense(32_768, activation="relu")
    model = keras.Sequential([keras.Input((64,)), dense, keras.layers.Dense(10)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile("adam", loss, steps_per_execution=steps_per_execution)
    return model


def _arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((n, 64), dtype=np.float32), rng.integers(0, 10, n).astype(np.int32)


def _slow(pause_s: float) -> Any:
    x, y = _arrays(512)
    while True:
        time.sleep(pause_s)
        yield x, y


def _scenario(name: str) -> tuple[Any, Any, int | None]:
    """(model, data, batch_size) with one planted problem, or none ("clean", "devices")."""
    return {
        "clean": lambda: (_model(), _arrays(1024), 512),
        "tpu": lambda: (_model(), _arrays(1024), 512),  # run on a faked TPU v5e device
        "recompiles": lambda: (_model(), _arrays(1028), 512),
        "dtype": lambda: (_model("float32"), _arrays(1024), 512),
        "batch": lambda: (_model(), _arrays(512), 256),
        "input": lambda: (_model(), _slow(0.05), None),
        "devices": lambda: (_model(steps_per_execution=2), _arrays(2048), 1024),
        "indivisible": lambda: (_model(), _arrays(1027), 512),  # a last batch of 3 on 2 devices
    }[name]()


FAKED_TPU = SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")  # what jax would report


def run(names: list[str]) -> dict[str, Any]:
    out = {}
    for name in names:
        model, data, batch_size = _scenario(name)
        before = [np.array(w) for w in model.get_weights()]
        printed = io.StringIO()
        start = time.perf_counter()
        device = mock.patch.object(sc, "_device", return_value=FAKED_TPU)
        with contextlib.redirect_stdout(printed), device if name == "tpu" else nullcontext():
            found = sc.speed_check(model, data, batch_size=batch_size, input_batches=4)
        restored = all(
            np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True)
        )
        out[name] = {
            "findings": [dataclasses.asdict(f) for f in found],
            "printed": printed.getvalue(),
            "seconds": time.perf_counter() - start,
            "restored": restored,
        }
    return out


def _child(names: list[str], devices: int) -> dict[str, Any]:
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    done = fresh_process.run_python([__file__, str(devices), *names], env=env, timeout_s=600)
    return fresh_process.result_of(done.stdout, context=done.stdout + done.stderr)


@pytest.fixture(scope="module")
def one_device() -> dict[str, Any]:
    return _child(["clean", "tpu", *PLANTED.keys() - {"dispatch"}], devices=1)


def test_a_clean_model_gets_no_false_alarm(one_device: dict[str, Any]) -> None:
    clean = one_device["clean"]
    assert problems([sc.Finding(**f) for f in clean["findings"]]) == [], clean["printed"]
    assert "To do: nothing found." in clean["printed"]
    assert "input: data is in-memory arrays, nothing to measure" in clean["printed"]
    assert clean["restored"], "speed_check must leave the weights as they were"


def test_the_tpu_branch_runs_on_a_faked_v5e(one_device: dict[str, Any]) -> None:
    """speed_check on a device that says it is a TPU v5e: its MFU divides by the published
    peak (a TFLOP/s figure read as FLOP/s would put MFU far above 100 % and raise)."""
    result = one_device["tpu"]
    assert result["printed"].startswith("speed_check on tpu (1 device(s)), batch 512:")
    found = {f["probe"]: f for f in result["findings"]}
    assert "1 chip(s)' published bf16 peak" in found["mfu"]["evidence"], result["printed"]
    assert problems([sc.Finding(**{**f, "gain": tuple(f["gain"])}) for f in found.values()]) == []


@pytest.mark.parametrize("probe", sorted(PLANTED.keys() - {"dispatch"}))
def test_each_planted_problem_is_ranked_first(one_device: dict[str, Any], probe: str) -> None:
    result = one_device[probe]
    found = [sc.Finding(**{**f, "gain": tuple(f["gain"])}) for f in result["findings"]]
    assert problems(found) == [probe], result["printed"]
    assert result["printed"].splitlines()[2].startswith(f" 1. {found[0].problem}")
    assert result["restored"] and result["seconds"] < 120


def test_the_batch_gain_comes_from_xla_counts_at_two_batches(one_device: dict[str, Any]) -> None:
    """On a real model the batch finding predicts the whole v5e step (its arithmetic), not the
    MXU share alone: the step was costed at its batch and at twice it."""
    batch = next(f for f in one_device["batch"]["findings"] if f["probe"] == "batch")
    assert "256 images per max(" in batch["arithmetic"], one_device["batch"]["printed"]
    assert "512 images per max(" in batch["arithmetic"]


def test_the_ragged_batch_names_the_shape_that_recompiled(one_device: dict[str, Any]) -> None:
    assert "float32[4,64], int32[4]" in one_device["recompiles"]["printed"]


@pytest.fixture(scope="module")
def two_devices() -> dict[str, Any]:
    return _child(["devices", "indivisible"], devices=2)


def test_a_last_batch_that_does_not_split_is_reported(two_devices: dict[str, Any]) -> None:
    result = two_devices["indivisible"]
    found = [f["probe"] for f in result["findings"] if f["status"] == "problem"]
    assert found[0] == "recompiles" and "batch" in found, result["printed"]  # 256 per chip
    assert set(found) <= {"recompiles", "batch", "dispatch"}  # dispatch: see the next test
    assert "fit() fails on the last batch" in result["printed"] and result["restored"]


def test_two_simulated_devices_with_data_parallel(two_devices: dict[str, Any]) -> None:
    result = two_devices["devices"]
    found = {f["probe"]: f for f in result["findings"]}
    # Simulated devices share this CPU's cores with the host loop, which they slow: the host
    # may then truly set the pace here (a dispatch finding); no other probe may complain.
    assert set(problems([sc.Finding(**f) for f in result["findings"]])) <= {"dispatch"}
    assert "batch per chip 512 (1024 over 2 device(s))" in found["batch"]["evidence"]
    # Keras's JAX trainer: steps_per_execution=2 launches two programs per execution.
    assert "2 device program(s) per execution (steps_per_execution=2)" in result["printed"]


if __name__ == "__main__":  # the child: python tests/jax/test_speed_check.py DEVICES NAMES...
    import jax
    import keras

    if int(sys.argv[1]) > 1:
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    print(fresh_process.RESULT_PREFIX + json.dumps(run(sys.argv[2:])))
