"""utils.backend_setup: the Keras backend and JAX device set-up of notebook 02, and its faults."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("jax")

from utils import ROOT, backend_setup  # noqa: E402
from utils.backend_setup import KerasJaxSetupError  # noqa: E402


def fake_keras(backend: str) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(backend=lambda: backend))


def cpus(n: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(platform="cpu", id=i) for i in range(n)]


# --------------------------------------------------------------------------- configure


def test_configure_sets_backend_and_device_flag_keeping_other_flags() -> None:
    env = {"XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2"}
    notes = backend_setup.configure(8, env=env, modules={})
    assert notes == []
    assert env["KERAS_BACKEND"] == "jax"
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0"  # no oneDNN banner if Keras imports TF to save
    flags = env["XLA_FLAGS"].split()
    assert flags[:2] == ["--xla_dump_to=/tmp/x", "--xla_force_host_platform_device_count=8"]
    assert "--xla_force_host_platform_device_count=2" not in flags


def test_configure_one_device_removes_the_flag() -> None:
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    backend_setup.configure(1, env=env, modules={})
    assert "XLA_FLAGS" not in env
    backend_setup.configure(None, env=env, modules={})
    assert "XLA_FLAGS" not in env


def test_configure_overrides_another_backend_before_keras_is_imported() -> None:
    env = {"KERAS_BACKEND": "tensorflow"}
    notes = backend_setup.configure(8, env=env, modules={})
    assert env["KERAS_BACKEND"] == "jax"
    assert len(notes) == 1 and "'tensorflow'" in notes[0] and "takes effect" in notes[0]


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_keras_already_imported_with_another_backend_says_restart(backend: str) -> None:
    env = {"KERAS_BACKEND": backend}
    with pytest.raises(KerasJaxSetupError) as info:
        backend_setup.configure(8, env=env, modules={"keras": fake_keras(backend)})
    message = str(info.value)
    assert repr(backend) in message and "'jax'" in message and "Restart the kernel" in message
    assert env["KERAS_BACKEND"] == backend  # nothing changed


def test_keras_already_imported_with_jax_is_fine() -> None:
    env: dict[str, str] = {}
    backend_setup.configure(8, env=env, modules={"keras": fake_keras("jax")})
    assert env["KERAS_BACKEND"] == "jax"


def test_configure_notes_when_jax_was_imported_first() -> None:
    notes = backend_setup.configure(8, env={}, modules={"jax": object()})
    assert any("jax was imported before XLA_FLAGS" in n for n in notes)


def test_configure_rejects_zero_devices() -> None:
    with pytest.raises(ValueError, match="simulated_devices"):
        backend_setup.configure(0, env={}, modules={})


# --------------------------------------------------------------------------- check_devices


def test_check_devices_accepts_the_asked_count() -> None:
    assert len(backend_setup.check_devices("cpu", 8, devices=cpus(8))) == 8
    assert len(backend_setup.check_devices("cpu", None, devices=cpus(1))) == 1


def test_check_devices_refuses_a_silent_one_device_run() -> None:
    with pytest.raises(KerasJaxSetupError) as info:
        backend_setup.check_devices("cpu", 8, devices=cpus(1))
    message = str(info.value)
    assert "1 CPU device" in message and "8 were asked" in message
    assert "before XLA_FLAGS" in message and "Restart the kernel" in message


def test_tpu_detected_but_jax_sees_only_cpu_is_loud() -> None:
    with pytest.raises(KerasJaxSetupError) as info:
        backend_setup.check_devices("tpu", None, devices=cpus(1), tpu_label="v5e-1")
    message = str(info.value)
    assert "TPU v5e-1" in message and "only 1 CPU device" in message
    assert "jax[tpu]" in message and "libtpu" in message


def test_tpu_devices_pass_whatever_was_simulated() -> None:
    tpus = [SimpleNamespace(platform="tpu", id=i) for i in range(8)]
    assert len(backend_setup.check_devices("tpu", 8, devices=tpus)) == 8


# --------------------------------------------------------------------------- real processes


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    full = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    full.pop("XLA_FLAGS", None)
    full.pop("KERAS_BACKEND", None)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip


def test_configure_before_import_gives_simulated_devices_and_after_import_fails() -> None:
    code = (
        "import json, sys\n"
        "from utils import backend_setup\n"
        "early = sys.argv[1:] == ['early']\n"
        "if early:\n"
        "    import jax; jax.devices()\n"
        "backend_setup.configure(4)\n"
        "import jax\n"
        "try:\n"
        "    n = len(backend_setup.check_devices('cpu', 4)); err = ''\n"
        "except backend_setup.KerasJaxSetupError as e:\n"
        "    n, err = len(jax.devices()), str(e)\n"
        "print(json.dumps([n, err]))\n"
    )
    good = _run(code, {"JAX_PLATFORMS": "cpu"})
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout.splitlines()[-1]) == [4, ""]
    bad = subprocess.run(
        [sys.executable, "-c", code, "early"], cwd=ROOT, capture_output=True, text=True,
        timeout=180, env={**_env_without_flags(), "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    assert bad.returncode == 0, bad.stderr
    n, err = json.loads(bad.stdout.splitlines()[-1])
    assert n == 1 and "JAX sees 1 CPU device(s), but 4 were asked" in err


def _env_without_flags() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "KERAS_BACKEND")}
    env["PYTHONPATH"] = str(ROOT)
    return env
