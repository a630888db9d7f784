"""Two JAX processes x 4 CPU devices over 127.0.0.1 (utils.jax.multihost_worker): equivalence
with one process x 8 devices, a host lost mid-training, resume from checkpoint, a peer that
never starts. Each test checks that no process it started is left running."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")

from utils import ROOT, launcher  # noqa: E402

WORKER = ["-m", "utils.jax.multihost_worker", "--steps", "8", "--ckpt-every", "3"]
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_beyond_one_host.ipynb"


def _run(args, n, **kw):
    commands = args if isinstance(args[0], list) else WORKER + args
    result = launcher.launch(commands, n, timeout_s=180, grace_s=1, **kw)
    assert not [p for p in result.pids if launcher.pid_alive(p)], "a worker outlived its job"
    return result


def _load(out, rank=0):
    with np.load(Path(out) / f"process-{rank}.npz") as f:
        return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two")
    result = _run(["--out", str(tmp / "out"), "--ckpt-dir", str(tmp / "ckpt")], 2)
    assert result.ok, result.summary()
    return tmp, result


def test_two_processes_agree_with_each_other_and_with_one_process(two_hosts, tmp_path):
    tmp, result = two_hosts
    assert "4 local of 8 devices, rows 32:64" in result.workers[1].log
    p0, p1 = _load(tmp / "out", 0), _load(tmp / "out", 1)
    np.testing.assert_array_equal(p0["losses"], p1["losses"])
    np.testing.assert_array_equal(p0["weights"], p1["weights"])
    one = _run(["--out", str(tmp_path)], 1, env={"SIMULATED_DEVICES": "8"})
    assert one.ok, one.summary()
    assert "8 local of 8 devices, rows 0:64" in one.workers[0].log
    ref = _load(tmp_path)
    # Same math, different reduction order (gloo across processes vs XLA within one).
    np.testing.assert_allclose(p0["losses"], ref["losses"], rtol=1e-5)
    np.testing.assert_allclose(p0["weights"], ref["weights"], rtol=1e-4, atol=1e-6)
    assert p0["losses"][-1] < p0["losses"][0]


def test_lost_host_ends_the_job_and_resume_matches_uninterrupted(two_hosts, tmp_path):
    tmp, _ = two_hosts
    ckpt = tmp_path / "ckpt"
    killed = _run(["--out", str(tmp_path / "a"), "--ckpt-dir", str(ckpt), "--die-at-step", "5"], 2)
    assert not killed.ok
    assert "process 1" in killed.reason and "SIGKILL" in killed.reason
    assert killed.workers[0].stopped_by_launcher
    assert launcher.latest_checkpoint(ckpt)[0] == 3
    resumed = _run(["--out", str(tmp_path / "b"), "--ckpt-dir", str(ckpt)], 2)
    assert resumed.ok, resumed.summary()
    assert "starting at step 3" in resumed.workers[0].log
    np.testing.assert_array_equal(_load(tmp_path / "b")["weights"], _load(tmp / "out")["weights"])


def test_peer_that_never_starts_fails_within_the_init_timeout(tmp_path):
    result = _run(
        [
            [*WORKER, "--out", str(tmp_path), "--init-timeout", "5"],
            ["-c", "import time; time.sleep(600)"],
        ],
        2,
    )
    assert not result.ok
    assert "process 0" in result.reason
    assert "DEADLINE_EXCEEDED" in result.workers[0].log
    assert result.workers[1].stopped_by_launcher
    assert result.first_failure_s < 120  # the init timeout, not the launcher's 180 s, ended it


def test_notebook_shows_the_worker_it_runs():
    """The %%writefile cell in notebook 08 is this module, byte for byte."""
    if not NOTEBOOK.exists():
        pytest.skip("notebook 08 not present")
    source = Path(ROOT / "utils" / "jax" / "multihost_worker.py").read_text()
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    written = [
        "".join(c["source"]).split("\n", 1)[1]
        for c in cells
        if c["cell_type"] == "code"
        and "".join(c["source"]).startswith("%%writefile")
        and "jax_worker.py" in "".join(c["source"]).split("\n", 1)[0]
    ]
    assert written, "no %%writefile cell for the JAX worker in notebook 08"
    assert written[0].rstrip("\n") == source.rstrip("\n")


def test_allreduce_timer_sums_across_processes(tmp_path):
    result = launcher.launch(
        ["-m", "utils.jax.multihost_allreduce", "--out", str(tmp_path), "--sizes", "16,1024"],
        3,
        timeout_s=180,
        grace_s=1,
    )
    assert not [p for p in result.pids if launcher.pid_alive(p)]
    assert result.ok, result.summary()  # each process asserts psum == 1 + 2 + 3
    with np.load(tmp_path / "allreduce-3.npz") as f:
        assert f["bytes"].tolist() == [64, 4096]
        assert np.all(f["seconds_min"] <= f["seconds"]) and np.all(f["seconds_min"] > 0)


def test_keras_two_processes_agree_with_one(tmp_path):
    pytest.importorskip("keras")
    cmd = ["-m", "utils.jax.multihost_keras", "--steps", "4"]
    multi = _run([[*cmd, "--out", str(tmp_path / "m")]] * 2, 2)
    one = _run([[*cmd, "--out", str(tmp_path / "o")]], 1, env={"SIMULATED_DEVICES": "8"})
    assert multi.ok and one.ok, multi.summary() + one.summary()
    k0, k1 = (np.load(tmp_path / "m" / f"keras-{r}.npz") for r in (0, 1))
    ref = np.load(tmp_path / "o" / "keras-0.npz")
    np.testing.assert_array_equal(k0["weights"], k1["weights"])
    np.testing.assert_allclose(k0["weights"], ref["weights"], rtol=1e-4, atol=1e-6)
