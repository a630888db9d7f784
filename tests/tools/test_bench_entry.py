"""``make bench``'s entry point refuses a run whose Keras would not be on JAX."""

from __future__ import annotations

import pytest

from tests.tools import bench


def test_bench_needs_the_jax_backend(monkeypatch, capsys) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--rounds", "2"])
    assert stop.value.code == 2 and "KERAS_BACKEND=jax" in capsys.readouterr().err
