"""utils.bootstrap: install plans, the local 'no install' rule, parameter checks."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from tests.tools.platforms import PLATFORMS
from utils import bootstrap


def fake_runtime(accelerator: str = "cpu", platform: str = "local") -> SimpleNamespace:
    return SimpleNamespace(accelerator=accelerator, platform=platform)


def test_tensorflow_on_a_tpu_installs_host_side_tensorflow_cpu_only():
    # tensorflow-tpu (with its own libtpu) is the explicit opt-in of prepare(), never a plan.
    plan = bootstrap.install_plan(fake_runtime("tpu", "colab"), ["tensorflow"], versions={})
    assert plan == [[f"tensorflow-cpu=={bootstrap.TENSORFLOW_CPU_VERSION}"]]


def test_tensorflow_elsewhere_installs_plain_tensorflow():
    plan = bootstrap.install_plan(fake_runtime("gpu", "colab"), ["tensorflow"], versions={})
    assert plan == [[f"tensorflow=={bootstrap.TENSORFLOW_VERSION}"]]


def test_torch_xla_matches_a_preinstalled_torch():
    plan = bootstrap.install_plan(
        fake_runtime("tpu", "colab"), ["torch_xla"], versions={"torch": "2.8.0+cpu"}
    )
    assert plan == [["torch_xla[tpu]==2.8.*"]]


def test_torch_xla_without_torch_installs_the_tested_pair():
    plan = bootstrap.install_plan(fake_runtime("cpu", "kaggle"), ["torch_xla"], versions={})
    assert plan == [["torch==2.9.0", "torch_xla==2.9.0"]]


def test_prepare_sets_quiet_defaults_without_overriding(monkeypatch):
    env = {"TF_CPP_MIN_LOG_LEVEL": "0"}
    rt = bootstrap.prepare([], env=env)
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "0"  # the user's choice wins
    assert env["GRPC_VERBOSITY"] == "ERROR"
    assert rt.accelerator in {"cpu", "gpu", "tpu"}


def test_prepare_never_installs_locally():
    with pytest.raises(ModuleNotFoundError, match="make setup"):
        bootstrap.prepare(["no_such_module_for_the_course"], env={})


def test_prepare_reports_pip_failure_with_its_output(monkeypatch):
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, stdout="", stderr="ERROR: no network")

    monkeypatch.setattr(bootstrap.subprocess, "run", fake_run)
    env = {"COLAB_RELEASE_TAG": "release-colab_20261101-060000_RC00"}
    with pytest.raises(RuntimeError, match="no network"):
        bootstrap.prepare(["no_such_module_for_the_course"], env=env)
    assert calls and calls[0][1:4] == ["-m", "pip", "install"]


def test_prepare_respects_course_no_install_on_colab():
    env = {"COLAB_RELEASE_TAG": "release-colab_20261101-060000_RC00", "COURSE_NO_INSTALL": "1"}
    with pytest.raises(ModuleNotFoundError):
        bootstrap.prepare(["no_such_module_for_the_course"], env=env)


# --------------------------------------------------------------------------- runtimes, faked
# Package sets of the TPU images (Colab: backend-info pip-freeze.tpu.txt 2026-08; Kaggle:
# docker-python tpu/ 2026-08): what `importlib.metadata` would report there.
COLAB_TPU_ENV = PLATFORMS["colab"]["env"]  # what the image sets (one home: the platform matrix)
COLAB_TPU_PACKAGES = {
    "jax": "0.7.2", "keras": "3.13.2", "libtpu": "0.0.21.1", "torch": "2.9.0+cpu",
    "torch_xla": "2.9.0",
}  # fmt: skip
KAGGLE_TPU_ENV = PLATFORMS["kaggle"]["env"]
KAGGLE_TPU_PACKAGES = {
    "tensorflow-cpu": "2.20.0", "jax": "0.7.2", "keras": "3.12.0", "libtpu": "0.0.17",
    "torch": "2.8.0+cpu", "torch_xla": "2.8.0",
}  # fmt: skip
CLOUD_TF_VM_ENV = {"TPU_ACCELERATOR_TYPE": "v5litepod-8", "TPU_WORKER_HOSTNAMES": "localhost"}
CLOUD_TF_VM_PACKAGES = {"tensorflow-tpu": "2.20.0", "libtpu": "0.0.14", "keras": "3.10.0"}
LAPTOP_PACKAGES = {"tensorflow": "2.21.0", "jax": "0.10.2", "keras": "3.15.1", "torch": "2.9.0"}


@pytest.fixture
def no_pip(monkeypatch):
    """Fail the test if anything runs pip."""

    def refuse(command, **kwargs):
        raise AssertionError(f"must not run {command}")

    monkeypatch.setattr(bootstrap.subprocess, "run", refuse)


def _verdicts(env, packages):
    rt = bootstrap.runtime.detect(env=env, run=None, frameworks=packages)
    return {s.stack: s for s in bootstrap.stack_status(rt, packages)}


@pytest.fixture
def fake_pip(monkeypatch):
    """Record pip commands; a command whose last argument is in ``fake_pip.fail`` fails."""
    calls: list[list[str]] = []
    fail: set[str] = set()

    def run(command, **kwargs):
        calls.append(command)
        code = 1 if command[-1] in fail else 0
        return subprocess.CompletedProcess(command, code, stdout="", stderr="ERROR: no network")

    monkeypatch.setattr(bootstrap.subprocess, "run", run)
    return SimpleNamespace(calls=calls, fail=fail)


TF_CPU = f"tensorflow-cpu=={bootstrap.TENSORFLOW_CPU_VERSION}"


def test_colab_tpu_runs_keras_jax_as_shipped_and_adds_host_side_tensorflow(fake_pip, capsys):
    status = _verdicts(COLAB_TPU_ENV, COLAB_TPU_PACKAGES)
    assert status["Keras+JAX"].verdict == "works as shipped"
    assert status["TF TPUStrategy"].verdict == "needs install"
    assert "not installed" in status["TF TPUStrategy"].detail
    assert "colabtools#5174" in status["TF TPUStrategy"].detail
    assert status["torch_xla"].verdict == "works as shipped"
    rt = bootstrap.prepare(["jax", "keras"], env=dict(COLAB_TPU_ENV), versions=COLAB_TPU_PACKAGES)
    assert (rt.platform, rt.accelerator) == ("colab", "tpu")
    printed = capsys.readouterr().out
    assert "Keras+JAX" in printed and "works as shipped" in printed  # never silent on a TPU
    assert "TensorFlow here" not in printed and fake_pip.calls == []  # a JAX notebook: no TF

    # A TensorFlow notebook does not stop: tensorflow-cpu for tf.data, TPU cells gated.
    rt = bootstrap.prepare(["tensorflow"], env=dict(COLAB_TPU_ENV), versions=COLAB_TPU_PACKAGES)
    assert [c[4:] for c in fake_pip.calls] == [["-q", TF_CPU]]
    assert (rt.tf_host, rt.tf_on_device) == (True, False)
    lines = [line for line in capsys.readouterr().out.splitlines() if "TensorFlow here" in line]
    assert len(lines) == 1 and "tensorflow-cpu" in lines[0] and "INSTALL_TENSORFLOW_TPU" in lines[0]
    assert bootstrap.tf_runs_here(rt, "the input pipeline", host_only=True)
    assert capsys.readouterr().out == ""
    assert not bootstrap.tf_runs_here(rt, "TPUStrategy training")
    skip = capsys.readouterr().out
    assert skip.startswith("Skipped on this runtime: TPUStrategy training (")
    assert "INSTALL_TENSORFLOW_TPU = True" in skip and skip.count("\n") == 1


def test_colab_tpu_without_network_still_runs_the_other_sections(fake_pip, capsys):
    fake_pip.fail.add(TF_CPU)
    rt = bootstrap.prepare(["tensorflow"], env=dict(COLAB_TPU_ENV), versions=COLAB_TPU_PACKAGES)
    assert (rt.tf_host, rt.tf_on_device) == (False, False)
    assert "Could not install tensorflow-cpu" in capsys.readouterr().out
    assert not bootstrap.tf_runs_here(rt, "the tf.data pipeline", host_only=True)
    assert f"pip install {TF_CPU}" in capsys.readouterr().out


def test_tf_runs_here_needs_what_prepare_returned():
    with pytest.raises(TypeError, match="bootstrap.prepare"):
        bootstrap.tf_runs_here(fake_runtime(), "anything")


def test_colab_tpu_installs_tensorflow_tpu_when_opted_in(monkeypatch, capsys):
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="", stderr="")

    monkeypatch.setattr(bootstrap.subprocess, "run", fake_run)
    rt = bootstrap.prepare(
        ["tensorflow"],
        env=dict(COLAB_TPU_ENV),
        versions=COLAB_TPU_PACKAGES,
        install_tensorflow_tpu=True,
    )
    assert [c[4:] for c in calls] == [["-q", f"tensorflow-tpu=={bootstrap.TENSORFLOW_TPU_VERSION}"]]
    printed = capsys.readouterr().out
    assert "colabtools#5174" in printed  # the risk is stated when installing
    assert rt.tf_on_device and "TensorFlow here" not in printed


def test_kaggle_tpu_tensorflow_cpu_is_not_tensorflow_on_the_tpu(no_pip, capsys):
    status = _verdicts(KAGGLE_TPU_ENV, KAGGLE_TPU_PACKAGES)
    assert status["Keras+JAX"].verdict == "works as shipped"
    assert status["TF TPUStrategy"].verdict == "needs install"
    assert "tensorflow-cpu 2.20.0 is importable but has no TPU kernels" in (
        status["TF TPUStrategy"].detail
    )
    rt = bootstrap.prepare(["tensorflow"], env=dict(KAGGLE_TPU_ENV), versions=KAGGLE_TPU_PACKAGES)
    assert (rt.tf_host, rt.tf_on_device) == (True, False)  # tf.data runs, TPUStrategy does not
    assert "tensorflow-cpu 2.20.0 runs tf.data on the host" in capsys.readouterr().out
    assert bootstrap.tf_runs_here(rt, "the tf.data pipeline", host_only=True)
    assert not bootstrap.tf_runs_here(rt, "TPUStrategy training")
    assert capsys.readouterr().out.startswith("Skipped on this runtime: TPUStrategy training")


def test_tensorflow_tpu_without_libtpu_is_named():
    status = _verdicts(COLAB_TPU_ENV, {"tensorflow-tpu": "2.20.0"})
    assert "libtpu MISSING" in status["TF TPUStrategy"].detail


def test_cloud_tpu_vm_with_a_tf_image_uses_tensorflow_tpu_as_shipped(no_pip, capsys):
    status = _verdicts(CLOUD_TF_VM_ENV, CLOUD_TF_VM_PACKAGES)
    assert status["TF TPUStrategy"].verdict == "works as shipped"
    assert status["Keras+JAX"].verdict == "needs install"
    rt = bootstrap.prepare(["tensorflow"], env=dict(CLOUD_TF_VM_ENV), versions=CLOUD_TF_VM_PACKAGES)
    assert (rt.platform, rt.accelerator) == ("local", "tpu")
    assert (rt.tf_host, rt.tf_on_device) == (True, True)
    printed = capsys.readouterr().out
    assert "TF TPUStrategy" in printed and "TensorFlow here" not in printed
    assert bootstrap.tf_runs_here(rt, "TPUStrategy training")
    assert capsys.readouterr().out == ""


def test_cpu_laptop_is_quiet_and_says_cpu_only(no_pip, capsys):
    rt = bootstrap.prepare(["numpy"], env={}, versions=LAPTOP_PACKAGES)
    assert (rt.platform, rt.accelerator) == ("local", "cpu")
    assert (rt.tf_host, rt.tf_on_device) == (True, True)  # the CPU is TensorFlow's device here
    assert bootstrap.tf_runs_here(rt, "TPUStrategy training")
    assert bootstrap.tf_runs_here(rt, "the tf.data pipeline", host_only=True)
    assert capsys.readouterr().out == ""  # nothing to report off a TPU: stored outputs stay stable
    status = _verdicts({}, LAPTOP_PACKAGES)
    assert {s.verdict for s in status.values()} <= {"CPU only", "not supported", "needs install"}
    assert status["TorchTPU"].verdict == "not supported"


@pytest.mark.parametrize("value", ["", "   ", "10.0.0.2:8470", "grpc://tpu:8470"])
def test_stray_colab_tpu_addr_on_a_laptop_never_installs(no_pip, value):
    env = {"COLAB_TPU_ADDR": value}
    rt = bootstrap.runtime.detect(env=env, run=None, frameworks={})
    assert rt.platform == "local"
    with pytest.raises(ModuleNotFoundError, match="make setup"):
        bootstrap.prepare(["no_such_module_for_the_course"], env=env)


def test_empty_colab_release_tag_is_not_colab(no_pip):
    with pytest.raises(ModuleNotFoundError, match="make setup"):
        bootstrap.prepare(["no_such_module_for_the_course"], env={"COLAB_RELEASE_TAG": ""})


@pytest.mark.parametrize(("system", "machine"), [("Darwin", "arm64"), ("Windows", "AMD64"),
                                                 ("Linux", "aarch64")])  # fmt: skip
def test_torch_xla_missing_on_a_laptop_without_its_wheels_says_why(monkeypatch, system, machine):
    monkeypatch.setattr(bootstrap.platform, "system", lambda: system)
    monkeypatch.setattr(bootstrap.platform, "machine", lambda: machine)
    monkeypatch.setattr(bootstrap, "is_installed", lambda module: module != "torch_xla")
    with pytest.raises(ModuleNotFoundError) as info:
        bootstrap.prepare(["torch_xla"], env={}, versions=LAPTOP_PACKAGES)
    message = str(info.value)
    assert "Linux on x86_64 only" in message and f"{system} on {machine}" in message
    assert "make setup" not in message  # it would not help there


def test_torch_xla_missing_on_linux_x86_64_points_to_make_setup(monkeypatch):
    monkeypatch.setattr(bootstrap.platform, "system", lambda: "Linux")
    monkeypatch.setattr(bootstrap.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(bootstrap, "is_installed", lambda module: module != "torch_xla")
    with pytest.raises(ModuleNotFoundError, match="make setup"):
        bootstrap.prepare(["torch_xla"], env={}, versions=LAPTOP_PACKAGES)
