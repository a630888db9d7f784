"""The pod-ready worker's two start-up paths (utils.jax.multihost_env): under utils.launcher (the
rehearsal's variables translated into jax.distributed.initialize's arguments, CPU devices, gloo)
and on a TPU slice (faked: its environment, a recording stand-in for jax.distributed), plus the
rule that the workers never import utils.launcher."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytest.importorskip("jax")

from utils.jax import multihost_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER_ENV = {
    "COURSE_COORDINATOR": "127.0.0.1:23456",
    "COURSE_NUM_PROCESSES": "2",
    "COURSE_PROCESS_ID": "1",
}
# What a GKE TPU slice sets (a TPU VM's runtime answers from its metadata server instead).
SLICE_ENV = {"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "10.0.0.2,10.0.0.3"}


class FakeDistributed:
    def __init__(self):
        self.calls = []

    def initialize(self, **kwargs):
        self.calls.append(kwargs)


class FakeConfig:
    def __init__(self):
        self.updates = {}

    def update(self, name, value):
        self.updates[name] = value


def test_launcher_env_is_translated_into_initialize_arguments():
    dist, cfg = FakeDistributed(), FakeConfig()
    kwargs = multihost_env.initialize(45, environ=LAUNCHER_ENV, distributed=dist, config=cfg)
    assert dist.calls == [kwargs]
    assert kwargs == {
        "initialization_timeout": 45,
        "coordinator_address": "127.0.0.1:23456",
        "num_processes": 2,
        "process_id": 1,
    }
    assert cfg.updates == {"jax_cpu_collectives_implementation": "gloo"}


def test_slice_env_calls_initialize_without_arguments():
    dist, cfg = FakeDistributed(), FakeConfig()
    kwargs = multihost_env.initialize(300, environ=SLICE_ENV, distributed=dist, config=cfg)
    assert dist.calls == [{"initialization_timeout": 300}] and kwargs == dist.calls[0]
    assert cfg.updates == {}  # no gloo: the chips' interconnect carries the collectives


def test_prepare_overrides_a_preset_platform_in_the_rehearsal_and_says_so():
    env = {**LAUNCHER_ENV, "JAX_PLATFORMS": "tpu", "SIMULATED_DEVICES": "3"}
    said = []
    assert multihost_env.prepare(environ=env, modules={}, say=said.append) is True
    assert env["JAX_PLATFORMS"] == "cpu"
    assert "--xla_force_host_platform_device_count=3" in env["XLA_FLAGS"]
    assert said and "JAX_PLATFORMS='tpu' overridden" in said[0]
    env = {**LAUNCHER_ENV}
    multihost_env.prepare(devices=1, environ=env, modules={}, say=said.append)
    assert "--xla_force_host_platform_device_count=1" in env["XLA_FLAGS"] and len(said) == 1


def test_prepare_leaves_a_slice_alone():
    env = {**SLICE_ENV, "JAX_PLATFORMS": "tpu"}
    assert multihost_env.prepare(environ=env, modules={}, say=pytest.fail) is False
    assert env == {**SLICE_ENV, "JAX_PLATFORMS": "tpu"}


def test_prepare_after_jax_import_is_refused():
    from utils import simulated_devices

    with pytest.raises(simulated_devices.JaxAlreadyImported):
        multihost_env.prepare(environ={**LAUNCHER_ENV}, modules={"jax": object()})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"COURSE_COORDINATOR": "10.0.0.2:1234"}, "only 127.0.0.1"),
        ({"COURSE_COORDINATOR": "127.0.0.1"}, "not host:port"),
        ({"COURSE_PROCESS_ID": "2"}, "outside 0..1"),
        ({"COURSE_NUM_PROCESSES": "two"}, "must be integers"),
        ({"COURSE_PROCESS_ID": None}, "COURSE_PROCESS_ID not set"),
    ],
)
def test_bad_launcher_env_is_named(change, message):
    env = {**LAUNCHER_ENV, **change}
    env = {k: v for k, v in env.items() if v is not None}
    dist = FakeDistributed()
    with pytest.raises(multihost_env.StartupError, match=message):
        multihost_env.initialize(environ=env, distributed=dist, config=FakeConfig())
    assert dist.calls == []  # the error comes before anything waits for peers


@pytest.mark.parametrize(
    "path",
    [
        "utils/jax/multihost_env.py",
        "utils/jax/multihost_worker.py",
        "utils/jax/multihost_input.py",
        "utils/jax/multihost_allreduce.py",
        "utils/jax/multihost_keras.py",
    ],
)
def test_workers_do_not_depend_on_the_launcher(path):
    tree = ast.parse((ROOT / path).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
    assert not [m for m in imported if m and "launcher" in m], imported


def test_prepare_defaults_to_eight_devices_in_all_with_patient_collectives(monkeypatch):
    """No SIMULATED_DEVICES: the one default (8 in all, split over the processes); every worker
    gets XLA's patient-collective flags, also with one device per process."""
    from utils import simulated_devices

    monkeypatch.setattr(simulated_devices, "accepts_patience", lambda: True)
    env = {**LAUNCHER_ENV, "COURSE_NUM_PROCESSES": "2"}
    multihost_env.prepare(environ=env, modules={}, say=lambda _: None)
    assert "--xla_force_host_platform_device_count=4" in env["XLA_FLAGS"]
    assert all(flag in env["XLA_FLAGS"] for flag in simulated_devices.PATIENCE_FLAGS)
    env = {**LAUNCHER_ENV}
    multihost_env.prepare(devices=1, environ=env, modules={}, say=lambda _: None)
    assert all(flag in env["XLA_FLAGS"] for flag in simulated_devices.PATIENCE_FLAGS)
    with pytest.raises(ValueError, match="SIMULATED_DEVICES must be an integer >= 1 and <= 64"):
        multihost_env.prepare(environ={**LAUNCHER_ENV, "SIMULATED_DEVICES": "65"}, modules={})
