"""Notebook 00's two pictures: a roofline and a systolic array at work.

Imports Matplotlib (no ML framework). Each function draws a new figure and returns it.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text

from utils.systolic import Snapshot


def _finish(fig: Figure, ax: Axes, xlabel: str, ylabel: str, title: str) -> Figure:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def plot_roofline(
    points: Sequence[tuple[str, float, float]],
    *,
    peak_flops: float,
    bandwidth: float,
    title: str = "Roofline of this device",
) -> Figure:
    """Roofline: attainable FLOP/s = min(peak, bandwidth x intensity), with points under it.

    Named quantities in base units, as :class:`utils.roofline.Machine` holds them:
    ``peak_flops`` in FLOP/s, ``bandwidth`` in bytes/s; ``points`` are ``(label, intensity in
    FLOP/byte, FLOP/s)``, the label's first word (e.g. "matmul", "CNN") picking the colour and
    marker. The axes show GFLOP/s.

    Raises:
        ValueError: a figure that is not positive, or a point above the roof: nothing runs
            faster than the roofline allows, so the point or the roof is wrong (the peak and the
            bandwidth swapped, say).
    """
    if not (peak_flops > 0 and bandwidth > 0):
        raise ValueError(f"need peak_flops > 0 and bandwidth > 0, got {peak_flops}, {bandwidth}")
    above = [p[0] for p in points if p[2] > min(peak_flops, bandwidth * p[1]) * (1 + 1e-9)]
    if above:
        raise ValueError(
            f"{', '.join(above)} above the roof of {peak_flops / 1e9:,.4g} GFLOP/s and "
            f"{bandwidth / 1e9:,.4g} GB/s: is a point, or the peak or the bandwidth, wrong?"
        )
    peak, bw = peak_flops / 1e9, bandwidth / 1e9  # drawn in GFLOP/s and GB/s
    points = [(label, i, r / 1e9) for label, i, r in points]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ridge = peak / bw
    intensities = [p[1] for p in points] or [1.0]
    lo, hi = min(min(intensities) / 2, 0.05), max(max(intensities) * 2, 4 * ridge)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.loglog(x, np.minimum(peak, bw * x), "k-", lw=2, label="roofline")
    ax.axvline(ridge, color="grey", ls=":", alpha=0.8)
    ax.text(ridge, peak * 1.15, f"ridge {ridge:.1f} FLOP/B", ha="center", fontsize=8)
    styles = [("tab:blue", "o"), ("tab:orange", "s"), ("tab:green", "^"), ("tab:purple", "D")]
    kinds: dict[str, tuple[str, str]] = {}
    for label, intensity, gflops in points:
        kind = label.split()[0]
        first = kind not in kinds
        color, marker = kinds.setdefault(kind, styles[len(kinds) % len(styles)])
        ax.loglog(intensity, gflops, marker, color=color, ms=7, label=kind if first else None)
    ax.set_xlim(lo, hi)
    bottom = min(min((p[2] for p in points), default=1.0) / 3, peak / 100)
    ax.set_ylim(bottom, peak * 2.5)
    ax.legend(fontsize=8, loc="lower right")
    _finish(fig, ax, "arithmetic intensity, FLOP per byte moved", "GFLOP/s", title)
    _place_labels(ax, points)  # after the layout is final: boxes are measured in pixels
    return fig


def _place_labels(ax: Axes, points: Sequence[tuple[str, float, float]], fontsize: int = 7) -> None:
    """Label each point without two labels overlapping each other or leaving the axes.

    Spots are tried nearest first: right of the point, left of it, then one text line further up
    or down each time; the first whose box is inside the axes and clear of the labels placed
    wins (a thin leader line marks a label that moved away; nowhere free: right of the point).
    Boxes are measured in pixels with the figure's renderer, so call this after the layout.
    """
    renderer = ax.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = ax.get_window_extent(renderer)
    placed: list = []
    line = fontsize * 1.35  # points
    spots = [(dx, d) for k in range(12) for dx in (5, -5) for d in (k, -k)[: 2 if k else 1]] + [
        (5, 0)
    ]
    for label, x, y in sorted(points, key=lambda p: (p[1], -p[2])):
        for i, (dx, d) in enumerate(spots):
            arrow = {"arrowstyle": "-", "color": "grey", "lw": 0.5} if abs(d) > 1 else None
            ann = ax.annotate(
                label,
                (x, y),
                xytext=(dx, d * line),
                textcoords="offset points",
                fontsize=fontsize,
                ha="left" if dx > 0 else "right",
                va="center",
                arrowprops=arrow,
            )
            ann.update_positions(renderer)  # where the offset puts the text
            box = Text.get_window_extent(ann, renderer).expanded(1.04, 1.15)  # text, not arrow
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            if i == len(spots) - 1 or (inside and not any(box.overlaps(o) for o in placed)):
                placed.append(box)
                break
            ann.remove()


def plot_systolic_snapshots(snapshots: Sequence[Snapshot], *, ncols: int = 4) -> Figure:
    """Draw the array at a few cycles: green PEs do a useful multiply-add, numbers are the
    activations passing through (left to right); partial sums flow top to bottom."""
    nrows = -(-len(snapshots) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 2.6 * nrows), squeeze=False)
    for ax in axes.flat[len(snapshots) :]:
        ax.axis("off")
    for ax, snap in zip(axes.flat, snapshots, strict=False):
        rows, cols = snap.active.shape
        ax.imshow(snap.active, cmap="Greens", vmin=0, vmax=1.6)
        for i, j in zip(*np.nonzero(snap.active), strict=True):
            ax.text(j, i, f"{snap.activations[i, j]:g}", ha="center", va="center", fontsize=8)
        ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        ax.grid(which="minor", color="k", lw=0.5)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        ax.set_title(f"cycle {snap.cycle}  ({int(snap.active.sum())} busy)", fontsize=9)
    fig.suptitle("x enters from the left (skewed), partial sums flow down", fontsize=10)
    fig.tight_layout()
    return fig
