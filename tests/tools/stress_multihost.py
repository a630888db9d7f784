"""Run 08's multi-host jobs many times in a row and count the ones that do not end cleanly.

``python -m tests.tools.stress_multihost --runs 20 [--hog 2]`` (``make stress-multihost``) runs
the Keras job (``utils.jax.multihost_keras``) and the JAX job (``utils.jax.multihost_worker``)
with 08's shapes (2 processes x 4 simulated devices, 32 steps) alternately, ``--runs`` times
each, with ``--hog`` busy processes beside them the whole time. A job that hangs still ends at
its timeout with each process's last lines; any failure makes the exit code 1. A maintainer's
check: heavy, so run it under the course's lock on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.tools.twice import start_hogs, stop_hogs
from utils import data, launcher
from utils.jax import multihost_env

JOBS = {
    "keras": ["-m", "utils.jax.multihost_keras", "--steps", "32", "--global-batch", "64"],
    "jax": ["-m", "utils.jax.multihost_worker", "--data", "shards", "--steps", "32",
            "--global-batch", "64", "--ckpt-every", "8"],
}  # fmt: skip


def run_once(name: str, work: Path, timeout_s: float) -> launcher.JobResult:
    """One job of 2 processes x 4 devices in ``work``; its result."""
    out = ["--out", f"{name}-out"] + (["--ckpt-dir", "ckpt"] if name == "jax" else [])
    env = {"SIMULATED_DEVICES": "4"}
    return launcher.launch([*JOBS[name], *out], 2, env=env, cwd=work, timeout_s=timeout_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each job")
    parser.add_argument("--hog", type=int, default=2, help="busy processes beside every run")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per job")
    args = parser.parse_args(argv)
    counts = {name: [0, 0] for name in JOBS}  # runs, failures
    hogs = start_hogs(args.hog)
    try:
        for i in range(args.runs):
            for name in JOBS:
                with tempfile.TemporaryDirectory(prefix="stress-") as tmp:
                    images, labels = data.make_standin(512, seed=0)
                    multihost_env.write_shards(
                        Path(tmp) / "shards", images, labels, global_batch=64, files=8
                    )
                    t0 = time.monotonic()
                    job = run_once(name, Path(tmp), args.timeout)
                counts[name][0] += 1
                counts[name][1] += not job.ok
                took = time.monotonic() - t0
                print(
                    f"{name} run {i + 1}: {'ok' if job.ok else 'FAILED'} in {took:.0f} s",
                    flush=True,
                )
                if not job.ok:
                    print(job.summary(log_lines=15), flush=True)
    finally:
        stop_hogs(hogs)
    for name, (runs, failed) in counts.items():
        print(f"{name}: {runs} runs, {failed} failed or hung (hog processes: {args.hog})")
    return 1 if any(failed for _, failed in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
