"""Tests for utils.tf.strategies on a TPU whose TensorFlow cannot use it, and utils.tf.peak.

Nothing here contacts a TPU: the runtimes are fakes, and the fallback decides from package
metadata (``utils.bootstrap.tf_on_tpu``) before any connection is tried.
"""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from utils import bootstrap  # noqa: E402
from utils import runtime as runtime_mod  # noqa: E402
from utils.tf import peak, strategies  # noqa: E402


def tpu_vm_runtime() -> runtime_mod.Runtime:
    return runtime_mod.Runtime(
        platform="kaggle",
        accelerator="tpu",
        tpu=runtime_mod.TPUInfo(mode="vm", accelerator_type="v5e-8", generation="v5e", chips=8),
        gpus=(),
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
    rt = tpu_vm_runtime()
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
