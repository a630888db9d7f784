"""Data parallelism on simulated CPU devices (a fresh interpreter: XLA_FLAGS before jax)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json
from utils import simulated_devices
simulated_devices.request(4)
import jax, numpy as np, optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from utils.jax import cnn
simulated_devices.check_device_count(len(jax.devices()), 4)
opt = optax.adam(1e-3)
params0 = cnn.init_params(jax.random.key(0))
rng = np.random.default_rng(0)
x = rng.uniform(size=(3, 8, 32, 32, 3)).astype(np.float32)
y = rng.integers(0, 10, size=(3, 8))

def run(n):
    mesh = Mesh(np.array(jax.devices()[:n]), ("batch",))
    rep, dat = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    step = jax.jit(cnn.make_train_step(opt), in_shardings=(rep, rep, dat, dat),
                   out_shardings=(rep, rep, rep))
    p, s = jax.device_put(params0, rep), jax.device_put(opt.init(params0), rep)
    for i in range(3):
        p, s, _ = step(p, s, jax.device_put(x[i], dat), jax.device_put(y[i], dat))
    hlo = step.lower(p, s, jax.device_put(x[0], dat), jax.device_put(y[0], dat)).compile().as_text()
    return p, hlo.count("all-reduce")

p1, r1 = run(1)
p4, r4 = run(4)
diff = max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
           for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p4)))
mesh4 = Mesh(np.array(jax.devices()), ("batch",))
sharded = jax.device_put(x[0], NamedSharding(mesh4, P("batch")))
shards = [s.data.shape[0] for s in sharded.addressable_shards]
print(json.dumps({"diff": diff, "r1": r1, "r4": r4, "shards": shards}))
"""


def _child_result(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (its own XLA_FLAGS) and read its last line as JSON."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_four_devices_compute_what_one_computes() -> None:
    result = _child_result(CHILD)
    assert result["shards"] == [2, 2, 2, 2]
    assert result["r1"] == 0 and result["r4"] > 0  # XLA inserts the gradient's all-reduce
    assert result["diff"] < 1e-4, result  # float32: only the order of the additions differs


GRADS_CHILD = r"""
import json
from utils import simulated_devices
simulated_devices.request(4)
import jax, jax.numpy as jnp, numpy as np, optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from utils.jax import cnn
B = 32
params0 = cnn.init_params(jax.random.key(0))
rng = np.random.default_rng(0)
x = rng.uniform(size=(B, 32, 32, 3)).astype(np.float32)
y = rng.integers(0, 10, size=B)
bf = lambda a: a.astype(jnp.bfloat16).astype(jnp.float32)

def apply_tpu_default(params, x):  # every conv/dot rounds its operands to bfloat16, as a TPU does
    c = lambda x, l: cnn.conv(bf(x), {"w": bf(l["w"]), "b": l["b"]})
    x = cnn.max_pool(jax.nn.relu(c(x, params["conv1"])))
    x = cnn.max_pool(jax.nn.relu(c(x, params["conv2"])))
    x = jax.nn.relu(c(x, params["conv3"])).reshape(x.shape[0], -1)
    x = jax.nn.relu(bf(x) @ bf(params["dense1"]["w"]) + params["dense1"]["b"])
    return bf(x) @ bf(params["dense2"]["w"]) + params["dense2"]["b"]

def loss_tpu_default(p, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(apply_tpu_default(p, x), y).mean()

def grads(loss, n, batch=B):
    mesh = Mesh(np.array(jax.devices()[:n]), ("batch",))
    rep, dat = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    g = jax.jit(jax.grad(loss), in_shardings=(rep, dat, dat), out_shardings=rep)
    out = g(jax.device_put(params0, rep), jax.device_put(x[:batch], dat),
            jax.device_put(y[:batch], dat))
    return {k: {kk: np.asarray(vv) for kk, vv in v.items()} for k, v in out.items()}

def worst(ga, gb, dtype):  # largest |difference| / tolerance over the layers' kernels
    sizes = cnn.gradient_reduction_sizes(B)
    return max(float(np.abs(ga[k]["w"] - gb[k]["w"]).max())
               / cnn.sum_tolerance(sizes[k], dtype, float(np.abs(ga[k]["w"]).max())) for k in sizes)

f32_1, f32_4 = grads(cnn.loss_fn, 1), grads(cnn.loss_fn, 4)
bf_1, bf_4 = grads(loss_tpu_default, 1), grads(loss_tpu_default, 4)
local = grads(cnn.loss_fn, 1, batch=B // 4)  # one device's share alone: no all-reduce
a = jax.random.normal(jax.random.key(1), (128, 128))
plain = np.asarray(jax.jit(jnp.matmul)(a, a))
with jax.default_matmul_precision("bfloat16"):
    flagged = np.asarray(jax.jit(jnp.matmul)(a, a))
print(json.dumps({
    "f32": worst(f32_1, f32_4, "float32"),
    "bf16_emulated": worst(bf_1, bf_4, "bfloat16"),
    "no_allreduce": worst(f32_1, local, "float32"),
    "flag_ignored_on_cpu": bool(np.array_equal(plain, flagged)),
    "bf16_rounding_differs": bool(not np.array_equal(np.asarray(bf(a) @ bf(a)), plain)),
}))
"""


def test_first_step_gradients_agree_within_the_derived_tolerance() -> None:
    """1 vs 4 devices: first-step gradients within ``cnn.sum_tolerance`` (float32, and bfloat16
    operands as a TPU's default precision rounds them); a missing all-reduce breaks it."""
    r = _child_result(GRADS_CHILD)
    assert r["f32"] < 1.0, r
    assert r["bf16_emulated"] < 1.0, r
    assert r["no_allreduce"] > 1.0, r  # the check can fail
    # JAX on a CPU accepts jax_default_matmul_precision and ignores it: float32 results, bit for
    # bit. If this starts failing, the CPU honours the flag: run the checks under it instead of
    # the explicit bfloat16 rounding above.
    assert r["flag_ignored_on_cpu"] and r["bf16_rounding_differs"], r
