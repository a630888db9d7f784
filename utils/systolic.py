"""A cycle-by-cycle NumPy model of a weight-stationary systolic array (a TPU MXU in miniature).

Framework-free. The array has ``rows x cols`` processing elements (PEs). To compute
``Y = X @ W`` with ``X`` of shape ``(M, K)`` and ``W`` of shape ``(K, N)``:

1. **Load weights.** A ``rows x cols`` tile of ``W`` is shifted into the array, one row of PEs
   per cycle (``rows`` cycles); PE ``(i, j)`` keeps ``W[i, j]`` for the whole tile
   ("weight-stationary").
2. **Stream activations.** Row ``m`` of ``X`` enters from the left edge, skewed: element
   ``X[m, i]`` enters PE row ``i`` at cycle ``m + i`` and moves one PE to the right per cycle.
3. **Accumulate downwards.** Each PE multiplies the activation passing through by its weight, adds
   the partial sum arriving from the PE above and passes the result down. ``Y[m, j]`` leaves the
   bottom of column ``j`` at cycle ``m + (rows - 1) + j``.

One tile therefore takes ``rows`` (load) + ``M + rows + cols - 2`` (stream) cycles. Matrices
larger than the array are cut into ``ceil(K/rows) * ceil(N/cols)`` tiles, partial results are
summed; a tile that does not fill the array is padded with zeros, and the padded PEs do useless
work: the *padding waste* that makes shapes that are multiples of 128 (256 on TPU v6e) fast.

Real MXUs overlap the next weight load with the current stream (double buffering); this model does
not, to keep the picture simple.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Snapshot:
    """The array at the end of one stream cycle: the activation each PE holds, and whether it did
    a useful multiply-add (a real element of ``X`` times a real element of ``W``)."""

    cycle: int
    activations: np.ndarray
    active: np.ndarray


@dataclass
class SystolicResult:
    """Output of :func:`simulate`: the product, cycle counts and optional snapshots."""

    output: np.ndarray
    tiles: int
    stream_cycles: int
    useful_macs: int
    array_shape: tuple[int, int]
    snapshots: list[Snapshot] = field(default_factory=list)

    @property
    def load_cycles(self) -> int:
        return self.tiles * self.array_shape[0]

    @property
    def cycles(self) -> int:
        return self.load_cycles + self.stream_cycles

    @property
    def utilisation(self) -> float:
        """Useful multiply-adds / (PEs * cycles): 1.0 would be every PE busy every cycle."""
        rows, cols = self.array_shape
        return self.useful_macs / (rows * cols * self.cycles)


def matmul_cycles(m: int, k: int, n: int, rows: int, cols: int) -> int:
    """Cycles of ``(m, k) @ (k, n)`` on a ``rows x cols`` array: per tile, load ``rows`` and
    stream ``m + rows + cols - 2``."""
    return math.ceil(k / rows) * math.ceil(n / cols) * (rows + m + rows + cols - 2)


def padding_efficiency(k: int, n: int, tile: int = 128) -> float:
    """The MXU fill: the fraction of a ``tile x tile`` array's PEs holding real weights when a
    ``(k, n)`` weight matrix is padded to whole tiles (``M``, streamed through, is not padded;
    what a small ``M`` costs in load, fill and drain is :func:`matmul_cycles`). The course's one
    MXU-fill rule: ``utils.roofline`` and ``utils.jax.speed_check`` use these two."""
    return (k * n) / (math.ceil(k / tile) * tile * math.ceil(n / tile) * tile)


def _stream(
    x: np.ndarray, w_tile: np.ndarray, real: np.ndarray, cycle0: int, keep: set, out: list
) -> np.ndarray:
    """Stream ``x`` (M x rows, zero padded) through an array holding ``w_tile`` (rows x cols);
    ``real`` marks the PEs holding real weights; snapshots of the cycles in ``keep`` go to
    ``out``."""
    m = x.shape[0]
    rows, cols = w_tile.shape
    act = np.zeros((rows, cols), dtype=x.dtype)  # activation register of each PE
    act_valid = np.zeros((rows, cols), dtype=bool)
    psum = np.zeros((rows, cols), dtype=x.dtype)  # partial-sum register of each PE
    y = np.zeros((m, cols), dtype=x.dtype)
    row_idx = np.arange(rows)
    for t in range(m + rows + cols - 2):
        # 1. activations move one PE to the right; new ones enter the left column, skewed.
        act[:, 1:], act_valid[:, 1:] = act[:, :-1], act_valid[:, :-1]
        src = t - row_idx  # row m of X whose element i enters row i now
        entering = (src >= 0) & (src < m)
        act[:, 0] = np.where(entering, x[np.clip(src, 0, m - 1), row_idx], 0)
        act_valid[:, 0] = entering
        # 2. partial sums move one PE down; each PE adds its product.
        psum = np.vstack([np.zeros((1, cols), dtype=x.dtype), psum[:-1]]) + act * w_tile
        # 3. the bottom row now holds finished results Y[t - (rows-1) - j, j].
        m_out = t - (rows - 1) - np.arange(cols)
        done = (m_out >= 0) & (m_out < m)
        y[m_out[done], np.nonzero(done)[0]] = psum[-1, done]
        if cycle0 + t in keep:
            out.append(Snapshot(cycle0 + t, act.copy(), act_valid & real))
    return y


def simulate(
    x: np.ndarray,
    w: np.ndarray,
    *,
    rows: int = 4,
    cols: int | None = None,
    snapshot_cycles: list[int] | range = (),
) -> SystolicResult:
    """Multiply ``x @ w`` on a ``rows x cols`` weight-stationary array, cycle by cycle.

    ``snapshot_cycles`` lists global stream-cycle numbers (load cycles excluded) to record
    for drawing. Returns the product (float64 for float inputs) with cycle counts and utilisation.
    """
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"need (M, K) @ (K, N); got {x.shape} @ {w.shape}")
    cols = cols or rows
    (m, k), n = x.shape, w.shape[1]
    dtype = np.result_type(x.dtype, w.dtype, np.float64)
    y = np.zeros((m, n), dtype=dtype)
    result = SystolicResult(y, 0, 0, m * k * n, (rows, cols))
    for j0 in range(0, n, cols):  # one column block of W (one slice of outputs)
        for i0 in range(0, k, rows):  # one row block of W (one slice of the reduction)
            kv, nv = min(rows, k - i0), min(cols, n - j0)
            w_tile = np.zeros((rows, cols), dtype=dtype)
            w_tile[:kv, :nv] = w[i0 : i0 + kv, j0 : j0 + nv]
            x_tile = np.zeros((m, rows), dtype=dtype)
            x_tile[:, :kv] = x[:, i0 : i0 + kv]
            real = np.zeros((rows, cols), dtype=bool)
            real[:kv, :nv] = True
            start = result.stream_cycles
            part = _stream(x_tile, w_tile, real, start, set(snapshot_cycles), result.snapshots)
            y[:, j0 : j0 + nv] += part[:, :nv]
            result.tiles += 1
            result.stream_cycles += m + rows + cols - 2
    return result
