"""utils.bootstrap: install plans, the local 'no install' rule, parameter checks."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from utils import bootstrap


def fake_runtime(accelerator: str = "cpu", platform: str = "local") -> SimpleNamespace:
    return SimpleNamespace(accelerator=accelerator, platform=platform)


def test_tensorflow_on_a_tpu_vm_installs_tensorflow_tpu_with_libtpu_index():
    plan = bootstrap.install_plan(fake_runtime("tpu", "colab"), ["tensorflow"], versions={})
    assert plan == [
        [
            f"tensorflow-tpu=={bootstrap.TENSORFLOW_TPU_VERSION}",
            "-f",
            bootstrap.LIBTPU_TF_INDEX,
        ]
    ]


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


def test_check_params_accepts_right_types_and_none_when_allowed():
    bootstrap.check_params(EPOCHS=(3, int, False), LR=(1, float, False), SUBSET=(None, int, True))


@pytest.mark.parametrize(
    ("value", "expected", "allow_none"),
    [("3", int, False), (True, int, False), (None, int, False), (2.5, int, True)],
)
def test_check_params_rejects_wrong_types_with_the_papermill_fix(value, expected, allow_none):
    with pytest.raises(TypeError) as info:
        bootstrap.check_params(EPOCHS=(value, expected, allow_none))
    message = str(info.value)
    assert "EPOCHS" in message and repr(value) in message and "-p EPOCHS" in message


def test_check_params_rules_name_the_parameter_and_the_allowed_values() -> None:
    from utils.bootstrap import Choice, Range

    bootstrap.check_params(
        EPOCHS=(3, int, True, Range(min=1)),
        MODE=("sqrt", str, False, Choice("none", "sqrt")),
        SIZE=(None, int, True, Range(min=8)),
    )
    with pytest.raises(ValueError, match=r"EPOCHS must be in \[1, inf\].*got 0"):
        bootstrap.check_params(EPOCHS=(0, int, True, Range(min=1)))
    with pytest.raises(ValueError, match=r"LATENCY_MS must be in \[0, inf\].*-5"):
        bootstrap.check_params(LATENCY_MS=(-5.0, float, False, Range(min=0)))
    with pytest.raises(ValueError, match=r"MODE must be one of 'none', 'sqrt'.*'cube'"):
        bootstrap.check_params(MODE=("cube", str, False, Choice("none", "sqrt")))
