"""Tests for utils.tf.training: epoch timing, sharded input, the custom loop, 1 vs N replicas.

Virtual CPU devices must be configured before TensorFlow initialises, which another test in the
same session may already have done, so the multi-replica checks run in one fresh process
(``utils.fresh_process``).
"""

from __future__ import annotations

import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from utils.fresh_process import run_python_json
from utils.keras import models
from utils.tf import training


def test_epoch_timing_separates_first_epoch():
    # Epoch 4 was hit by another program on the machine: the median ignores it, a mean would not
    # (mean of epochs 2-4 = 3.0 s, median = 2.0 s).
    t = training.EpochTiming((5.0, 2.0, 1.9, 5.1), images_per_epoch=1000)
    assert t.first_epoch_s == 5.0
    assert t.steady_epoch_s == pytest.approx(2.0)
    assert t.compile_overhead_s == pytest.approx(3.0)
    assert t.images_per_s == pytest.approx(500.0)
    assert "trace/compile" in t.table() and len(t.table().splitlines()) == 6
    single = training.EpochTiming((4.0,), images_per_epoch=100)
    assert single.compile_overhead_s == 0.0 and single.images_per_s == pytest.approx(25.0)


def test_epoch_timer_records_every_epoch():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = training.EpochTimer(images_per_epoch=32)
    with pytest.raises(RuntimeError):
        timer.summary()
    model.fit(np.ones((32, 4)), np.zeros(32), epochs=3, batch_size=8, verbose=0, callbacks=[timer])
    summary = timer.summary()
    assert len(summary.epoch_s) == 3 and all(t > 0 for t in summary.epoch_s)


def test_dataset_fn_shards_without_loss_or_repeat():
    n, pipelines, replicas = 96, 4, 8
    images = np.zeros((n, 32, 32, 3), np.uint8)
    images[:, 0, 0, 0] = np.arange(n)  # the example's id in one pixel
    labels = np.arange(n) % 10
    fn = training.make_dataset_fn(images, labels, global_batch_size=16, training=False)
    seen = []
    for pid in range(pipelines):
        ctx = tf.distribute.InputContext(pipelines, pid, replicas)
        for x, _ in fn(ctx):
            assert x.shape == (2, 32, 32, 3)  # per-replica batch = 16 / 8
            seen.extend(np.rint(x.numpy()[:, 0, 0, 0] * 255).astype(int).tolist())
    assert sorted(seen) == list(range(n))


def test_max_weight_difference():
    a = [np.zeros((2, 2)), np.ones(3)]
    b = [np.zeros((2, 2)), np.array([1.0, 1.5, 1.0])]
    assert training.max_weight_difference(a, b) == 0.5
    with pytest.raises(ValueError):
        training.max_weight_difference(a, b[:1])


def test_single_replica_loop_does_not_retrace_and_learns():
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.get_strategy()
    rng = np.random.default_rng(0)
    x = rng.random((256, 32, 32, 3), dtype=np.float32)
    y = (x[..., 0].mean(axis=(1, 2)) > 0.5).astype(np.int32)
    model = models.seed_cnn(num_classes=2)
    opt = keras.optimizers.Adam(1e-3)
    loop = training.make_train_loop(strategy, model, opt, global_batch_size=32)
    it = iter(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32))
    before = [w.copy() for w in model.get_weights()]
    for steps in (1, 3, 5):
        loop.run(it, tf.constant(steps))
    assert loop.trace_count == 1
    assert int(opt.iterations.numpy()) == 9
    assert training.max_weight_difference(before, model.get_weights()) > 0
    assert np.isfinite(float(loop.loss.result()))


REPLICA_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 4)
    import keras
    from utils.keras import models
    from utils.tf import training

    rng = np.random.default_rng(0)
    x = rng.random((64, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    keras.utils.set_random_seed(0)
    init = models.seed_cnn().get_weights()
    mirrored = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(4)])
    default = tf.distribute.get_strategy()
    out = {"replicas": mirrored.num_replicas_in_sync}
    for steps in (1, 3):
        w1 = training.train_replicated(default, models.seed_cnn, init, x, y,
                                       global_batch_size=16, steps=steps, learning_rate=0.05)
        wn = training.train_replicated(mirrored, models.seed_cnn, init, x, y,
                                       global_batch_size=16, steps=steps, learning_rate=0.05)
        out[f"diff_{steps}"] = training.max_weight_difference(w1, wn)
        out[f"moved_{steps}"] = training.max_weight_difference(w1, init)
    with mirrored.scope():
        m = models.seed_cnn()
        m.set_weights(init)
    view = training.per_replica_view(mirrored, m, x, y, global_batch_size=16)
    out["indices"] = view["indices"].tolist()
    out["sum_ok"] = bool(np.allclose(view["local_grad"].sum(0), view["all_reduced"], atol=1e-6))
    # One epoch through distribute_datasets_from_function: every example exactly once.
    ids = np.zeros((64, 32, 32, 3), np.uint8)
    ids[:, 0, 0, 0] = np.arange(64)
    fn = training.make_dataset_fn(ids, y, global_batch_size=16, training=True)
    seen = []
    for batch in mirrored.distribute_datasets_from_function(fn):
        for part in mirrored.experimental_local_results(batch[0]):
            assert part.shape[0] == 4
            seen.extend(np.rint(part.numpy()[:, 0, 0, 0] * 255).astype(int).tolist())
    out["seen"] = sorted(seen)
    print("RESULT " + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def replicated() -> dict:
    return run_python_json(REPLICA_SCRIPT, timeout_s=300)


def test_one_and_four_replicas_end_with_the_same_weights(replicated):
    assert replicated["replicas"] == 4
    for steps in (1, 3):
        assert replicated[f"moved_{steps}"] > 1e-4  # training did change the weights
        assert replicated[f"diff_{steps}"] < 1e-5  # ... identically with 1 and 4 replicas


def test_per_replica_view_splits_the_global_batch(replicated):
    assert replicated["indices"] == [list(range(i * 4, i * 4 + 4)) for i in range(4)]
    assert replicated["sum_ok"]


def test_distributed_epoch_sees_each_example_once(replicated):
    assert replicated["seen"] == list(range(64))
