"""Two TensorFlow workers under MultiWorkerMirroredStrategy over 127.0.0.1 (utils.tf.multiworker):
identical losses and weights on both, Keras 3 model.fit's failure caught and stored, a malformed
TF_CONFIG named before TensorFlow waits for anyone."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from utils import launcher, tf_cluster  # noqa: E402


def test_two_workers_train_in_lockstep_and_fit_fails_cleanly(tmp_path):
    ports = [launcher.free_port() for _ in range(2)]
    result = launcher.launch(
        ["-m", "utils.tf.multiworker", "--out", str(tmp_path), "--steps", "4", "--try-fit"],
        2,
        timeout_s=300,
        grace_s=1,
        env_for_rank=lambda i: {"TF_CONFIG": tf_cluster.tf_config(ports, i)},
    )
    assert not [p for p in result.pids if launcher.pid_alive(p)]
    assert result.ok, result.summary(30)
    w0, w1 = (np.load(tmp_path / f"worker-{i}.npz") for i in (0, 1))
    np.testing.assert_array_equal(w0["losses"], w1["losses"])
    np.testing.assert_array_equal(w0["weights"], w1["weights"])
    assert np.all(np.isfinite(w0["losses"])) and len(w0["losses"]) == 4
    fit_error = (tmp_path / "fit-error-0.txt").read_text()
    # keras-team/keras#20585: if this starts passing, the notebook's text must change.
    assert fit_error.startswith("ValueError") and "PerReplica" in fit_error, fit_error[:300]


def test_malformed_tf_config_names_the_field(tmp_path):
    bad = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker"}}
    result = launcher.launch(
        ["-m", "utils.tf.multiworker", "--out", str(tmp_path)],
        1,
        timeout_s=120,
        env={"TF_CONFIG": json.dumps(bad)},
    )
    assert not result.ok
    assert 'TF_CONFIG field "task.index" is None' in result.summary()
