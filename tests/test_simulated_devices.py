"""utils.simulated_devices: XLA_FLAGS before JAX, device counts, batch divisibility."""

from __future__ import annotations

import os

import pytest

from utils import simulated_devices as sd


def test_request_sets_the_flag_and_keeps_other_flags() -> None:
    env = {"XLA_FLAGS": "--xla_dump_to=/x --xla_force_host_platform_device_count=2"}
    flags = sd.request(8, env=env, modules={}, patient=False)
    assert flags == "--xla_dump_to=/x --xla_force_host_platform_device_count=8"
    assert env["XLA_FLAGS"] == flags
    assert sd.requested_count(env) == 8


def test_request_on_an_empty_environment() -> None:
    env: dict[str, str] = {}
    sd.request(4, env=env, modules={}, patient=False)
    assert env == {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}


def test_patient_collectives_are_added_once_and_keep_user_values() -> None:
    env = {"XLA_FLAGS": "--xla_cpu_collective_call_terminate_timeout_seconds=5"}
    flags = sd.request(8, env=env, modules={}, patient=True).split()
    assert "--xla_cpu_collective_call_terminate_timeout_seconds=5" in flags
    assert sd.PATIENCE_FLAGS[0] in flags
    assert len(flags) == 3
    assert sd.request(8, env=env, modules={}, patient=True).split() == flags  # idempotent


def test_patience_follows_the_installed_jaxlib(monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {"jaxlib": "0.7.2"}
    monkeypatch.setattr(sd.results, "version", lambda name: versions[name])
    assert "collective" not in sd.request(8, env={}, modules={})
    versions["jaxlib"] = "0.10.2"
    assert sd.PATIENCE_FLAGS[1] in sd.request(8, env={}, modules={})
    assert "collective" not in sd.request(1, env={}, modules={})  # one device: no collectives


def test_jax_imported_first_is_refused_loudly() -> None:
    env: dict[str, str] = {}
    with pytest.raises(sd.JaxAlreadyImported, match="Restart the kernel") as err:
        sd.request(8, env=env, modules={"jax": object()})
    assert "1 device(s), not 8" in str(err.value)
    assert env == {}  # nothing changed


def test_jax_imported_with_another_count_is_refused() -> None:
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    with pytest.raises(sd.JaxAlreadyImported, match="asked for 2"):
        sd.request(8, env=env, modules={"jax": object()})


def test_rerun_after_import_with_the_same_count_is_fine() -> None:
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    assert sd.request(8, env=env, modules={"jax": object()}).endswith("=8")


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "8"])
def test_bad_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="integer >= 1"):
        sd.request(bad, env={}, modules={})  # type: ignore[arg-type]


def test_requested_count() -> None:
    assert sd.requested_count({}) is None
    assert sd.requested_count({"XLA_FLAGS": "--foo"}) is None
    with pytest.raises(ValueError, match="integer"):
        sd.requested_count({"XLA_FLAGS": "--xla_force_host_platform_device_count=x"})


def test_check_device_count() -> None:
    sd.check_device_count(8, 8)
    with pytest.raises(RuntimeError, match="sees 1 cpu device.*8 were requested"):
        sd.check_device_count(1, 8)


def test_per_device_batch() -> None:
    assert sd.per_device_batch(128, 8) == 16
    assert sd.per_device_batch(128, 1) == 128
    with pytest.raises(ValueError, match=r"global batch 100 .* 8 devices .* e\.g\. 96 or 104"):
        sd.per_device_batch(100, 8)
    with pytest.raises(ValueError, match=r"e\.g\. 8\.$"):
        sd.per_device_batch(4, 8)
    with pytest.raises(ValueError):
        sd.per_device_batch(128, 0)


def test_one_count_rule_and_one_default() -> None:
    assert sd.check_count(1) == 1 and sd.check_count(sd.MAX_COUNT) == sd.MAX_COUNT
    for bad in (0, sd.MAX_COUNT + 1, 2.0, True, "8", None):
        with pytest.raises(ValueError, match="virtual_cpus must be an integer >= 1 and <= 64"):
            sd.check_count(bad, "virtual_cpus")
    assert [sd.default_count(n) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]


def test_child_flags_ask_for_the_devices_and_patience_without_touching_this_process(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    flags = sd.child_flags(2, patient=True)
    assert f"{sd.FLAG}=2" in flags.split()
    assert all(f in flags.split() for f in sd.PATIENCE_FLAGS)
    assert sd.child_flags(2, patient=False).split() == [f"{sd.FLAG}=2"]
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"  # unchanged
    with pytest.raises(ValueError):
        sd.child_flags(0)
