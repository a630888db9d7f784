"""One host of a data-parallel JAX job: the same file runs on every host of a TPU slice.

    python -m utils.jax.multihost_worker --data DIR --ckpt-dir DIR --out DIR [--steps 12]

On a slice, ``jax.distributed.initialize()`` takes the coordinator, the process count and this
process's id from the TPU runtime, so the command is the same on every worker. In the course's
rehearsal, ``utils.launcher`` starts the processes on 127.0.0.1 instead and ``multihost_env``
translates its variables (and runs JAX on simulated CPU devices). Each process reads only its own
shard files (``multihost_env.my_files``); checkpoints are Orbax's, asynchronous, written by all
processes into one directory that every host must see (a GCS bucket on a slice); a SIGTERM
(a Spot/preemptible VM's notice) makes every process save at the same step and exit cleanly.
"""

import argparse
import os
import signal
import time

from utils.jax import multihost_env

multihost_env.prepare()  # rehearsal only: CPU devices (overrides JAX_PLATFORMS); no-op on a slice

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from etils import epath  # noqa: E402  (local paths, and gs:// where gcsfs is installed)
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)  # folder of shard files (local or gs://)
parser.add_argument("--ckpt-dir", required=True)  # shared by all hosts (gs:// on a slice)
parser.add_argument("--out", required=True)  # per-process results (losses, weights)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--global-batch", type=int, default=64)
parser.add_argument("--ckpt-every", type=int, default=4)
parser.add_argument("--init-timeout", type=int, default=300)  # seconds to wait for all peers
parser.add_argument("--die-at-step", type=int, default=-1)  # drill: the last process is killed
parser.add_argument("--preempt-at-step", type=int, default=-1)  # drill: it gets a SIGTERM


def main(args):
    # 1. Join the job: the same call on every host.
    multihost_env.initialize(timeout_s=args.init_timeout)
    rank, n = jax.process_index(), jax.process_count()

    # 2. One mesh over the GLOBAL devices (all hosts); batches split over its "data" axis.
    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))

    # 3. Per-host input: this process opens only its own shard files.
    files, shards = read_my_shards(epath.Path(args.data), rank, n)
    slot = args.global_batch // (n * len(files))  # rows per file in each global batch

    # 4. Model, optimizer, train step: the same code as on one host.
    fresh_state, train_step = model(int(np.prod(shards[0]["images"].shape[1:])))
    state = jax.jit(fresh_state, out_shardings=replicated)(jax.random.key(0))

    # 5. Orbax: every process takes part in every save; restore lands in the sharded layout.
    manager = open_checkpoints(args.ckpt_dir, args.ckpt_every)
    start = manager.latest_step() or 0
    if start:
        like = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding)  # noqa: E731
        state = manager.restore(start, args=ocp.args.StandardRestore(jax.tree.map(like, state)))
    multihost_utils.sync_global_devices("restored")  # a barrier: every host is at `start`
    devices = f"{jax.local_device_count()} local of {jax.device_count()} devices"
    print(f"process {rank}/{n}: {devices}, files {', '.join(files)}, starting at step {start}")
    state, run = train(args, state, train_step, manager, shards, slot, sharded, start)

    # 6. A metric gathered from every host: its time per step (equal on all: each waits for all).
    every = multihost_utils.process_allgather(run["step_s"])  # one per process, the same on all
    print(f"step time per process (ms): {[round(float(t) * 1e3, 1) for t in every]}", flush=True)
    save_results(epath.Path(args.out), rank, state, run, start)
    multihost_env.leave()  # nobody leaves while a peer still needs it


def read_my_shards(data, rank, n):
    """This process's shard files (names) and their arrays; no other host's file is opened."""
    files = multihost_env.my_files([p.name for p in data.iterdir()], rank, n)
    shards = []
    for name in files:
        with (data / name).open("rb") as f, np.load(f) as z:
            shards.append({k: z[k] for k in ("ids", "images", "labels")})
    return files, shards


def local_batch(shards, slot, step):
    """This process's rows of global batch `step`: `slot` rows from each of its files."""
    steps_per_epoch = len(shards[0]["ids"]) // slot
    rows = slice((step % steps_per_epoch) * slot, (step % steps_per_epoch + 1) * slot)
    x = np.concatenate([s["images"][rows] for s in shards])
    y = np.concatenate([s["labels"][rows] for s in shards])
    ids = np.concatenate([s["ids"][rows] for s in shards])
    return (x.reshape(len(x), -1).astype(np.float32) / 255, y.astype(np.int32)), ids


def model(d):
    """A two-layer MLP on `d` inputs with SGD: (fresh_state(key), jitted train_step)."""
    opt = optax.sgd(0.05, momentum=0.9)

    def fresh_state(key):
        k1, k2 = jax.random.split(key)
        params = {"w1": jax.random.normal(k1, (d, 64)) * 0.02, "b1": jnp.zeros(64)}
        params |= {"w2": jax.random.normal(k2, (64, 10)) * 0.1, "b2": jnp.zeros(10)}
        return {"params": params, "opt": opt.init(params)}

    def loss_fn(params, x, y):
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        logits = h @ params["w2"] + params["b2"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def train_step(state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], x, y)  # XLA adds the all-reduce
        updates, opt_state = opt.update(grads, state["opt"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt": opt_state}, loss

    return fresh_state, train_step


def open_checkpoints(ckpt_dir, every):
    """Orbax, asynchronous: a save every `every` steps and one on a preemption notice."""
    ckpt_dir = ckpt_dir if "://" in ckpt_dir else os.path.abspath(ckpt_dir)
    policies = ocp.checkpoint_managers
    when = policies.AnySavePolicy(
        [policies.FixedIntervalPolicy(every), policies.PreemptionCheckpointingPolicy()]
    )
    options = ocp.CheckpointManagerOptions(save_decision_policy=when, max_to_keep=2)
    return ocp.CheckpointManager(ckpt_dir, options=options)  # async saves by default


def train(args, state, train_step, manager, shards, slot, sharded, start):
    """Steps `start`..`args.steps` (or up to a preemption save): the state and what was seen.
    The loss stays on the device until the end: a host read every step would stall the chip."""
    rank, n = jax.process_index(), jax.process_count()
    run = {"losses": [], "ids": [], "preempted": False}
    for step in range(start, args.steps):
        if rank == n - 1 and step == args.die_at_step:
            os.kill(os.getpid(), signal.SIGKILL)  # drill: a host lost, no warning
        if rank == n - 1 and step == args.preempt_at_step:
            os.kill(os.getpid(), signal.SIGTERM)  # drill: the notice a preempted VM gets
        (x, y), ids = local_batch(shards, slot, step)
        batch = [jax.make_array_from_process_local_data(sharded, a) for a in (x, y)]
        state, loss = train_step(state, *batch)
        if step == start:  # the first step traces and compiles: the clock starts once it ends
            loss.block_until_ready()
            t0 = time.perf_counter()
        run["losses"].append(loss)
        run["ids"].append(ids)
        # Saves every `ckpt_every` steps, and at the step all hosts agree on after a SIGTERM.
        manager.save(step + 1, args=ocp.args.StandardSave(state))
        if manager.reached_preemption(step + 1):
            run["preempted"] = True
            print(f"preemption notice: checkpoint at step {step + 1}, exiting", flush=True)
            break
    run["losses"] = [float(v.addressable_data(0)) for v in run["losses"]]  # waits for the last
    run["step_s"] = (time.perf_counter() - t0) / max(1, len(run["losses"]) - 1)
    print(f"steps {start}-{start + len(run['losses']) - 1}, last loss {run['losses'][-1]:.6f}")
    manager.wait_until_finished()  # the last async save is on disk before we exit
    manager.close()
    return state, run


def save_results(out, rank, state, run, start):
    """This process's losses, step times, ids read, whether preempted, and final weights."""
    out.mkdir(parents=True, exist_ok=True)
    params = jax.tree.leaves(state["params"])
    weights = np.concatenate([np.ravel(v.addressable_data(0)) for v in params])
    with (out / f"process-{rank}.npz").open("wb") as f:
        np.savez(f, first_step=start, weights=weights, **{k: np.array(v) for k, v in run.items()})


if __name__ == "__main__":
    main(parser.parse_args())
