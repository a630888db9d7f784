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
not, to keep the picture simple. Use :func:`tile_cycles` with ``overlap_load=True`` for that count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Snapshot:
    """State of the array at the end of one cycle (for drawing).

    ``activations[i, j]`` is the activation held by PE ``(i, j)``, ``active[i, j]`` whether it
    did a useful multiply-add this cycle (the activation is a real element of ``X`` and the
    weight a real element of ``W``).
    """

    cycle: int
    tile: tuple[int, int]
    activations: np.ndarray
    active: np.ndarray


@dataclass
class SystolicResult:
    """Output of :func:`simulate`: the product, cycle counts and optional snapshots."""

    output: np.ndarray
    cycles: int
    load_cycles: int
    stream_cycles: int
    tiles: int
    useful_macs: int
    array_shape: tuple[int, int]
    snapshots: list[Snapshot] = field(default_factory=list)

    @property
    def utilisation(self) -> float:
        """Useful multiply-adds / (PEs * cycles): 1.0 would be every PE busy every cycle."""
        rows, cols = self.array_shape
        return self.useful_macs / (rows * cols * self.cycles) if self.cycles else 0.0


def tile_cycles(m: int, rows: int, cols: int, *, overlap_load: bool = False) -> int:
    """Cycles for one weight tile: load ``rows`` + stream ``m + rows + cols - 2``.

    With ``overlap_load`` the load is hidden behind the previous tile's stream (not counted).
    """
    stream = m + rows + cols - 2
    return stream if overlap_load else rows + stream


def matmul_cycles(
    m: int, k: int, n: int, rows: int, cols: int, *, overlap_load: bool = False
) -> int:
    """Total cycles of ``(m, k) @ (k, n)`` on a ``rows x cols`` array (formula of the model)."""
    tiles = math.ceil(k / rows) * math.ceil(n / cols)
    return tiles * tile_cycles(m, rows, cols, overlap_load=overlap_load)


def padding_efficiency(k: int, n: int, rows: int = 128, cols: int | None = None) -> float:
    """Fraction of the PEs holding real weights when a ``(k, n)`` weight matrix is tiled.

    ``K`` is padded to a multiple of ``rows`` and ``N`` to a multiple of ``cols`` (default square
    array). ``1 - padding_efficiency`` is the padding waste. ``M`` (streamed rows) is not padded
    in this model.
    """
    cols = rows if cols is None else cols
    kp = math.ceil(k / rows) * rows
    np_ = math.ceil(n / cols) * cols
    return (k * n) / (kp * np_)


def _simulate_tile(
    x: np.ndarray,
    w_tile: np.ndarray,
    k_valid: int,
    n_valid: int,
    tile: tuple[int, int],
    cycle0: int,
    keep: set[int] | None,
    snapshots: list[Snapshot],
) -> np.ndarray:
    """Stream ``x`` (M x rows, zero padded) through an array holding ``w_tile`` (rows x cols)."""
    m = x.shape[0]
    rows, cols = w_tile.shape
    acc_dtype = np.result_type(x.dtype, w_tile.dtype, np.float64)
    act = np.zeros((rows, cols), dtype=acc_dtype)  # activation register of each PE
    act_valid = np.zeros((rows, cols), dtype=bool)
    psum = np.zeros((rows, cols), dtype=acc_dtype)  # partial-sum register of each PE
    out = np.zeros((m, cols), dtype=acc_dtype)
    weight_real = np.zeros((rows, cols), dtype=bool)
    weight_real[:k_valid, :n_valid] = True
    row_idx = np.arange(rows)
    for t in range(m + rows + cols - 2):
        # 1. activations move one PE to the right; new ones enter the left column, skewed.
        act[:, 1:] = act[:, :-1]
        act_valid[:, 1:] = act_valid[:, :-1]
        src = t - row_idx  # row m of X whose element i enters row i now
        entering = (src >= 0) & (src < m)
        act[:, 0] = np.where(entering, x[np.clip(src, 0, m - 1), row_idx], 0)
        act_valid[:, 0] = entering
        # 2. partial sums move one PE down; each PE adds its product.
        above = np.vstack([np.zeros((1, cols), dtype=acc_dtype), psum[:-1]])
        psum = above + act * w_tile
        # 3. the bottom row now holds finished results Y[t - (rows-1) - j, j].
        m_out = t - (rows - 1) - np.arange(cols)
        done = (m_out >= 0) & (m_out < m)
        out[m_out[done], np.nonzero(done)[0]] = psum[-1, done]
        if keep is not None and cycle0 + t in keep:
            snapshots.append(
                Snapshot(
                    cycle=cycle0 + t,
                    tile=tile,
                    activations=act.copy(),
                    active=act_valid & weight_real,
                )
            )
    return out


def simulate(
    x: np.ndarray,
    w: np.ndarray,
    *,
    rows: int = 4,
    cols: int | None = None,
    snapshot_cycles: list[int] | range | None = None,
) -> SystolicResult:
    """Multiply ``x @ w`` on a ``rows x cols`` weight-stationary array, cycle by cycle.

    ``snapshot_cycles`` lists global stream-cycle numbers (load cycles excluded) to record
    for drawing. Returns the product (float64 for float inputs) with cycle counts and utilisation.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"need (M, K) @ (K, N); got {x.shape} @ {w.shape}")
    cols = rows if cols is None else cols
    m, k = x.shape
    n = w.shape[1]
    keep = set(snapshot_cycles) if snapshot_cycles is not None else None
    snapshots: list[Snapshot] = []
    acc_dtype = np.result_type(x.dtype, w.dtype, np.float64)
    y = np.zeros((m, n), dtype=acc_dtype)
    tiles = 0
    stream_cycles = 0
    for j0 in range(0, n, cols):  # one column block of W (one slice of outputs)
        for i0 in range(0, k, rows):  # one row block of W (one slice of the reduction)
            kv, nv = min(rows, k - i0), min(cols, n - j0)
            w_tile = np.zeros((rows, cols), dtype=acc_dtype)
            w_tile[:kv, :nv] = w[i0 : i0 + kv, j0 : j0 + nv]
            x_tile = np.zeros((m, rows), dtype=acc_dtype)
            x_tile[:, :kv] = x[:, i0 : i0 + kv]
            part = _simulate_tile(
                x_tile, w_tile, kv, nv, (i0 // rows, j0 // cols), stream_cycles, keep, snapshots
            )
            y[:, j0 : j0 + nv] += part[:, :nv]
            tiles += 1
            stream_cycles += m + rows + cols - 2
    load_cycles = tiles * rows
    return SystolicResult(
        output=y,
        cycles=load_cycles + stream_cycles,
        load_cycles=load_cycles,
        stream_cycles=stream_cycles,
        tiles=tiles,
        useful_macs=m * k * n,
        array_shape=(rows, cols),
        snapshots=snapshots,
    )
