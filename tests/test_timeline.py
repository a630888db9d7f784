"""Tests for utils.timeline: recorded spans are ordered and non-overlapping per element."""

from __future__ import annotations

import numpy as np
import pytest

from utils.timeline import Span, Timeline


def test_check_accepts_ordered_spans_and_rejects_overlaps():
    ok = Timeline()
    ok.add("read", [0, 1], 0.0, 1.0)
    ok.add("map", [0, 1], 1.0, 2.0)
    ok.add("consume", [0, 1], 2.5, 3.0)
    ok.check(["read", "map", "consume"])

    overlapping = Timeline()
    overlapping.add("read", [0], 0.0, 1.0)
    overlapping.add("map", [0], 0.5, 2.0)
    with pytest.raises(ValueError, match="element 0.*overlaps"):
        overlapping.check(["read", "map"])
    overlapping.check(["read", "map"], across_epochs=True)  # repeat: the next epoch may start early

    out_of_order = Timeline()
    out_of_order.add("map", [3], 0.0, 1.0)
    out_of_order.add("read", [3], 1.0, 2.0)
    with pytest.raises(ValueError, match="out of order"):
        out_of_order.check(["read", "map"])


def test_duplicates_from_a_cache_are_recorded_once():
    tl = Timeline()
    for _ in range(3):  # a cached element brings the same read stamp every epoch
        tl.add("read", [7], 1.0, 2.0)
    tl.add("read", [8], 1.5, 3.0)
    assert sorted(s.element for s in tl.spans) == [7, 8]
    assert (tl.start, tl.end) == (1.0, 3.0)


def test_add_batch_reads_stamps_per_element_and_the_consumer_adds_its_own():
    tl = Timeline()
    batch = {
        "index": np.array([4, 5]),
        "t_read": np.array([[0.0, 1.0], [0.5, 1.5]]),
        "t_decode": np.array([[2.0, 3.0], [2.0, 3.0]]),
        "image": np.zeros((2, 1)),
    }
    assert tl.add_batch(batch) == [4, 5]
    assert Span(0.5, 1.5, 5, "read") in tl.spans
    assert len(tl.spans) == 4
    tl.record_consumer([batch, batch], lambda b: None)  # two epochs of a cached batch
    assert sorted(s.stage for s in tl.by_element()[4]) == ["consume", "consume", "decode", "read"]


def test_plot_timeline_draws_one_row_per_stage():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from utils.timeline import plot_timeline

    tl = Timeline()
    tl.add("read", [0, 1], 0.0, 1.0)
    tl.add("read", [2], 0.5, 1.2)  # overlaps element 0/1's read: drawn in a second lane
    tl.add("consume", [0, 1, 2], 1.5, 2.0)
    fig, ax = plt.subplots()
    plot_timeline(tl, title="demo", ax=ax, stages=["read", "consume"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["read", "consume"]
    assert len(ax.collections) == 3  # read: 2 lanes, consume: 1
    assert ax.get_title() == "demo"
    plt.close(fig)
