"""Tests for utils.tf.input_bench: the workload, the ladder's pipelines and their timelines (TF)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from utils import throughput  # noqa: E402
from utils.tf import input_bench as bp  # noqa: E402
from utils.timeline import Timeline  # noqa: E402


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
def test_recorded_pipeline_spans_are_ordered_per_element(tmp_path, tuned):
    """Real pipelines, stamped: read < decode < transform < consume; the tuned one caches."""
    wl = small_workload(tmp_path)
    ds = bp.tuned_pipeline(wl, stamp=True) if tuned else bp.naive_pipeline(wl, stamp=True)
    tl = Timeline()
    tl.record_consumer(ds.repeat(2), lambda batch: None)
    order = ["read", "decode", "transform", "consume"]
    tl.check(order, across_epochs=True)
    per_element = tl.by_element()
    assert sorted(per_element) == list(range(64))  # every example went through
    for spans in per_element.values():
        stages = [s.stage for s in spans]
        assert stages.count("consume") == 2  # two epochs
        assert stages.count("read") == stages.count("decode") == (1 if tuned else 2)


@pytest.mark.parametrize("name", ["every row", "guide"])
def test_every_pipeline_delivers_every_example_once_per_epoch(tmp_path, name):
    wl = small_workload(tmp_path)
    makers = [lambda c=c: bp.build_pipeline(wl, c) for c in (*bp.LADDER, bp.TUNED)]
    if name == "guide":
        makers = [lambda: bp.guide_pipeline(wl)]
    for make in makers:
        ds = make()
        assert ds.element_spec["image"].shape[1:] == (8, 8, 3)
        got = np.sort(np.concatenate([b["index"].numpy() for b in ds]))
        np.testing.assert_array_equal(got, np.arange(wl.num_examples))
        r = throughput.measure(ds.repeat(2), epoch_size=wl.num_examples, name="row")
        assert len(r.epoch_seconds) == 2


def test_storage_wait_is_what_the_files_wait_one_after_another(tmp_path):
    wl = small_workload(tmp_path)  # 4 files of 16 records: 4 opens of 2 ms, 64 records of 0.1 ms
    assert wl.storage_wait_s == pytest.approx(4 * 0.002 + 64 * 0.0001)
    assert f"{wl.storage_wait_s:.2f} s of waiting" in wl.describe()


def test_ladder_adds_one_technique_per_row():
    """Each LADDER row keeps every flag of the row before it and turns on exactly one more."""

    def flags(cfg):
        return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("name", "note")}

    for prev, cfg in zip(bp.LADDER[:-1], bp.LADDER[1:], strict=True):
        before, after = flags(prev), flags(cfg)
        changed = {k for k in after if after[k] != before[k]}
        assert len(changed) == 1, (cfg.name, changed)
        assert all(after[k] for k, v in before.items() if v), cfg.name  # nothing switched off


def test_cache_after_the_resize_grows_memory_more():
    pytest.importorskip("psutil")
    assert bp.cache_growth_bytes("after", 64) > bp.cache_growth_bytes("before", 64)
