"""Tests for utils.hardware_plots: the roofline draws the figures it is given, in their units,
refuses a point above its roof, and its labels never overlap (issue 12)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402

from utils import hardware_plots  # noqa: E402

# Points notebook 00 has stored (name|FLOP per byte|GFLOP/s): pool1/pool2 and conv2/conv3 nearly
# coincide, which is where the labels used to overlap.
_TABLE = """
matmul 32|5.33|21.4
matmul 128|21.33|105.0
matmul 512|85.33|125.2
matmul 1024|170.67|133.5
add 16M|0.08|1.3
CNN conv1|12.42|56.2
CNN pool1|0.15|1.2
CNN conv2|85.23|103.3
CNN pool2|0.13|1.2
CNN conv3|75.59|104.3
CNN dense1|15.52|31.8
CNN dense2|3.83|4.4
"""
POINTS = [
    (n, float(i), float(r) * 1e9)
    for n, i, r in (row.split("|") for row in _TABLE.strip().splitlines())
]


def test_roofline_labels_do_not_overlap():
    fig = hardware_plots.plot_roofline(POINTS, peak_flops=140e9, bandwidth=19.7e9)
    try:
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        labels = [a for a in ax.texts if isinstance(a, Annotation)]
        assert sorted(a.get_text() for a in labels) == sorted(p[0] for p in POINTS)
        for a in labels:
            a.update_positions(renderer)
        boxes = [Text.get_window_extent(a, renderer) for a in labels]  # the text, not its leader
        for i, a in enumerate(boxes):
            for j in range(i + 1, len(boxes)):
                assert not a.overlaps(boxes[j]), (labels[i].get_text(), labels[j].get_text())
    finally:
        plt.close(fig)


def _roof(fig) -> tuple[np.ndarray, np.ndarray]:
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "roofline")
    return np.asarray(line.get_xdata()), np.asarray(line.get_ydata())


peaks = st.floats(1e9, 1e16)  # FLOP/s: a slow CPU core to a TPU chip
ridges = st.floats(1, 1000)  # FLOP/byte: the bandwidth is peak / ridge


@settings(max_examples=25, deadline=None)
@given(peak=peaks, ridge=ridges, intensity=st.floats(0.01, 1e4), share=st.floats(0.01, 1))
def test_roof_is_peak_and_bandwidth_in_gflops_and_gbps(peak, ridge, intensity, share) -> None:
    """The drawn roof is min(peak, bandwidth x intensity) in GFLOP/s, the ridge peak/bandwidth;
    a point at or under the roof is drawn at its own height in GFLOP/s."""
    bandwidth = peak / ridge
    rate = share * min(peak, bandwidth * intensity)
    fig = hardware_plots.plot_roofline(
        [("layer", intensity, rate)], peak_flops=peak, bandwidth=bandwidth
    )
    try:
        x, y = _roof(fig)
        np.testing.assert_allclose(y, np.minimum(peak, bandwidth * x) / 1e9, rtol=1e-9)
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert f"ridge {peak / bandwidth:.1f} FLOP/B" in texts
        dots = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) == 1]
        assert [(d.get_xdata()[0], d.get_ydata()[0]) for d in dots] == [(intensity, rate / 1e9)]
    finally:
        plt.close(fig)


@settings(max_examples=25, deadline=None)
@given(peak=peaks, ridge=ridges, intensity=st.floats(0.01, 1e4), over=st.floats(1.001, 1e3))
def test_a_point_above_the_roof_is_refused(peak, ridge, intensity, over) -> None:
    roof, before = min(peak, peak / ridge * intensity), set(plt.get_fignums())
    with pytest.raises(ValueError, match="bad above the roof"):
        hardware_plots.plot_roofline(
            [("ok", intensity, roof), ("bad", intensity, roof * over)],
            peak_flops=peak,
            bandwidth=peak / ridge,
        )
    assert set(plt.get_fignums()) == before  # refused before drawing (other tests' figures aside)


def test_peak_and_bandwidth_swapped_is_refused() -> None:
    """GFLOP/s and GB/s swapped (v5e: 197 TFLOP/s, 819 GB/s): the ridge falls from 241 to 0.004
    FLOP/byte, and a layer bound at a share of the true peak is above that roof."""
    v5e_peak, v5e_bw = 197e12, 819e9
    conv = ("conv", 24.8, 0.053 * v5e_peak)  # compute-bound at 5.3 % of the peak
    plt.close(hardware_plots.plot_roofline([conv], peak_flops=v5e_peak, bandwidth=v5e_bw))
    with pytest.raises(ValueError, match="conv above the roof of 819 GFLOP/s"):
        hardware_plots.plot_roofline([conv], peak_flops=v5e_bw, bandwidth=v5e_peak)
