"""Tests for utils.tf.input_bench: the workload, the ladder, timelines and input wait (TF)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from utils.tf import input_bench as bp  # noqa: E402


def small_workload(tmp_path, n=64):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(n, 8, 8, 3), dtype=np.uint8)
    return bp.make_workload(
        images,
        np.arange(n) % 10,
        tmp_path,
        num_shards=4,
        open_latency_s=0.002,
        record_latency_s=0.0001,
        batch_size=16,
    )


@pytest.mark.parametrize("tuned", [False, True])
@pytest.mark.parametrize("repeat", [False, True])
def test_recorded_pipeline_spans_are_ordered_per_element(tmp_path, tuned, repeat):
    """Real pipelines of the benchmark, stamped: read < decode < transform < consume."""
    wl = small_workload(tmp_path)
    ds = bp.tuned_pipeline(wl, stamp=True) if tuned else bp.naive_pipeline(wl, stamp=True)
    tl = bp.record_timeline(ds, epochs=2, step_s=0.001, repeat=repeat)
    order = ["read", "decode", "transform", "consume"]
    assert set(tl.stages) == set(order)
    tl.check(order, across_epochs=repeat)
    per_element = tl.by_element()
    assert sorted(per_element) == list(range(64))  # every example went through
    for spans in per_element.values():
        stages = [s.stage for s in spans]
        assert stages.count("consume") == 2  # two epochs
        # the tuned pipeline caches decoded examples: read and decode happen once
        assert stages.count("read") == (1 if tuned else 2)
        assert stages.count("decode") == (1 if tuned else 2)


def test_record_timeline_with_repeat_opens_one_iterator():
    class Source:
        """Stands for a dataset: counts how many iterators the recorder opens."""

        def __init__(self, epochs=1):
            self.epochs, self.iterators = epochs, 0

        def repeat(self, epochs):
            self.repeated = Source(epochs)
            return self.repeated

        def __iter__(self):
            self.iterators += 1
            return iter([{"index": np.array([0, 1])}] * self.epochs)

    fresh = Source()
    assert len(bp.record_timeline(fresh, epochs=3).by_element()[0]) == 3
    assert fresh.iterators == 3
    once = Source()
    tl = bp.record_timeline(once, epochs=3, repeat=True)
    assert len(tl.by_element()[0]) == 3
    assert once.iterators == 0 and once.repeated.iterators == 1 and once.repeated.epochs == 3


def test_ladder_measures_the_guide_both_ways_and_counts_every_example(tmp_path):
    wl = small_workload(tmp_path)
    rows = bp.ladder(wl, epochs=2, configs=(bp.NAIVE, bp.TUNED))
    by_name = {r.name: r for r in rows}
    assert list(by_name) == ["naive", "course tuned", "guide optimized", "guide + repeat"]
    assert all(r.elements == 2 * wl.num_examples for r in rows)
    assert by_name["guide optimized"].iteration == "fresh"
    assert by_name["guide + repeat"].iteration == "repeat"
    assert by_name["course tuned"].iteration == "repeat"  # TUNED keeps the ladder's repeat
    assert all(len(r.epoch_seconds) == 2 for r in rows)
    assert "x naive" in bp.format_table(rows)


def test_ladder_builds_each_row_with_the_builder_it_is_given(tmp_path):
    """Notebook 07 passes its own copy of build_pipeline: every row goes through that builder."""
    wl = small_workload(tmp_path)
    built = []

    def build(wl_, cfg):
        built.append(cfg.name)
        return bp.build_pipeline(wl_, cfg)

    rows = bp.ladder(wl, epochs=2, configs=(bp.NAIVE, bp.TUNED), include_guide=False, build=build)
    assert built == ["naive", "course tuned"] and [r.name for r in rows] == built


def test_storage_wait_is_what_the_files_wait_one_after_another(tmp_path):
    wl = small_workload(tmp_path)  # 4 files of 16 records: 4 opens of 2 ms, 64 records of 0.1 ms
    assert wl.storage_wait_s == pytest.approx(4 * 0.002 + 64 * 0.0001)
    assert f"{wl.storage_wait_s:.2f} s of waiting" in wl.describe()


def test_ladder_adds_one_technique_per_row():
    """Each LADDER row keeps every flag of the row before it and turns on exactly one more."""
    import dataclasses

    def flags(cfg):
        return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("name", "note")}

    for prev, cfg in zip(bp.LADDER[:-1], bp.LADDER[1:], strict=True):
        before, after = flags(prev), flags(cfg)
        changed = {k for k in after if after[k] != before[k]}
        assert len(changed) == 1, (cfg.name, changed)
        assert all(after[k] for k, v in before.items() if v), cfg.name  # nothing switched off


def test_input_wait_runs_a_distributed_step():
    import tensorflow as tf

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

    calls = []

    def counting_step(x, y):
        calls.append(1)
        return tf.constant(0.0)

    bp.input_wait(ds, counting_step, steps=3, warmup=2)
    assert len(calls) == 5  # the warm-up steps run, and are left out of the figures


def test_cache_growth_child_failure_carries_its_output():
    pytest.importorskip("psutil")
    from utils.fresh_process import FreshProcessError

    with pytest.raises(FreshProcessError, match="placement must be 'before' or 'after'"):
        bp.cache_growth_in_subprocess("sideways", 4)


def test_runners_deliver_whole_epochs_for_compare(tmp_path):
    """first_epoch_runner rebuilds the pipeline per call; epoch_runner keeps one iterator."""
    wl = small_workload(tmp_path)
    built = []

    def make():
        built.append(1)
        return bp.tuned_pipeline(wl, shuffle=False)

    first = bp.first_epoch_runner(make, epoch_size=wl.num_examples)
    assert first() == wl.num_examples and first() == wl.num_examples and len(built) == 2
    built.clear()
    steady = bp.epoch_runner(lambda: make().repeat(), epoch_size=wl.num_examples)
    assert [steady() for _ in range(3)] == [wl.num_examples] * 3 and len(built) == 1


def test_tuned_without_shuffle_differs_only_in_the_shuffle():
    import dataclasses

    a, b = dataclasses.asdict(bp.TUNED), dataclasses.asdict(bp.TUNED_NO_SHUFFLE)
    assert {k for k in a if a[k] != b[k]} == {"name", "note", "shuffle"}
    assert a["shuffle"] and not b["shuffle"]
