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


def test_four_devices_compute_what_one_computes() -> None:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["shards"] == [2, 2, 2, 2]
    assert result["r1"] == 0 and result["r4"] > 0  # XLA inserts the gradient's all-reduce
    assert result["diff"] < 1e-4, result  # float32: only the order of the additions differs
