"""One "host" of a data-parallel JAX job. Every host runs this same file; only its rank differs.

    python -m utils.jax.multihost_worker --steps 12 --out DIR [--ckpt-dir D] [--die-at-step K]

The rank, the process count and the coordinator come from the environment that
``utils.launcher.launch`` sets (``COURSE_PROCESS_ID``, ``COURSE_NUM_PROCESSES``,
``COURSE_COORDINATOR``); on a TPU pod slice ``jax.distributed.initialize()`` with no arguments
reads them from the TPU runtime instead. ``SIMULATED_DEVICES`` CPU devices per process.
"""

import argparse
import os
import signal
import time
from pathlib import Path

# The rehearsal runs on CPU devices: delete these lines on a real TPU host.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
DEVICES = int(os.environ.get("SIMULATED_DEVICES", "4"))  # before JAX starts: it fixes the count
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}"
)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from utils import data, launcher  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--global-batch", type=int, default=64)
parser.add_argument("--train-images", type=int, default=512)
parser.add_argument("--out", type=Path, required=True)
parser.add_argument("--ckpt-dir", type=Path)
parser.add_argument("--ckpt-every", type=int, default=4)
parser.add_argument("--die-at-step", type=int, default=-1)  # fault drill: the last rank dies
parser.add_argument("--init-timeout", type=int, default=120)  # seconds to wait for all peers


def main(args):
    # 1. Join the job: every process calls this with the same coordinator and count.
    coordinator, num_processes, rank = launcher.rank_from_env()
    if num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU cross-process
        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=num_processes,
            process_id=rank,
            initialization_timeout=args.init_timeout,
        )
    assert jax.process_count() == num_processes and jax.process_index() == rank

    # 2. One mesh over the GLOBAL devices (all hosts); batches split over its "data" axis.
    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))

    # 3. Per-host input: each process loads only ITS rows of every global batch.
    images, labels = data.make_standin(args.train_images, seed=0)
    x_all = data.to_float(images).reshape(len(images), -1)
    per_process = args.global_batch // num_processes
    mine = slice(rank * per_process, (rank + 1) * per_process)

    def local_batch(step):
        rows = (step * args.global_batch + np.arange(args.global_batch)) % len(x_all)
        return x_all[rows[mine]], labels[rows[mine]].astype(np.int32)

    # 4. Model, optimizer, train step: the same code as on one host.
    def init(key):
        k1, k2 = jax.random.split(key)
        return {
            "w1": jax.random.normal(k1, (x_all.shape[1], 64)) * 0.02,
            "b1": jnp.zeros(64),
            "w2": jax.random.normal(k2, (64, 10)) * 0.1,
            "b2": jnp.zeros(10),
        }

    def loss_fn(params, x, y):
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        logits = h @ params["w2"] + params["b2"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    opt = optax.sgd(0.05, momentum=0.9)

    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)  # XLA adds the all-reduce
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    params = jax.jit(init, out_shardings=replicated)(jax.random.key(0))
    opt_state = jax.jit(opt.init, out_shardings=replicated)(params)

    def host(a):  # a replicated global array -> this process's numpy copy
        return np.asarray(a.addressable_data(0))

    # 5. Resume from the newest complete checkpoint, if any.
    start = 0
    found = launcher.latest_checkpoint(args.ckpt_dir) if args.ckpt_dir else None
    if found:
        start, saved = found
        leaves, tree = jax.tree.flatten((params, opt_state))
        leaves = [
            jax.make_array_from_callback(v.shape, replicated, lambda i, v=v: v[i])
            for v in (saved[f"leaf{k}"] for k in range(len(leaves)))
        ]
        params, opt_state = jax.tree.unflatten(tree, leaves)
    print(
        f"process {rank}/{num_processes}: {jax.local_device_count()} local of "
        f"{jax.device_count()} devices, rows {mine.start}:{mine.stop} of each batch, "
        f"starting at step {start}",
        flush=True,
    )

    losses, step_s = [], []
    for step in range(start, args.steps):
        if step == args.die_at_step and rank == num_processes - 1:
            os.kill(os.getpid(), signal.SIGKILL)  # a host lost mid-training
        t = time.perf_counter()
        x, y = (jax.make_array_from_process_local_data(sharded, a) for a in local_batch(step))
        params, opt_state, loss = train_step(params, opt_state, x, y)
        losses.append(float(host(loss)))
        step_s.append(time.perf_counter() - t)
        print(f"step {step} loss {losses[-1]:.6f}", flush=True)
        if args.ckpt_dir and rank == 0 and (step + 1) % args.ckpt_every == 0:
            leaves = jax.tree.leaves((params, opt_state))
            launcher.save_checkpoint(
                args.ckpt_dir, step + 1, {f"leaf{k}": host(v) for k, v in enumerate(leaves)}
            )

    args.out.mkdir(parents=True, exist_ok=True)
    np.savez(
        args.out / f"process-{rank}.npz",
        losses=np.array(losses),
        step_s=np.array(step_s),
        weights=np.concatenate([host(v).ravel() for v in jax.tree.leaves(params)]),
    )
    if num_processes > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    main(parser.parse_args())
