"""Tests for utils.tf.tpu_connect: error mapping, bounded connection attempts, strategy choice.

They import TensorFlow (once, in this process). The only address ever contacted is a port on
127.0.0.1 where nothing listens. Virtual CPU devices must be configured before TensorFlow
initialises its devices, so those tests run in a fresh interpreter.
"""

from __future__ import annotations

import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

from utils import fresh_process  # noqa: E402
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


def closed_port() -> int:
    """A loopback port with nothing listening: bind to port 0, read the port, close."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(autouse=True)
def fresh_cache():
    strategies._STRATEGY_CACHE.clear()
    yield
    strategies._STRATEGY_CACHE.clear()


# --------------------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("text", "kind", "tpu", "port"),
    [
        ("local", "local", "local", None),
        ("10.0.0.2:8470", "grpc", "grpc://10.0.0.2:8470", 8470),
        ("grpc://10.1.2.3:1234", "grpc", "grpc://10.1.2.3:1234", 1234),
        ("grpc://10.1.2.3", "grpc", "grpc://10.1.2.3:8470", 8470),
        ("my-tpu-1", "name", "my-tpu-1", None),
    ],
)
def test_parse_tpu_address(text, kind, tpu, port):
    target = tpu_connect.parse_tpu_address(text)
    assert (target.kind, target.tpu, target.port) == (kind, tpu, port)


@pytest.mark.parametrize("text", ["", "10.0.0.2:99999", "10.0.0.2:port", "My TPU!", "grpc://:8470"])
def test_parse_tpu_address_rejects_garbage_clearly(text):
    with pytest.raises(tpu_connect.TPUConnectionError) as info:
        tpu_connect.parse_tpu_address(text)
    assert "Tried:" in str(info.value) and "Fix:" in str(info.value)
    assert "grpc://" in info.value.fix


def test_resolve_target_follows_the_runtime():
    vm = fake_runtime(
        "tpu", runtime_mod.TPUInfo(mode="vm", accelerator_type="v5e-1", address="local")
    )
    assert tpu_connect.resolve_target(runtime=vm).tpu == "local"
    node = fake_runtime("tpu", runtime_mod.TPUInfo(mode="node", address="grpc://10.0.0.2:8470"))
    assert tpu_connect.resolve_target(runtime=node).tpu == "grpc://10.0.0.2:8470"
    named = fake_runtime("tpu", runtime_mod.TPUInfo(mode="node", name="my-tpu"))
    assert tpu_connect.resolve_target(runtime=named).kind == "name"
    # an explicit address wins over what the runtime found
    assert tpu_connect.resolve_target("grpc://127.0.0.1:9", runtime=vm).kind == "grpc"


def test_resolve_target_without_tpu_explains_the_bare_resolver_error():
    with pytest.raises(tpu_connect.TPUConnectionError) as info:
        tpu_connect.resolve_target(runtime=fake_runtime())
    assert "Please provide a TPU Name" in info.value.why
    assert "Runtime > Change runtime type" in info.value.fix


# --------------------------------------------------------------------------- error mapping


def test_real_bare_resolver_error_is_mapped(monkeypatch):
    for var in ("TPU_NAME", "TPU_CONFIG", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="Please provide a TPU Name") as info:
        tf.distribute.cluster_resolver.TPUClusterResolver()
    err = tpu_connect.explain_tpu_error(info.value, tried="TPUClusterResolver()")
    assert "tpu='local'" in err.fix
    assert "silently" in err.fix


CONFIGURE_MSG = (
    "TPUs not found in the cluster. Failed in initialization: No OpKernel was registered to "
    "support Op 'ConfigureDistributedTPU' used by {{node ConfigureDistributedTPU}}"
)


def test_missing_tpu_kernels_without_tensorflow_tpu_says_install():
    exc = tf.errors.NotFoundError(None, None, CONFIGURE_MSG)
    err = tpu_connect.explain_tpu_error(
        exc, tried="x", tensorflow_tpu_version="", lockfile_exists=False
    )
    assert "pip install tensorflow-tpu==" in err.fix
    assert "libtpu" in err.fix
    assert "ConfigureDistributedTPU" in err.why


def test_missing_tpu_kernels_with_lockfile_says_busy():
    exc = tf.errors.NotFoundError(None, None, CONFIGURE_MSG)
    err = tpu_connect.explain_tpu_error(
        exc, tried="x", tensorflow_tpu_version="2.20.0", lockfile_exists=True
    )
    assert "another process" in err.why
    assert "Restart the runtime" in err.fix


def test_missing_tpu_kernels_with_tensorflow_tpu_and_no_lock_checks_libtpu():
    exc = tf.errors.NotFoundError(None, None, CONFIGURE_MSG)
    err = tpu_connect.explain_tpu_error(
        exc, tried="x", tensorflow_tpu_version="2.20.0", lockfile_exists=False
    )
    assert "/dev/accel" in err.fix and "same version" in err.fix


@pytest.mark.parametrize(
    "message",
    [
        "ABORTED: The TPU is already in use by process with pid 1234. Not attempting to load "
        "libtpu.so in this process.",
        "Unable to initialize backend 'tpu': ABORTED: ...",
        "open(/dev/accel0): Device or resource busy",
        "could not acquire /tmp/libtpu_lockfile",
    ],
)
def test_tpu_held_by_another_process(message):
    err = tpu_connect.explain_tpu_error(RuntimeError(message), tried="x", lockfile_exists=False)
    assert "another process holds the TPU" in err.why
    assert "Restart the runtime" in err.fix
    assert "end the other process" in err.fix


def test_version_mismatch_and_unknown_errors():
    exc = tf.errors.NotFoundError(
        None, None, "'__inference__tpu_init_fn_4' is neither a type of a primitive operation"
    )
    assert "same TensorFlow version" in tpu_connect.explain_tpu_error(exc, tried="x").fix
    unknown = tpu_connect.explain_tpu_error(KeyError("weird"), tried="x")
    assert "KeyError" in unknown.why and "troubleshooting" in unknown.fix


def test_real_initialize_on_cpu_maps_to_install_advice():
    """On this CPU machine, initialising 'local' raises the real ConfigureDistributedTPU error."""
    if tpu_connect.bootstrap.installed_version("tensorflow-tpu") or os.path.exists(
        tpu_connect.LIBTPU_LOCKFILE
    ):
        pytest.skip("tensorflow-tpu or a TPU lock is present: not the plain-CPU case")
    with pytest.raises(tpu_connect.TPUConnectionError) as info:
        tpu_connect.connect_tpu("local", timeout_s=30)
    assert "ConfigureDistributedTPU" in info.value.why
    assert "tensorflow-tpu" in info.value.fix
    assert isinstance(info.value.__cause__, tf.errors.NotFoundError)


# --------------------------------------------------------------------------- bounded time


def test_unreachable_loopback_port_fails_fast_and_clearly():
    port = closed_port()
    start = time.monotonic()
    with pytest.raises(tpu_connect.TPUConnectionError) as info:
        tpu_connect.connect_tpu(f"grpc://127.0.0.1:{port}", timeout_s=5.0)
    elapsed = time.monotonic() - start
    assert f"127.0.0.1:{port}" in info.value.tried
    assert "nothing is listening" in info.value.why
    assert "address='local'" in info.value.fix
    # Bounded by timeout_s (+ TensorFlow's start on a loaded machine), not by gRPC's retries.
    assert elapsed < 120, f"connect_tpu took {elapsed:.0f} s with timeout_s=5"


def test_call_with_deadline():
    assert tpu_connect._call_with_deadline(lambda: 42, 5.0, "answer") == 42
    with pytest.raises(TimeoutError, match="sleeping did not finish"):
        tpu_connect._call_with_deadline(lambda: time.sleep(2), 0.05, "sleeping")
    with pytest.raises(ZeroDivisionError):
        tpu_connect._call_with_deadline(lambda: 1 / 0, 5.0, "dividing")


# --------------------------------------------------------------------------- strategies


def test_cpu_gives_the_default_strategy():
    strategy = strategies.get_strategy(runtime=fake_runtime())
    assert strategy is tf.distribute.get_strategy()
    assert strategy.num_replicas_in_sync == 1
    assert strategies.strategy_kind(strategy) == "default"
    assert strategies.describe_strategy(strategy).startswith("default strategy: 1 replica in sync")
    assert strategies.compile_kwargs(strategy) == {}
    assert strategies.compile_kwargs(strategy, steps_per_execution=8) == {"steps_per_execution": 8}


def unreachable_tpu_runtime() -> runtime_mod.Runtime:
    address = f"grpc://127.0.0.1:{closed_port()}"
    return fake_runtime("tpu", runtime_mod.TPUInfo(mode="node", address=address))


def test_detected_tpu_that_fails_raises_by_default():
    with pytest.raises(tpu_connect.TPUConnectionError, match="nothing is listening"):
        strategies.get_strategy(runtime=unreachable_tpu_runtime(), timeout_s=5.0)


def test_detected_tpu_that_fails_falls_back_loudly_only_when_allowed(capsys):
    with pytest.warns(strategies.CPUFallbackWarning, match="NOT USING THE ACCELERATOR"):
        strategy = strategies.get_strategy(
            runtime=unreachable_tpu_runtime(), timeout_s=5.0, allow_cpu_fallback=True
        )
    assert strategies.strategy_kind(strategy) == "default"
    out = capsys.readouterr().out
    assert "NOT USING THE ACCELERATOR" in out and "nothing is listening" in out


def test_gpu_seen_but_not_by_tensorflow_is_not_silent():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("TensorFlow sees a GPU here")
    gpu_box = fake_runtime("gpu", gpus=("NVIDIA T4",))
    with pytest.raises(RuntimeError, match="tensorflow\\[and-cuda\\]"):
        strategies.get_strategy(runtime=gpu_box)
    with pytest.warns(strategies.CPUFallbackWarning):
        strategies.get_strategy(runtime=gpu_box, allow_cpu_fallback=True)


def test_virtual_cpus_must_be_positive():
    with pytest.raises(ValueError, match="virtual_cpus"):
        strategies.get_strategy(virtual_cpus=0, runtime=fake_runtime())


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


def test_save_and_load_options_use_the_host():
    assert tpu_connect.save_options().experimental_io_device == "/job:localhost"
    assert tpu_connect.load_options().experimental_io_device == "/job:localhost"
    assert tpu_connect.checkpoint_options().experimental_io_device == "/job:localhost"


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
    assert "8 logical CPU devices" in out["conflict"] and "4 virtual" in out["conflict"]


# --------------------------------------------------------------------------- issue 16, item 1

SILENT_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time, warnings
    from utils import runtime
    from utils.tf import strategies, tpu_connect
    import tensorflow as tf

    address, mode = sys.argv[1], sys.argv[2]
    rt = runtime.Runtime(platform="local", accelerator="cpu", tpu=None, gpus=(),
                         cpu_model="test", cpu_cores=2, cpu_features=(), frameworks={})
    out = {}
    start = time.monotonic()
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            s = strategies.get_strategy(tpu_address=address, runtime=rt, timeout_s=3.0,
                                        allow_cpu_fallback=(mode == "fallback"))
        out["kind"] = strategies.strategy_kind(s)
        # The first TensorFlow operation after the failed connection: it hung before the fix.
        out["sum"] = float(tf.reduce_sum(tf.ones((4, 4))).numpy())
    except tpu_connect.TPUConnectionError as exc:
        out["why"] = exc.why
        out["process_unusable"] = exc.process_unusable
        out["sum"] = float(tf.reduce_sum(tf.ones((4, 4))).numpy())
    out["seconds"] = time.monotonic() - start
    children = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            children += f.read().split()
    out["children"] = children
    print("RESULT " + json.dumps(out), flush=True)
    os._exit(0)
    """
)


@pytest.fixture
def silent_listener():
    """A loopback port that accepts TCP connections (the kernel's backlog) but never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"grpc://127.0.0.1:{sock.getsockname()[1]}"


def _run_silent(address: str, mode: str) -> dict:
    code = SILENT_SCRIPT.replace("sys.argv[1], sys.argv[2]", f"{address!r}, {mode!r}")
    return fresh_process.run_python_json(code, timeout_s=300)  # the bound: never a hang


def test_silent_tpu_address_then_cpu_fallback_still_trains(silent_listener):
    out = _run_silent(silent_listener, "fallback")
    assert out["kind"] == "default"  # the fallback was taken ...
    assert out["sum"] == 16.0  # ... and TensorFlow still runs afterwards
    assert out["children"] == []  # the probe process is gone


def test_silent_tpu_address_without_fallback_fails_clearly_and_harmlessly(silent_listener):
    out = _run_silent(silent_listener, "strict")
    assert "did not answer as a TPU" in out["why"]
    assert out["process_unusable"] is False
    assert out["sum"] == 16.0
    assert out["children"] == []


def test_fallback_is_refused_when_tensorflow_may_still_wait(monkeypatch):
    def stuck(*args, **kwargs):
        raise tpu_connect.TPUConnectionError(
            "connecting",
            "connecting did not finish within 1.0 s",
            "Restart the runtime",
            process_unusable=True,
        )

    monkeypatch.setattr(strategies, "connect_tpu", stuck)
    with pytest.raises(tpu_connect.TPUConnectionError, match="CPU fallback is refused") as info:
        strategies.get_strategy(
            tpu_address="grpc://127.0.0.1:1", runtime=fake_runtime(), allow_cpu_fallback=True
        )
    assert info.value.process_unusable and "Restart the runtime" in info.value.fix


@pytest.mark.parametrize("value", [2.5, "8", True])
def test_virtual_cpus_of_the_wrong_type_is_named(value):
    with pytest.raises(TypeError, match="virtual_cpus must be a whole number"):
        strategies.get_strategy(virtual_cpus=value, runtime=fake_runtime())


def test_install_advice_takes_libtpu_from_pypi():
    err = tpu_connect.explain_tpu_error(
        tf.errors.NotFoundError(None, None, "No OpKernel ... 'ConfigureDistributedTPU'"),
        tried="x",
        tensorflow_tpu_version="",
        lockfile_exists=False,
    )
    assert "pip install tensorflow-tpu==" in err.fix
    assert "-f " not in err.fix and "libtpu-tf-releases" not in err.fix
    assert "5228" not in err.fix
