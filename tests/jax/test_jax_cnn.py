"""utils.jax.cnn: the seed's CNN in JAX, its train step (03 shows it: test_shown_functions)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")
jnp = jax.numpy

from utils import flops, mfu  # noqa: E402
from utils.jax import cnn  # noqa: E402


@pytest.fixture(scope="module")
def params():
    return cnn.init_params(jax.random.key(0))


def test_parameters_match_the_seed_and_the_flop_model(params) -> None:
    assert sum(x.size for x in jax.tree.leaves(params)) == 122_570  # Keras' seed_cnn
    layers = {layer.name: layer for layer in flops.seed_cnn_costs(1)}
    for name in ("conv1", "conv2", "conv3", "dense1", "dense2"):
        _, k, n = layers[name].matmul
        assert params[name]["w"].size == k * n, name
        assert params[name]["b"].shape == (n,), name
        assert params[name]["b"].dtype == jnp.float32


def test_init_is_glorot_uniform_and_deterministic(params) -> None:
    w = np.asarray(params["dense1"]["w"])
    limit = (6 / (1024 + 64)) ** 0.5
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.9 * limit
    again = cnn.init_params(jax.random.key(0))
    assert all(
        np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(again), strict=True)
    )


def test_apply_shapes_and_pooling(params) -> None:
    assert cnn.apply(params, jnp.zeros((3, 32, 32, 3))).shape == (3, 10)
    x = np.random.default_rng(0).normal(size=(2, 5, 5, 4)).astype(np.float32)
    expected = (
        x[:, :4, :4].reshape(2, 2, 2, 2, 2, 4).max(axis=(2, 4))
    )  # 'valid': last row/col dropped
    np.testing.assert_array_equal(np.asarray(cnn.max_pool(jnp.asarray(x))), expected)


def test_conv_matches_a_direct_sum() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 5, 5, 2)).astype(np.float32)
    w = rng.normal(size=(3, 3, 2, 4)).astype(np.float32)
    b = rng.normal(size=4).astype(np.float32)
    got = np.asarray(cnn.conv(jnp.asarray(x), {"w": jnp.asarray(w), "b": jnp.asarray(b)}))
    want = np.zeros((1, 3, 3, 4), np.float32)
    for i in range(3):
        for j in range(3):
            want[0, i, j] = np.einsum("hwc,hwco->o", x[0, i : i + 3, j : j + 3], w) + b
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_train_step_learns_a_small_batch(params) -> None:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(size=(8, 32, 32, 3)).astype(np.float32))
    y = jnp.asarray(np.arange(8) % 10)
    optimizer = optax.adam(1e-3)
    step = jax.jit(cnn.make_train_step(optimizer))
    p, s = params, optimizer.init(params)
    losses = []
    for _ in range(15):
        p, s, loss = step(p, s, x, y)
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0], losses  # measured: 2.30 -> 1.65
    assert jax.tree.structure(p) == jax.tree.structure(params)


def test_xla_flops_agree_with_the_hand_count(params) -> None:
    batch = 8
    optimizer = optax.adam(1e-3)
    x, y = jnp.zeros((batch, 32, 32, 3)), jnp.zeros(batch, jnp.int32)
    step = jax.jit(cnn.make_train_step(optimizer))
    cost = step.lower(params, optimizer.init(params), x, y).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    ratio = cost["flops"] / mfu.training_flops(flops.seed_cnn_costs(batch))
    assert 1.0 < ratio < 1.05, ratio  # XLA also counts ReLU, loss and Adam; notebook 03 explains


def test_tolerance_grows_with_the_sum_and_the_format() -> None:
    assert cnn.sum_tolerance(400, "float32", 1.0) == pytest.approx(
        2 * cnn.sum_tolerance(100, "float32", 1.0)
    )
    assert cnn.sum_tolerance(100, "bfloat16", 1.0) == pytest.approx(
        cnn.sum_tolerance(100, "float32", 1.0) * 2.0**16
    )  # eps 2^-7 vs 2^-23
    assert cnn.gradient_reduction_sizes(128)["conv1"] == 128 * 30 * 30
    assert cnn.matmul_input_dtype("tpu", None) == "bfloat16"
    assert cnn.matmul_input_dtype("tpu", "highest") == "float32"
    assert cnn.matmul_input_dtype("cpu", "bfloat16") == "float32"
