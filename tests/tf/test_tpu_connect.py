"""Tests for utils.tf.tpu_connect and utils.tf.strategies: the bounded trial, strategy choice.

They import TensorFlow (once, in this process). The only address ever contacted is a port on
127.0.0.1 that accepts connections and never answers. Virtual CPU devices must be configured
before TensorFlow initialises its devices, so those tests run in a fresh interpreter.
"""

from __future__ import annotations

import socket
import textwrap
import time
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

from utils import bootstrap, fresh_process  # noqa: E402
from utils import runtime as runtime_mod  # noqa: E402
from utils.tf import strategies, tpu_connect  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


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


# --------------------------------------------------------------------------- the trial


def test_trial_on_this_cpu_reports_the_real_error():
    """On a machine without TPU kernels, the trial returns TensorFlow's own first line."""
    if bootstrap.installed_version("tensorflow-tpu"):
        pytest.skip("tensorflow-tpu is installed: not the plain-CPU case")
    error = runtime_mod.try_resolver("local", timeout_s=30)
    assert error and error.startswith("NotFoundError") and "ConfigureDistributedTPU" in error


def test_a_silent_address_costs_the_trial_not_this_process():
    """An address that accepts TCP and never answers: the trial gives up within its limit."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        start = time.monotonic()
        error = runtime_mod.try_resolver(f"grpc://127.0.0.1:{sock.getsockname()[1]}", timeout_s=3)
    assert error == "no answer within 3 s", error
    assert time.monotonic() - start < 3 + runtime_mod.IMPORT_ALLOWANCE_S
    assert float(tf.reduce_sum(tf.ones((4, 4)))) == 16.0  # this process's TensorFlow still works


def test_connect_tpu_on_this_cpu_says_what_to_do():
    if bootstrap.installed_version("tensorflow-tpu"):
        pytest.skip("tensorflow-tpu is installed: not the plain-CPU case")
    with pytest.raises(tpu_connect.TPUConnectionError, match="ConfigureDistributedTPU") as info:
        tpu_connect.connect_tpu()
    assert "restart the" in str(info.value) and "tpu='local'" in str(info.value)
    assert isinstance(info.value.__cause__, tf.errors.NotFoundError)


# --------------------------------------------------------------------------- strategies


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


def test_save_options_use_the_host():
    assert tpu_connect.save_options().experimental_io_device == "/job:localhost"


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
