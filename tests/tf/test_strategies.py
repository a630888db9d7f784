"""Tests for utils.tf.strategies (strategy choice, compile extras) and utils.tf.peak.

Nothing here contacts a TPU: the runtimes are fakes. Virtual CPU devices must be configured
before TensorFlow initialises its devices, so that test runs in a fresh interpreter.
"""

from __future__ import annotations

import textwrap

import pytest

tf = pytest.importorskip("tensorflow")

from utils import bootstrap, fresh_process  # noqa: E402
from utils import runtime as runtime_mod  # noqa: E402
from utils.tf import peak, strategies, tpu_connect  # noqa: E402


def fake_runtime(
    accelerator: str = "cpu",
    tpu: runtime_mod.TPUInfo | None = None,
    gpus: tuple[str, ...] = (),
) -> runtime_mod.Runtime:
    return runtime_mod.Runtime(
        platform="local",
        accelerator=accelerator,
        tpu=tpu,
        gpus=gpus,
        cpu_model="test CPU",
        cpu_cores=2,
        cpu_features=(),
        frameworks={"tensorflow": tf.__version__},
    )


@pytest.fixture(autouse=True)
def fresh_cache():
    strategies._STRATEGY_CACHE.clear()
    yield
    strategies._STRATEGY_CACHE.clear()


def test_tpu_without_tf_tpu_kernels_falls_back_to_the_cpu_and_says_so(capsys, monkeypatch):
    rt = fake_runtime("tpu", runtime_mod.TPUInfo(accelerator_type="v5e-8", chips=8))
    if bootstrap.tf_on_tpu(rt):
        pytest.skip("tensorflow-tpu is installed here")

    def no_connect(*args, **kwargs):
        raise AssertionError("connect_tpu must not be tried when TensorFlow has no TPU kernels")

    monkeypatch.setattr(strategies, "connect_tpu", no_connect)
    strategy = strategies.get_strategy(runtime=rt)
    assert strategies.strategy_kind(strategy) == "default"
    out = capsys.readouterr().out
    assert out.startswith("CPU STAND-IN:") and "no TPU kernels" in out
    assert tf.__version__ in out and "not on the TPU" in out


def test_cpu_gives_the_default_strategy():
    strategy = strategies.get_strategy(runtime=fake_runtime())
    assert strategy is tf.distribute.get_strategy()
    assert strategy.num_replicas_in_sync == 1
    assert strategies.strategy_kind(strategy) == "default"
    assert strategies.describe_strategy(strategy).startswith("default strategy: 1 replica in sync")
    assert strategies.compile_kwargs(strategy) == {}
    assert strategies.compile_kwargs(strategy, steps_per_execution=8) == {"steps_per_execution": 8}


def failing_tpu(monkeypatch) -> runtime_mod.Runtime:
    """A TPU runtime whose TensorFlow could drive it, and a connection that fails."""

    def refuse():
        raise tpu_connect.TPUConnectionError("TPUClusterResolver(tpu='local') failed: no TPU")

    monkeypatch.setattr(strategies.bootstrap, "tf_on_tpu", lambda rt: True)
    monkeypatch.setattr(strategies, "connect_tpu", refuse)
    return fake_runtime("tpu", runtime_mod.TPUInfo(accelerator_type="v5e-8", chips=8))


def test_detected_tpu_that_fails_raises_by_default(monkeypatch):
    with pytest.raises(tpu_connect.TPUConnectionError, match="no TPU"):
        strategies.get_strategy(runtime=failing_tpu(monkeypatch))


def test_detected_tpu_that_fails_falls_back_loudly_only_when_allowed(monkeypatch, capsys):
    rt = failing_tpu(monkeypatch)
    with pytest.warns(strategies.CPUFallbackWarning, match="NOT USING THE ACCELERATOR"):
        strategy = strategies.get_strategy(runtime=rt, allow_cpu_fallback=True)
    assert strategies.strategy_kind(strategy) == "default"
    out = capsys.readouterr().out
    assert "NOT USING THE ACCELERATOR" in out and "no TPU" in out


def test_gpu_seen_but_not_by_tensorflow_is_not_silent():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("TensorFlow sees a GPU here")
    gpu_box = fake_runtime("gpu", gpus=("NVIDIA T4",))
    with pytest.raises(RuntimeError, match="tensorflow\\[and-cuda\\]"):
        strategies.get_strategy(runtime=gpu_box)
    with pytest.warns(strategies.CPUFallbackWarning):
        strategies.get_strategy(runtime=gpu_box, allow_cpu_fallback=True)


@pytest.mark.parametrize("value", [0, 65, 2.5, "8", True])
def test_virtual_cpus_must_be_a_whole_number_in_range(value):
    with pytest.raises(ValueError, match="virtual_cpus"):
        strategies.get_strategy(virtual_cpus=value, runtime=fake_runtime())


def test_compile_kwargs_per_strategy_kind(monkeypatch):
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert strategies.strategy_kind(one) == "one-device"
    assert strategies.compile_kwargs(one) == {}
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert strategies.strategy_kind(mirrored) == "mirrored-cpu"
    assert strategies.compile_kwargs(mirrored) == {}
    with pytest.raises(ValueError, match="You must feed a value for placeholder"):
        strategies.compile_kwargs(mirrored, steps_per_execution=4)
    # A TPUStrategy needs a TPU; the decision depends only on the kind.
    monkeypatch.setattr(strategies, "strategy_kind", lambda s: "tpu")
    assert strategies.compile_kwargs(object()) == {
        "steps_per_execution": strategies.DEFAULT_TPU_STEPS_PER_EXECUTION
    }
    assert strategies.compile_kwargs(object(), steps_per_execution=64) == {
        "steps_per_execution": 64
    }
    for kwargs in (strategies.compile_kwargs(one), strategies.compile_kwargs(object())):
        assert "jit_compile" not in kwargs


VIRTUAL_SCRIPT = textwrap.dedent(
    """
    import json
    import tensorflow as tf
    from utils import runtime
    from utils.tf import strategies, tpu_connect

    rt = runtime.Runtime(platform="local", accelerator="cpu", tpu=None, gpus=(),
                         cpu_model="test", cpu_cores=2, cpu_features=(), frameworks={})
    out = {}
    s = strategies.get_strategy(virtual_cpus=8, runtime=rt)
    out["kind"] = strategies.strategy_kind(s)
    out["class"] = type(s).__name__
    out["replicas"] = s.num_replicas_in_sync
    out["describe"] = strategies.describe_strategy(s)
    out["compile"] = strategies.compile_kwargs(s)

    # each replica contributes (replica id + 1) * ones(2, 2) @ ones(2, 2) = 2 * (id + 1)
    def step():
        ctx = tf.distribute.get_replica_context()
        k = tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)
        return tf.matmul(k * tf.ones((2, 2)), tf.ones((2, 2)))[0, 0]

    per_replica = s.run(tf.function(step))
    out["per_replica"] = [float(v) for v in s.experimental_local_results(per_replica)]
    out["sum"] = float(s.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))

    # the same request again: an equivalent strategy, no "cannot be modified" error
    again = strategies.get_strategy(virtual_cpus=8, runtime=rt)
    out["same_again"] = again is s
    strategies._STRATEGY_CACHE.clear()  # as after re-importing the module in a notebook
    again2 = strategies.get_strategy(virtual_cpus=8, runtime=rt)
    out["again_replicas"] = again2.num_replicas_in_sync
    try:
        strategies.get_strategy(virtual_cpus=4, runtime=rt)
        out["conflict"] = None
    except strategies.VirtualDevicesError as exc:
        out["conflict"] = str(exc)
    print("RESULT " + json.dumps(out))
    """
)


def test_virtual_cpus_in_a_fresh_interpreter():
    out = fresh_process.run_python_json(VIRTUAL_SCRIPT, timeout_s=240)
    assert out["class"] == "MirroredStrategy" and out["kind"] == "mirrored-cpu"
    assert out["replicas"] == 8
    assert "CPU:7" in out["describe"]
    assert out["compile"] == {}
    assert out["per_replica"] == [2.0 * (i + 1) for i in range(8)]
    assert out["sum"] == sum(2.0 * (i + 1) for i in range(8))  # 72
    assert out["same_again"] is True
    assert out["again_replicas"] == 8
    assert out["conflict"] and "Restart the kernel" in out["conflict"]
    assert "8 logical CPU device" in out["conflict"] and "4 virtual" in out["conflict"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_matmul_is_one_product_and_its_peak_is_positive(dtype, jit_compile):
    n = 64
    fn = peak.matmul(n, dtype, jit_compile=jit_compile)
    a = tf.cast(tf.random.stateless_uniform((n, n), seed=(0, 1), minval=-1.0, maxval=1.0), dtype)
    b = tf.cast(tf.random.stateless_uniform((n, n), seed=(2, 3), minval=-1.0, maxval=1.0), dtype)
    expected = float(tf.reduce_sum(tf.cast(tf.linalg.matmul(a, b), tf.float32)))
    assert float(fn()) == pytest.approx(expected, rel=0.05 if dtype == "bfloat16" else 1e-4)
    flops = peak.matmul_peak(n, dtype, jit_compile=jit_compile, repeats=2)()
    assert flops > 0


def test_matmul_peak_uses_the_one_measurement(monkeypatch):
    seen = {}

    def fake_measured_peak(fn, n, *, repeats):
        seen.update(n=n, repeats=repeats)
        return 1.0e9

    monkeypatch.setattr(peak, "measured_peak", fake_measured_peak)
    assert peak.matmul_peak(32, repeats=4)() == 1.0e9
    assert seen == {"n": 32, "repeats": 4}


def test_matmul_rejects_a_size_below_one():
    with pytest.raises(ValueError, match="n must be"):
        peak.matmul(0)
