"""Time an all-reduce across processes (one CPU device each), for the ring-model fit in notebook 08.

    python -m utils.jax.multihost_allreduce --out DIR --sizes 4096,65536 --repeats 5

Started by ``utils.launcher.launch``. Process 0 writes ``DIR/allreduce-<n>.npz``: the payloads in
bytes and the fastest of the repeats of a ``psum`` over all processes (gloo over 127.0.0.1), the
one least disturbed by other work on a shared machine. Importing this module imports JAX.
"""

import argparse
import time
from pathlib import Path

from utils.jax import multihost_env

multihost_env.prepare(devices=1)  # rehearsal: one CPU device per process (overrides JAX_PLATFORMS)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sizes", default="1024,16384,262144,2097152")  # float32 elements
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--init-timeout", type=int, default=60)
    args = parser.parse_args(argv)

    multihost_env.initialize(timeout_s=args.init_timeout)
    n, rank = jax.process_count(), jax.process_index()
    mesh = Mesh(np.array(jax.devices()), ("p",))
    psum = jax.jit(
        jax.shard_map(lambda b: jax.lax.psum(b, "p"), mesh=mesh, in_specs=P("p"), out_specs=P("p"))
    )
    sizes, fastest = [], []
    for elements in map(int, args.sizes.split(",")):
        x = np.full((1, elements), rank + 1, np.float32)
        x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("p")), x)
        assert float(psum(x).addressable_data(0)[0, 0]) == n * (n + 1) / 2  # compiled and checked
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            psum(x).block_until_ready()
            times.append(time.perf_counter() - t)
        sizes.append(4 * elements)
        fastest.append(min(times))
        print(f"{n} processes, {4 * elements} bytes: {fastest[-1] * 1e3:.2f} ms", flush=True)
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        np.savez(args.out / f"allreduce-{n}.npz", bytes=np.array(sizes), seconds=np.array(fastest))
    multihost_env.leave()


if __name__ == "__main__":
    main()
