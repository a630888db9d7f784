"""Tests for utils.systolic: the simulated array multiplies exactly like np.matmul."""

from __future__ import annotations

import numpy as np
import pytest

from utils import systolic


@pytest.mark.parametrize(
    "m,k,n,rows,cols",
    [
        (4, 4, 4, 4, 4),  # exactly one tile
        (1, 1, 1, 3, 3),  # tiny, mostly padding
        (7, 5, 3, 4, 4),  # non-square, smaller than the array in K and N
        (10, 9, 11, 4, 4),  # larger than the array, not multiples: 3x3 tiles
        (6, 8, 5, 4, 2),  # rectangular array
        (3, 17, 2, 5, 3),
    ],
)
def test_equals_matmul_on_integers(m: int, k: int, n: int, rows: int, cols: int) -> None:
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    x = rng.integers(-9, 10, size=(m, k))
    w = rng.integers(-9, 10, size=(k, n))
    res = systolic.simulate(x, w, rows=rows, cols=cols)
    np.testing.assert_array_equal(res.output, x @ w)
    tiles = -(-k // rows) * -(-n // cols)
    assert res.tiles == tiles
    assert res.cycles == systolic.matmul_cycles(m, k, n, rows, cols)
    assert res.cycles == tiles * (rows + m + rows + cols - 2)
    assert res.load_cycles == tiles * rows
    assert 0 < res.utilisation <= 1


def test_random_float_shapes() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        m, k, n = rng.integers(1, 20, size=3)
        x = rng.standard_normal((m, k))
        w = rng.standard_normal((k, n))
        res = systolic.simulate(x, w, rows=8, cols=6)
        np.testing.assert_allclose(res.output, np.matmul(x, w), rtol=1e-12, atol=1e-12)


def test_utilisation_grows_with_m_and_full_tiles() -> None:
    full = systolic.simulate(np.ones((64, 4)), np.ones((4, 4)), rows=4)
    small = systolic.simulate(np.ones((2, 4)), np.ones((4, 4)), rows=4)
    padded = systolic.simulate(np.ones((64, 1)), np.ones((1, 1)), rows=4)
    assert full.utilisation > small.utilisation > 0
    assert padded.utilisation < full.utilisation / 10
    # Formula: useful MACs / (PEs * cycles).
    assert full.utilisation == pytest.approx(64 * 16 / (16 * (4 + 64 + 6)))


def test_snapshots_show_the_wavefront() -> None:
    x = np.arange(1, 7).reshape(3, 2)
    w = np.ones((2, 2))
    res = systolic.simulate(x, w, rows=2, snapshot_cycles=range(10))
    assert [s.cycle for s in res.snapshots] == list(range(res.stream_cycles))
    first = res.snapshots[0]
    # Cycle 0: only X[0, 0] has entered, at PE (0, 0).
    assert first.active.tolist() == [[True, False], [False, False]]
    assert first.activations[0, 0] == 1
    # Cycle 1: X[0,0] moved right, X[1,0] entered row 0, X[0,1] entered row 1.
    second = res.snapshots[1]
    assert second.activations[0].tolist() == [3, 1] and second.activations[1, 0] == 2
    assert sum(int(s.active.sum()) for s in res.snapshots) == 3 * 2 * 2  # every MAC once


def test_padding_efficiency_and_errors() -> None:
    assert systolic.padding_efficiency(128, 128) == 1.0
    assert systolic.padding_efficiency(27, 32) == pytest.approx(27 * 32 / 128**2)
    assert systolic.padding_efficiency(288, 64) == pytest.approx(288 * 64 / (384 * 128))
    assert systolic.padding_efficiency(300, 300, 256) == pytest.approx(300**2 / 512**2)
    with pytest.raises(ValueError):
        systolic.simulate(np.ones((2, 3)), np.ones((2, 3)))


def test_plots_draw_snapshots_and_roofline() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from utils import hardware_plots

    res = systolic.simulate(np.ones((3, 2)), np.ones((2, 2)), rows=2, snapshot_cycles=range(5))
    fig = hardware_plots.plot_systolic_snapshots(res.snapshots, ncols=3)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles[0] == "cycle 0  (1 busy)" and len(titles) == len(res.snapshots)
    points = [("matmul 64", 10.7, 50e9), ("add", 0.08, 0.7e9)]
    fig = hardware_plots.plot_roofline(points, peak_flops=100e9, bandwidth=10e9)
    assert "ridge 10.0 FLOP/B" in [t.get_text() for t in fig.axes[0].texts]
    plt.close("all")
