"""utils.jax.compiles: compilations counted from JAX's log and a jitted function's cache."""

from __future__ import annotations

import logging

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from utils.jax import compiles  # noqa: E402


def test_new_shapes_compile_again_same_shapes_do_not(capfd: pytest.CaptureFixture[str]) -> None:
    f = jax.jit(lambda x, y: (x * 2 + y).sum())
    before = jax.config.jax_log_compiles
    with compiles.CompileLog() as log:
        f(np.ones(3, np.float32), 1.0)
        f(np.ones(3, np.float32), 2.0)  # same shapes: cached
        f(np.ones((4, 2), np.float32), 1.0)
    assert log.count("lambda") == 2
    assert [e.shapes for e in log.of("lambda")] == [
        ("float32[3]", "float32[]"),
        ("float32[4,2]", "float32[]"),
    ]
    assert str(log.of("lambda")[0]) == "compiled <lambda>(float32[3], float32[])"
    assert compiles.cache_size(f) == 2
    assert jax.config.jax_log_compiles == before
    assert "Compiling" not in capfd.readouterr().err  # captured, not printed


def test_log_is_restored_after_an_error() -> None:
    handlers = list(logging.getLogger("jax").handlers)
    with pytest.raises(ZeroDivisionError), compiles.CompileLog():
        1 / 0  # noqa: B018
    assert logging.getLogger("jax").handlers == handlers
    assert jax.config.jax_log_compiles is False


def test_outside_the_block_nothing_is_recorded() -> None:
    g = jax.jit(lambda x: x + 1)
    with compiles.CompileLog() as log:
        pass
    g(np.ones(2, np.float32))
    assert log.events == []


def test_cache_size_without_the_private_api() -> None:
    assert compiles.cache_size(object()) is None
