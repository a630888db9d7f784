"""Tests for utils.keras.sharding_check: notebook 02's exercise judged in a fresh 8-device process.

The notebook's stored run has 8 simulated devices and judges in the kernel; these tests run the
path a one-device runtime (Colab's v5e-1) takes, with a good and a bad sharding.
"""

from __future__ import annotations

import pytest

from utils import fresh_process
from utils.keras import sharding_check

GOOD = {
    "axis_names": ["batch", "model"],
    "batch_dim_name": "batch",
    "layouts": {".*dense.*/kernel": ["model", None]},
}


def test_mesh_shape_gives_two_devices_to_each_non_batch_axis():
    assert sharding_check.mesh_shape(GOOD, 8) == (4, 2)
    assert sharding_check.mesh_shape({**GOOD, "axis_names": ["model", "batch"]}, 8) == (2, 4)
    with pytest.raises(ValueError, match="do not split"):
        sharding_check.mesh_shape(GOOD, 3)


def test_describe_reads_the_learners_distribution_on_one_device():
    code = (
        "import json, jax, keras; from utils.keras import sharding_check as s\n"
        "mesh = keras.distribution.DeviceMesh((1, 1), ['batch', 'model'], jax.devices()[:1])\n"
        "lm = keras.distribution.LayoutMap(mesh); lm['.*dense.*/kernel'] = ('model', None)\n"
        "mp = keras.distribution.ModelParallel(layout_map=lm, batch_dim_name='batch')\n"
        "dp = keras.distribution.DataParallel(devices=jax.devices()[:1])\n"
        "print('RESULT ' + json.dumps([s.describe(mp), s.describe(dp)]))"
    )
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
    model_parallel, data_parallel = fresh_process.run_python_json(code, env=env, timeout_s=300)
    assert model_parallel == GOOD
    assert data_parallel["layouts"] == {}


def test_fresh_process_passes_a_good_sharding_and_fails_a_bad_one():
    good = sharding_check.check_spec_in_fresh_process(GOOD, timeout_s=600)
    assert good["devices"] == 8 and good["mesh_shape"] == [4, 2]
    assert len(good["split"]) == good["kernels"] == 2
    assert good["diff"] <= good["tolerance"], good
    bad = sharding_check.check_spec_in_fresh_process({**GOOD, "layouts": {}}, timeout_s=600)
    assert bad["split"] == [] and bad["kernels"] == 2
