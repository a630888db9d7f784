"""Pictures for notebook 00 (CPU, GPU, TPU): scaling, cache cliffs, roofline, systolic array.

Imports Matplotlib (no ML framework). Each function draws into a new or given ``Axes`` and
returns the ``Figure``, so a notebook cell can end with ``fig;`` or let the inline backend show it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text

from utils.bench import CacheLevel, format_bytes
from utils.systolic import Snapshot


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
        return fig, ax
    return ax.figure, ax  # type: ignore[return-value]


def plot_thread_scaling(
    threads: Sequence[int],
    gflops: Mapping[str, Sequence[float]],
    *,
    ax: Axes | None = None,
) -> Figure:
    """Matmul GFLOP/s against the number of threads, one line per dtype, with ideal scaling."""
    fig, ax = _axes(ax, (5.5, 3.5))
    for label, values in gflops.items():
        (line,) = ax.plot(threads, values, "o-", label=label)
        ideal = [values[0] * t / threads[0] for t in threads]
        ax.plot(threads, ideal, ":", color=line.get_color(), alpha=0.6)
    ax.set_xticks(list(threads))
    ax.set_xlabel("threads")
    ax.set_ylabel("GFLOP/s (dotted: perfect scaling)")
    ax.set_title("Matrix multiply throughput vs threads")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_working_set(
    sizes_bytes: Sequence[int],
    gbps: Sequence[float],
    caches: Sequence[CacheLevel] = (),
    *,
    ax: Axes | None = None,
) -> Figure:
    """Copy bandwidth against working-set size (log x), with the data/unified cache sizes marked."""
    fig, ax = _axes(ax, (7, 3.8))
    ax.semilogx(sizes_bytes, gbps, "o-", base=2)
    for cache in caches:
        if cache.type == "Instruction":
            continue
        ax.axvline(cache.size_bytes, color="grey", ls="--", alpha=0.7)
        ax.text(
            cache.size_bytes,
            max(gbps) * 0.97,
            f" {cache.name}\n {format_bytes(cache.size_bytes)}",
            va="top",
            fontsize=8,
        )
    ticks = [s for s in sizes_bytes][:: max(1, len(sizes_bytes) // 8)]
    ax.set_xticks(ticks, [format_bytes(s) for s in ticks], rotation=30)
    ax.set_xlabel("working set (source + destination)")
    ax.set_ylabel("copy bandwidth, GB/s")
    ax.set_title("Copy bandwidth vs working set (dashed: reported cache sizes)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_roofline(
    peak_gflops: float,
    bandwidth_gbps: float,
    points: Sequence[tuple[str, float, float]],
    *,
    ax: Axes | None = None,
    title: str = "Roofline of this device",
) -> Figure:
    """Roofline: attainable GFLOP/s = min(peak, bandwidth * intensity), with measured points.

    ``points`` are ``(label, intensity in FLOP/byte, measured GFLOP/s)``; the label's first word
    (e.g. "matmul", "CNN") picks the colour.
    """
    fig, ax = _axes(ax, (7.5, 4.8))
    intensities = [p[1] for p in points] or [1.0]
    lo = min(min(intensities) / 2, 0.05)
    hi = max(max(intensities) * 2, 4 * peak_gflops / bandwidth_gbps)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.loglog(x, np.minimum(peak_gflops, bandwidth_gbps * x), "k-", lw=2, label="roofline")
    ridge = peak_gflops / bandwidth_gbps
    ax.axvline(ridge, color="grey", ls=":", alpha=0.8)
    ax.text(ridge, peak_gflops * 1.15, f"ridge {ridge:.1f} FLOP/B", ha="center", fontsize=8)
    # One colour and marker per kind of operation (the label's first word); each point labelled.
    styles = [("tab:blue", "o"), ("tab:orange", "s"), ("tab:green", "^"), ("tab:purple", "D")]
    kinds: dict[str, tuple[str, str]] = {}
    for label, intensity, gflops in points:
        kind = label.split()[0]
        first = kind not in kinds
        color, marker = kinds.setdefault(kind, styles[len(kinds) % len(styles)])
        ax.loglog(intensity, gflops, marker, color=color, ms=7, label=kind if first else None)
    ax.set_xlim(lo, hi)
    ax.set_ylim(
        min(min((p[2] for p in points), default=1.0) / 3, peak_gflops / 100), peak_gflops * 2.5
    )
    ax.set_xlabel("arithmetic intensity, FLOP per byte moved")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    _place_labels(ax, points)  # after the layout is final: boxes are measured in pixels
    return fig


def _place_labels(ax: Axes, points: Sequence[tuple[str, float, float]], fontsize: int = 7) -> None:
    """Label each point without two labels overlapping each other or leaving the axes.

    Candidate spots are tried nearest first: right of the point, left of it, then one text line
    further up or down each time; the first spot whose box is inside the axes and clear of the
    labels already placed wins (a thin leader line marks a label that had to move away). Boxes
    are measured in pixels with the figure's renderer, so call this after the layout is final.
    """
    renderer = ax.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = ax.get_window_extent(renderer)
    placed: list = []
    line = fontsize * 1.35  # points
    spots = [(side, k) for k in range(0, 12) for side in ("right", "left")]
    spots = [(side, d) for side, k in spots for d in ((k,) if k == 0 else (k, -k))]
    for label, x, y in sorted(points, key=lambda p: (p[1], -p[2])):
        chosen = None
        for side, d in spots:
            dx, ha = (5, "left") if side == "right" else (-5, "right")
            ann = ax.annotate(
                label,
                (x, y),
                textcoords="offset points",
                xytext=(dx, d * line),
                fontsize=fontsize,
                ha=ha,
                va="center",
                arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5} if abs(d) > 1 else None,
            )
            ann.update_positions(renderer)  # where the offset puts the text
            box = Text.get_window_extent(ann, renderer).expanded(1.04, 1.15)  # text, not arrow
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            if inside and not any(box.overlaps(other) for other in placed):
                chosen = box
                break
            ann.remove()
        if chosen is None:  # nowhere free: keep the nearest spot, overlapping
            ax.annotate(
                label,
                (x, y),
                textcoords="offset points",
                xytext=(5, 0),
                fontsize=fontsize,
                va="center",
            )
        else:
            placed.append(chosen)


def plot_systolic_snapshots(
    snapshots: Sequence[Snapshot],
    *,
    ncols: int = 4,
) -> Figure:
    """Draw the array at a few cycles: green PEs do a useful multiply-add, numbers are the
    activations passing through (left to right); partial sums flow top to bottom."""
    n = len(snapshots)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 2.6 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, snap in zip(axes.flat, snapshots, strict=False):
        rows, cols = snap.active.shape
        ax.imshow(snap.active, cmap="Greens", vmin=0, vmax=1.6)
        for i in range(rows):
            for j in range(cols):
                if snap.active[i, j]:
                    ax.text(
                        j, i, f"{snap.activations[i, j]:g}", ha="center", va="center", fontsize=8
                    )
        ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        ax.grid(which="minor", color="k", lw=0.5)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        ax.axis("on")
        ax.set_title(f"cycle {snap.cycle}  ({int(snap.active.sum())} busy)", fontsize=9)
    fig.suptitle("x enters from the left (skewed), partial sums flow down", fontsize=10)
    fig.tight_layout()
    return fig


def plot_bars(
    values: Mapping[str, float],
    *,
    ylabel: str,
    title: str,
    ax: Axes | None = None,
    log: bool = False,
) -> Figure:
    """A labelled bar chart (e.g. GFLOP/s per dtype), values written above the bars."""
    fig, ax = _axes(ax, (6, 3.4))
    names = list(values)
    bars = ax.bar(names, [values[k] for k in names], color="tab:blue")
    for bar, name in zip(bars, names, strict=True):
        ax.text(
            bar.get_x() + bar.get_width() / 2,
            bar.get_height(),
            f"{values[name]:,.0f}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig
