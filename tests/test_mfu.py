from __future__ import annotations

import pytest

from utils import flops, mfu, roofline


def test_training_flops_counts_backward_per_layer_and_skips_first_input_gradient() -> None:
    conv = flops.conv2d_cost((8, 8, 3), 4, 3, batch=2)
    pool = flops.maxpool2d_cost(conv.output_shape[1:], 2, batch=2)
    dense = flops.dense_cost(4 * 3 * 3, 5, batch=2)
    total = mfu.training_flops([conv, pool, dense])
    assert total == 2 * conv.flops + 2 * pool.flops + 3 * dense.flops
    assert total != 3 * (conv.flops + pool.flops + dense.flops)


def test_mfu_and_peaks() -> None:
    assert mfu.peak_flops(tpu_generation="v5e", chips=8) == pytest.approx(8 * 197e12)
    assert mfu.mfu(1e9, 0.01, 200e9) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="v9"):
        mfu.peak_flops(tpu_generation="v9")
    with pytest.raises(ValueError, match="known: v2"):
        mfu.peak_flops(tpu_generation="v5e", chips=0)
    with pytest.raises(ValueError):
        mfu.mfu(1e9, 0.0, 1e9)


# Each generation's figures as its cited source prints them (bf16 TFLOP/s per chip, HBM GB/s,
# MXU edge): https://cloud.google.com/tpu/docs/<generation> (checked 2026-12; v6e's page prints
# 1638 GBps), v2 from JAX's tpu_info table. A swap between two rows fails here.
CITED = {
    "v2": (46.0, 716e9, 128),
    "v3": (123.0, 900e9, 128),
    "v4": (275.0, 1200e9, 128),
    "v5e": (197.0, 819e9, 128),
    "v5p": (459.0, 2765e9, 128),
    "v6e": (918.0, 1638e9, 256),
    "tpu7x": (2307.0, 7380e9, 256),
}


def test_peak_flops_reads_the_cited_figure_per_chip() -> None:
    assert mfu.peak_flops(tpu_generation="v6e", chips=2) == 2 * CITED["v6e"][0] * 1e12
    assert mfu.peak_flops(tpu_generation="V5P") == CITED["v5p"][0] * 1e12
    assert mfu.PUBLISHED_PEAK_TFLOPS == {g: chip[0] for g, chip in CITED.items()}


@pytest.mark.parametrize("generation", sorted(CITED))
def test_every_published_figure_is_pinned_to_its_source(generation) -> None:
    tflops, bandwidth, mxu = CITED[generation]
    assert mfu.TPU_CHIPS[generation] == (tflops, bandwidth, mxu)
    chip = roofline.PUBLISHED[generation]
    assert (chip.peak_flops, chip.bandwidth, chip.mxu) == (tflops * 1e12, bandwidth, mxu)
    assert set(mfu.TPU_CHIPS) == set(CITED) == set(roofline.PUBLISHED)


def test_choose_peaks_publishes_on_a_tpu_and_measures_elsewhere() -> None:
    """The one choice of the peak: a TPU's published figure x chips for every dtype (a float32
    matmul runs through the bf16 MXU), anywhere else the measurement ``measure(dtype)`` builds."""
    built = []

    def measure(dtype: str):
        built.append(dtype)
        return lambda: 1e9

    tpu = mfu.choose_peaks(measure, tpu_generation="v5e", chips=8)
    assert {k: f() for k, f in tpu.items()} == {"float32": 8 * 197e12, "bfloat16": 8 * 197e12}
    assert built == []  # nothing measured on a TPU with a published figure
    cpu = mfu.choose_peaks(measure, tpu_generation=None)
    assert {k: f() for k, f in cpu.items()} == {"float32": 1e9, "bfloat16": 1e9}
    assert mfu.choose_peaks(measure, tpu_generation="v99")["float32"]() == 1e9  # unknown: measure
    assert built == ["float32", "bfloat16"] * 2


def test_the_ceiling_is_the_best_peak_and_its_label_names_where_it_came_from() -> None:
    """One ceiling for a caller without dtype-keyed rungs (03's "1 chip" and "8 chips"): the best
    of ``choose_peaks``' peaks, each measurement built once and measured again at every call."""
    rates = {"float32": iter([1e9, 3e9]), "bfloat16": iter([2e9, 1e9])}
    built = []

    def measure(dtype: str):
        built.append(dtype)
        return lambda: next(rates[dtype])

    best = mfu.ceiling(measure, tpu_generation=None)
    assert [best(), best()] == [2e9, 3e9] and built == ["float32", "bfloat16"]
    on_tpu = mfu.ceiling(measure, tpu_generation="v5e", chips=8)
    assert on_tpu() == 8 * 197e12 and built == ["float32", "bfloat16"]  # a TPU measures nothing
    assert mfu.ceiling_label("v5e", 8) == (
        "the published bf16 peak of 8 TPU v5e chip(s), 197 TFLOP/s each"
    )
    for off_tpu in (None, "v99"):  # anything without a published figure is measured
        label = mfu.ceiling_label(off_tpu)
        assert "1024x1024 matmul" in label and "float32 or bfloat16" in label, label
