"""Tests for utils.roofline: hand-computed FLOPs and bytes, the roofline, MFU against the peak."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from utils import flops, mfu, roofline


def _cpu(peak_flops: float, bandwidth: float) -> roofline.Machine:
    return roofline.Machine("this CPU", peak_flops, bandwidth)  # no MXU: nothing padded


def _small_net() -> list[flops.LayerCost]:
    # batch 2: conv (8x8x3 -> 6x6x4, 3x3, bias) -> pool 2 (-> 3x3x4) -> dense (36 -> 5, bias)
    conv = flops.conv2d_cost((8, 8, 3), 4, 3, batch=2, name="conv")
    pool = flops.maxpool2d_cost((6, 6, 4), 2, batch=2, name="pool")
    dense = flops.dense_cost(36, 5, batch=2, name="dense")
    return [conv, pool, dense]


def test_training_costs_by_hand() -> None:
    costs = roofline.training_costs(_small_net())
    conv, pool, dense = costs
    # conv forward: 2 images x 6x6x4 outputs x 27 MACs x 2 FLOPs + one bias add per output.
    conv_fwd_flops = 2 * 2 * 6 * 6 * 4 * 27 + 2 * 6 * 6 * 4
    assert conv_fwd_flops == 15840
    # forward bytes (fp32): input 2x8x8x3, weights 27x4 + 4 biases, output 2x6x6x4.
    conv_fwd_bytes = 4 * (2 * 8 * 8 * 3 + 27 * 4 + 4 + 2 * 6 * 6 * 4)
    assert conv_fwd_bytes == 3136
    # first layer: forward + weight gradient only (no gradient for the images).
    assert (conv.flops, conv.bytes) == (2 * 15840, 2 * 3136)
    # pooling: 3 comparisons per output, forward + backward.
    assert (pool.flops, pool.bytes) == (2 * (2 * 3 * 3 * 4 * 3), 2 * 4 * (2 * 144 + 2 * 36))
    # dense (not first): forward, weight gradient, input gradient.
    dense_fwd = 2 * 2 * 36 * 5 + 2 * 5
    assert dense.flops == 3 * dense_fwd
    assert dense.bytes == 3 * 4 * (2 * 36 + 36 * 5 + 5 + 2 * 5)
    # one convention with utils.mfu
    assert sum(c.flops for c in costs) == mfu.training_flops(_small_net())


def test_bf16_halves_the_bytes_not_the_flops() -> None:
    fp32 = roofline.training_costs(flops.seed_cnn_costs(4, dtype_bytes=4))
    bf16 = roofline.training_costs(flops.seed_cnn_costs(4, dtype_bytes=2))
    assert [c.flops for c in fp32] == [c.flops for c in bf16]
    assert [c.bytes for c in fp32] == [2 * c.bytes for c in bf16]


def test_one_cnn_cost_function_at_any_width() -> None:
    assert not hasattr(roofline, "cnn_costs")  # one CNN cost function: flops.seed_cnn_costs
    mine = flops.seed_cnn_costs(8)
    wide = flops.seed_cnn_costs(8, channels=(128, 256, 256), dense=256)
    assert wide[2].matmul == (8 * 13 * 13, 9 * 128, 256)
    assert mfu.training_flops(wide) > 10 * mfu.training_flops(mine)


def test_parameter_count_and_mxu_fill() -> None:
    # seed CNN: 896 + 18,496 + 36,928 + 65,600 + 650 = 122,570 parameters (Keras' summary)
    assert roofline.parameter_count(flops.seed_cnn_costs(1)) == 122_570
    layers = flops.seed_cnn_costs(8)
    on_cpu = roofline.predict_step(layers, _cpu(1e12, 1e11), batch=8)
    assert all(lt.mxu_fill == 1.0 for lt in on_cpu.layers)  # no tile, no padding
    on_v6e = roofline.predict_step(layers, roofline.PUBLISHED["v6e"], batch=8)
    # conv2: K = 3 x 3 x 32 = 288, N = 64 on 256 x 256 tiles
    assert on_v6e.layers[2].mxu_fill == pytest.approx(288 / 512 * 64 / 256)
    assert on_v6e.layers[1].mxu_fill == 1.0  # pooling: no matmul


def test_predict_step_is_the_sum_of_per_layer_maxima() -> None:
    layers = _small_net()
    machine = roofline.Machine("toy", peak_flops=1e9, bandwidth=1e9)
    pred = roofline.predict_step(layers, machine, batch=2, host_s=0.25e-3)
    costs = roofline.training_costs(layers)
    expected_layers = sum(max(c.flops / 1e9, c.bytes / 1e9) for c in costs)
    params = 27 * 4 + 4 + 36 * 5 + 5
    assert pred.layers_s == pytest.approx(expected_layers)
    assert pred.optimizer_s == pytest.approx(params * 28 / 1e9)
    device = expected_layers + params * 28 / 1e9
    assert pred.device_s == pytest.approx(device)
    assert pred.step_s == pytest.approx(max(device, 0.25e-3))  # host and device overlap
    assert pred.serial_s == pytest.approx(device + 0.25e-3)  # the no-overlap bound
    # ridge 1 FLOP/byte: the conv (5 FLOP/byte) is compute-bound, pool and dense are not
    assert [lt.bound for lt in pred.layers] == ["compute", "memory", "memory"]
    assert pred.images_per_s == pytest.approx(2 / pred.step_s)
    assert "step" in pred.table() and "conv" in pred.table()


def test_mfu_uses_the_machines_own_peak() -> None:
    layers = flops.seed_cnn_costs(16)
    for peak in (50e9, 100e9):
        pred = roofline.predict_step(layers, _cpu(peak, 10e9), batch=16)
        expected = mfu.training_flops(layers) / pred.step_s / peak
        assert f"MFU {roofline.sig(expected * 100)}%" in pred.table()


def test_memory_bound_layer_and_mxu_padding_on_a_tpu() -> None:
    v5e = roofline.PUBLISHED["v5e"]
    assert v5e.peak_flops == 197e12 and v5e.bandwidth == 819e9 and v5e.mxu == 128
    assert v5e.ridge == pytest.approx(197e12 / 819e9)
    assert roofline.PUBLISHED["v6e"].mxu == 256
    layers = flops.seed_cnn_costs(128, dtype_bytes=2)
    pred = roofline.predict_step(layers, v5e, batch=128)
    by_name = {lt.name: lt for lt in pred.layers}
    assert by_name["pool1"].bound == "memory"
    # pool1's bytes move padded: output (128, 15, 15, 32) -> last two dims (16, 128), 4.27x
    pool1 = roofline.training_costs(layers)[1]
    assert by_name["pool1"].bytes == round(pool1.bytes * 16 * 128 / (15 * 32))
    assert by_name["pool1"].memory_s == pytest.approx(by_name["pool1"].bytes / 819e9)
    assert by_name["conv1"].mxu_fill == pytest.approx(27 / 128 * 32 / 128)
    # conv1 streams M = 128 images x 30 x 30 pixels: the tile's load and drain are hidden
    assert by_name["conv1"].rows == 128 * 30 * 30
    share = roofline.streamed_share(128 * 30 * 30, 128)
    assert share == pytest.approx(128 * 900 / (128 * 900 + 382)) and share > 0.99
    assert by_name["conv1"].compute_s == pytest.approx(
        by_name["conv1"].flops / (197e12 * 27 / 128 * 32 / 128 * share)
    )


def test_one_backward_rule() -> None:
    layers = _small_net()
    costs = roofline.training_costs(layers)
    passes = [c.flops // layer.flops for c, layer in zip(costs, layers, strict=True)]
    assert passes == [mfu.training_passes(i, layer) for i, layer in enumerate(layers)] == [2, 2, 3]
    assert not hasattr(mfu, "_BACKWARD_LAYERS")


def test_published_figures_come_from_the_one_table_and_cite_public_sources() -> None:
    assert set(roofline.PUBLISHED) == set(mfu.TPU_CHIPS)
    for name, machine in roofline.PUBLISHED.items():
        assert machine.peak_flops == mfu.peak_flops(tpu_generation=name), name
        assert "https://" in machine.source, name
        assert "/work/" not in machine.source and "notes/" not in machine.source, name
    # v2 HBM: one figure, one source (JAX's tpu_info table: 7.16e11 B/s)
    assert roofline.PUBLISHED["v2"].bandwidth == 716e9
    assert "tpu_info" in roofline.PUBLISHED["v2"].source


def test_sig_rounds_to_two_significant_figures() -> None:
    assert roofline.sig(1_168_381) == "1,200,000"
    assert roofline.sig(0.4478) == "0.45"
    assert roofline.sig(17.2) == "17"
    assert roofline.sig(0.0) == "0"
    assert roofline.sig(9.96) == "10"


def test_tile_padding_pads_the_last_two_dims_to_8_by_128() -> None:
    assert roofline.tile_padded((8, 128)) == 8 * 128
    assert roofline.tile_padded((2, 32, 32, 3)) == 2 * 32 * 32 * 128  # 3 channels move as 128
    assert roofline.tile_padded((2, 9, 129)) == 2 * 16 * 256
    assert roofline.tile_padded((1000,)) == 1024  # 1-D: whole 8 x 128 tiles
    dense = flops.dense_cost(36, 5, batch=2)  # output (2, 5), weights (36, 5)
    padded = (8 * 128 + 40 * 128) / (2 * 5 + 36 * 5)
    assert roofline.padded_bytes(dense) == round(dense.bytes * padded)
    # a CPU pads nothing
    cpu = roofline.predict_step([dense], _cpu(1e9, 1e9), batch=2)
    assert cpu.layers[0].bytes == 2 * dense.bytes  # first layer: forward + weight gradient


def test_table_says_what_the_figures_are() -> None:
    layers = flops.seed_cnn_costs(8)
    table = roofline.predict_step(layers, roofline.PUBLISHED["v5e"], batch=8).table()
    assert "host not measured" in table and "0.000 ms" not in table
    assert "padded to (8, 128)" in table
    measured = roofline.predict_step(layers, roofline.PUBLISHED["v5e"], batch=8, host_s=3.3e-6)
    assert "host 0.0033 ms" in measured.table()  # two significant figures, never "0.00"


# --- the one predictor: each lever's gain -------------------------------------------------


@given(st.floats(1e-6, 1e-1), st.sampled_from([32, 128, 512]), st.integers(2, 64))
def test_each_lever_gains_within_its_arithmetic(host_s: float, batch: int, k: int) -> None:
    """bf16 halves the bytes: at most x2 and nothing where the host or the MXU sets the step;
    K steps per call cut only the host's part: at most xK, nothing where the device sets it; an
    input at half the rate a step consumes halves the rate it trains."""
    v5e = roofline.PUBLISHED["v5e"]
    p = roofline.predict_step(flops.seed_cnn_costs(batch), v5e, batch=batch, host_s=host_s)
    bf16 = roofline.lever("bf16", p, roofline.in_bfloat16(p))
    assert bf16.gain == pytest.approx(p.step_s / max(host_s, roofline.in_bfloat16(p).device_s))
    assert 1 <= bf16.gain <= 2 and (host_s < p.device_s or bf16.gain == 1)
    scan = roofline.lever("K", p, roofline.k_steps_per_call(p, k))
    assert 1 <= scan.gain <= k * (1 + 1e-12) and (host_s > p.device_s or scan.gain == 1)
    fed = roofline.lever("input", roofline.fed_at(p, batch / (2 * p.step_s)), p)
    assert fed.gain == pytest.approx(2)  # an input at half the step's rate: a keeping-up one x2
    assert f"x{roofline.sig(scan.gain, 3)}" in scan.arithmetic()


def test_bf16_gains_nothing_on_a_compute_bound_step() -> None:
    """JAX's default precision already multiplies float32 in one bf16 MXU pass on a TPU: only
    the bytes halve, so a compute-bound step keeps its time."""
    v5e = roofline.PUBLISHED["v5e"]
    p = roofline.totals_step(1e12, 1e6, v5e, batch=4096)
    assert p.bound == "compute" and roofline.in_bfloat16(p).step_s == p.step_s
    memory = roofline.totals_step(1e6, 1e9, v5e, batch=4096)
    assert roofline.lever("bf16", memory, roofline.in_bfloat16(memory)).gain == pytest.approx(2)
