"""Tests for utils.hardware_plots: the roofline's labels never overlap (issue 12)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
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
    (n, float(i), float(r)) for n, i, r in (row.split("|") for row in _TABLE.strip().splitlines())
]


def test_roofline_labels_do_not_overlap():
    fig = hardware_plots.plot_roofline(140.0, 19.7, POINTS)
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
