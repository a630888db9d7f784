"""The pod-ready worker's two start-up paths (utils.jax.multihost_env): under utils.launcher (the
rehearsal's variables translated into jax.distributed.initialize's arguments, CPU devices, gloo)
and on a TPU slice (faked: its environment, a recording stand-in for jax.distributed), plus the
rule that the workers never import utils.launcher; and the per-host shard files: each process's
files give it exactly its rows of every global batch, for any process count."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")

from utils.jax import multihost_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER_ENV = {
    "COURSE_COORDINATOR": "127.0.0.1:23456",
    "COURSE_NUM_PROCESSES": "2",
    "COURSE_PROCESS_ID": "1",
}
# What a GKE TPU slice sets (a TPU VM's runtime answers from its metadata server instead).
SLICE_ENV = {"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "10.0.0.2,10.0.0.3"}


@pytest.fixture
def calls(monkeypatch):
    """What initialize asked of jax.distributed and jax.config, recorded instead of done."""
    seen = {"initialize": [], "config": {}}
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: seen["initialize"].append(kw))
    monkeypatch.setattr(jax.config, "update", lambda k, v: seen["config"].update({k: v}))
    return seen


def test_launcher_env_is_translated_into_initialize_arguments(calls):
    kwargs = multihost_env.initialize(45, environ=LAUNCHER_ENV)
    assert calls["initialize"] == [kwargs]
    assert kwargs == {
        "initialization_timeout": 45,
        "coordinator_address": "127.0.0.1:23456",
        "num_processes": 2,
        "process_id": 1,
    }
    assert calls["config"] == {"jax_cpu_collectives_implementation": "gloo"}


def test_slice_env_calls_initialize_without_arguments(calls):
    kwargs = multihost_env.initialize(300, environ=SLICE_ENV)
    assert calls["initialize"] == [{"initialization_timeout": 300}] == [kwargs]
    assert calls["config"] == {}  # no gloo: the chips' interconnect carries the collectives


def test_prepare_overrides_a_preset_platform_in_the_rehearsal_and_says_so(capsys):
    env = {**LAUNCHER_ENV, "JAX_PLATFORMS": "tpu", "SIMULATED_DEVICES": "3"}
    assert multihost_env.prepare(environ=env, modules={}) is True
    assert env["JAX_PLATFORMS"] == "cpu"
    assert "--xla_force_host_platform_device_count=3" in env["XLA_FLAGS"]
    assert "JAX_PLATFORMS='tpu' overridden" in capsys.readouterr().out
    env = {**LAUNCHER_ENV}
    multihost_env.prepare(devices=1, environ=env, modules={})
    assert "--xla_force_host_platform_device_count=1" in env["XLA_FLAGS"]
    assert capsys.readouterr().out == ""


def test_prepare_leaves_a_slice_alone(capsys):
    env = {**SLICE_ENV, "JAX_PLATFORMS": "tpu"}
    assert multihost_env.prepare(environ=env, modules={}) is False
    assert env == {**SLICE_ENV, "JAX_PLATFORMS": "tpu"} and capsys.readouterr().out == ""


def test_prepare_after_jax_import_is_refused():
    from utils import simulated_devices

    with pytest.raises(simulated_devices.JaxAlreadyImported):
        multihost_env.prepare(environ={**LAUNCHER_ENV}, modules={"jax": object()})


@pytest.mark.parametrize(
    "path",
    [
        "utils/jax/multihost_env.py",
        "utils/jax/multihost_worker.py",
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
    multihost_env.prepare(environ=env, modules={})
    assert "--xla_force_host_platform_device_count=4" in env["XLA_FLAGS"]
    assert all(flag in env["XLA_FLAGS"] for flag in simulated_devices.PATIENCE_FLAGS)
    env = {**LAUNCHER_ENV}
    multihost_env.prepare(devices=1, environ=env, modules={})
    assert all(flag in env["XLA_FLAGS"] for flag in simulated_devices.PATIENCE_FLAGS)
    with pytest.raises(ValueError, match="SIMULATED_DEVICES must be an integer >= 1 and <= 64"):
        multihost_env.prepare(environ={**LAUNCHER_ENV, "SIMULATED_DEVICES": "65"}, modules={})


def _read(directory, rank, n, global_batch, files):
    names = sorted(p.name for p in directory.iterdir())
    mine = multihost_env.my_files(names, rank, n)
    ids = [np.load(directory / f)["ids"] for f in mine]
    slot = global_batch // files
    steps = len(ids[0]) // slot
    return [np.concatenate([i[s * slot : (s + 1) * slot] for i in ids]) for s in range(steps)]


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_each_process_reads_its_rows_and_the_epoch_exactly_once(tmp_path, n):
    images = np.arange(128 * 2, dtype=np.uint8).reshape(128, 2)
    labels = np.arange(128) % 10
    multihost_env.write_shards(tmp_path, images, labels, global_batch=32, files=8)
    per = [_read(tmp_path, r, n, 32, 8) for r in range(n)]
    for step in range(128 // 32):
        global_batch = np.concatenate([per[r][step] for r in range(n)])
        np.testing.assert_array_equal(global_batch, np.arange(step * 32, (step + 1) * 32))
    everything = np.concatenate([np.concatenate(p) for p in per])
    assert np.array_equal(np.sort(everything), np.arange(128))
    with np.load(tmp_path / "shard-00003-of-00008.npz") as z:
        np.testing.assert_array_equal(z["images"], images[z["ids"]])
        np.testing.assert_array_equal(z["labels"], labels[z["ids"]])


def test_bad_layouts_are_named(tmp_path):
    x, y = np.zeros((100, 1)), np.zeros(100)
    with pytest.raises(ValueError, match="whole number of global batches"):
        multihost_env.write_shards(tmp_path, x, y, global_batch=32, files=8)
    with pytest.raises(ValueError, match="equal slots"):
        multihost_env.write_shards(tmp_path, x[:96], y[:96], global_batch=32, files=3)
    names = [f"shard-{i:05d}-of-00008.npz" for i in range(8)]
    with pytest.raises(ValueError, match="do not split evenly over 3"):
        multihost_env.my_files(names, 0, 3)
    with pytest.raises(ValueError, match="incomplete shard set"):
        multihost_env.my_files(names[:-1], 0, 1)
    with pytest.raises(FileNotFoundError):
        multihost_env.my_files(["notes.txt"], 0, 1)
    assert multihost_env.my_files(names[::-1] + ["notes.txt"], 1, 4) == names[2:4]


def test_leave_stops_the_coordination_service_last_and_after_the_linger(monkeypatch):
    """A peer cancels its error poll only after its own shutdown returns; a service stopped at
    that moment reads to the peer as a crashed leader. Planted: ``jax.distributed.shutdown()``
    alone stops the service together with the client, and fails the gap below."""
    from jax._src import distributed
    from jax.experimental import multihost_utils

    done = {}
    barrier = lambda name: done.setdefault("barrier", time.monotonic())  # noqa: E731
    monkeypatch.setattr(multihost_utils, "sync_global_devices", barrier)

    class Part:
        def __init__(self, name):
            self.name = name

        def shutdown(self):
            done[self.name] = time.monotonic()

    monkeypatch.setattr(distributed.global_state, "client", Part("client"))
    monkeypatch.setattr(distributed.global_state, "service", Part("service"))
    multihost_env.leave(linger_s=0.3)
    assert done["barrier"] <= done["client"] and done["service"] - done["client"] >= 0.3
    assert distributed.global_state.service is None and not jax.distributed.is_initialized()


@settings(max_examples=40, deadline=None)
@given(devices=st.integers(1, 64), preset=st.one_of(st.none(), st.integers(1, 256)))
def test_prepare_leaves_every_device_a_free_cpu_thread(devices, preset):
    """A gloo all-reduce holds one XLA CPU thread per device while it waits for the other
    processes; with no thread left for a device's matmul, the job deadlocked (08's Keras job, at
    about 3 % CPU). prepare() asks for at least twice the devices and never lowers a preset."""
    env = {**LAUNCHER_ENV, "SIMULATED_DEVICES": str(devices)}
    if preset is not None:
        env["PJRT_NPROC"] = str(preset)
    multihost_env.prepare(environ=env, modules={})
    threads = int(env["PJRT_NPROC"])
    assert threads - devices >= devices and threads >= (preset or 0)


def test_jaxlib_gives_the_cpu_pool_the_threads_prepare_asks_for():
    """PJRT_NPROC is read by jaxlib, not by the course: a jaxlib that ignored it would bring the
    deadlock back, so count the pool's threads ("XLAEigen") in a fresh process."""
    env = {**LAUNCHER_ENV, "SIMULATED_DEVICES": "4"}
    multihost_env.prepare(environ=env, modules={})
    code = (
        "import os, jax, jax.numpy as jnp; x = jnp.ones((256, 256)); (x @ x).block_until_ready()\n"
        "tasks = '/proc/self/task'\n"
        "names = [open(f'{tasks}/{t}/comm').read() for t in os.listdir(tasks)]\n"
        "print(sum('XLAEigen' in n for n in names))"
    )
    keep = {k: v for k, v in os.environ.items() if k not in LAUNCHER_ENV}
    child = {**keep, **{k: env[k] for k in ("JAX_PLATFORMS", "XLA_FLAGS", "PJRT_NPROC")}}
    out = subprocess.run([sys.executable, "-c", code], env=child, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == int(env["PJRT_NPROC"]) == 8
