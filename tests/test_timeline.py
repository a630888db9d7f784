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
        overlapping.check()

    out_of_order = Timeline()
    out_of_order.add("map", [3], 0.0, 1.0)
    out_of_order.add("read", [3], 1.0, 2.0)
    with pytest.raises(ValueError, match="out of order"):
        out_of_order.check(["read", "map"])


def test_duplicates_from_a_cache_are_recorded_once_and_busy_time_is_a_union():
    tl = Timeline()
    for _ in range(3):  # a cached element brings the same read stamp every epoch
        tl.add("read", [7], 1.0, 2.0)
    tl.add("read", [8], 1.5, 3.0)
    assert [s.element for s in tl.spans] == [7, 8]
    assert tl.busy_seconds("read") == pytest.approx(2.0)
    assert tl.stages == ["read"]
    with pytest.raises(ValueError, match="ends before"):
        tl.add("read", [1], 2.0, 1.0)


def test_add_batch_reads_stamps_per_element():
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
    tl.check(["read", "decode"])


@pytest.mark.parametrize("tuned", [False, True])
def test_recorded_pipeline_spans_are_ordered_per_element(tmp_path, tuned):
    """Real pipelines of the benchmark, stamped: read < decode < transform < consume."""
    pytest.importorskip("tensorflow")
    from utils.tf import input_bench as bp

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(64, 8, 8, 3), dtype=np.uint8)
    wl = bp.make_workload(
        images,
        np.arange(64) % 10,
        tmp_path,
        num_shards=4,
        open_latency_s=0.002,
        record_latency_s=0.0001,
        batch_size=16,
    )
    ds = bp.tuned_pipeline(wl, stamp=True) if tuned else bp.naive_pipeline(wl, stamp=True)
    tl = bp.record_timeline(ds, epochs=2, step_s=0.001)
    order = ["read", "decode", "transform", "consume"]
    assert set(tl.stages) == set(order)
    tl.check(order)
    per_element = tl.by_element()
    assert sorted(per_element) == list(range(64))  # every example went through
    for spans in per_element.values():
        stages = [s.stage for s in spans]
        assert stages.count("consume") == 2  # two epochs
        # the tuned pipeline caches decoded examples: read and decode happen once
        assert stages.count("read") == (1 if tuned else 2)
        assert stages.count("decode") == (1 if tuned else 2)


def test_plot_timeline_draws_one_row_per_stage():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from utils.timeline import plot_timeline

    tl = Timeline()
    tl.add("read", [0, 1], 0.0, 1.0)
    tl.add("read", [2], 0.5, 1.2)  # overlaps element 0/1's read: drawn in a second lane
    tl.add("consume", [0, 1, 2], 1.5, 2.0)
    fig = plot_timeline(tl, title="demo")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["read", "consume"]
    assert len(ax.collections) == 3  # read: 2 lanes, consume: 1
    assert ax.get_title() == "demo"


def test_ladder_adds_one_technique_per_row():
    """Each LADDER row keeps every flag of the row before it and turns on exactly one more."""
    pytest.importorskip("tensorflow")
    import dataclasses

    from utils.tf import input_bench as bp

    def flags(cfg):
        return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("name", "note")}

    for prev, cfg in zip(bp.LADDER[:-1], bp.LADDER[1:], strict=True):
        before, after = flags(prev), flags(cfg)
        changed = {k for k in after if after[k] != before[k]}
        assert len(changed) == 1, (cfg.name, changed)
        assert all(after[k] for k, v in before.items() if v), cfg.name  # nothing switched off


def test_input_wait_runs_a_distributed_step():
    tf = pytest.importorskip("tensorflow")
    from utils.tf import input_bench as bp

    strategy = tf.distribute.get_strategy()  # the default strategy: one replica, same API
    ds = tf.data.Dataset.from_tensor_slices(
        {"image": tf.zeros([32, 4, 4, 3]), "label": tf.zeros([32], tf.int32)}
    ).batch(8)

    @tf.function
    def step(x, y):
        per_replica = strategy.run(lambda a: tf.reduce_sum(a), args=(x,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    got = bp.input_wait(ds, step, steps=3, strategy=strategy)
    assert set(got) == {"wait_pct", "step_ms", "wait_ms"}
    assert 0.0 <= got["wait_pct"] <= 100.0


def test_cache_growth_child_failure_carries_its_output():
    pytest.importorskip("tensorflow")
    pytest.importorskip("psutil")
    from utils.fresh_process import FreshProcessError
    from utils.tf import input_bench as bp

    with pytest.raises(FreshProcessError, match="placement must be 'before' or 'after'"):
        bp.cache_growth_in_subprocess("sideways", 4)
