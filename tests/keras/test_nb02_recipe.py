"""Notebook 02's recipe cell, pasted into a fresh Python as into an empty notebook.

The cell imports nothing from `utils`. Here it runs in a v5e-8's shapes (8 simulated CPU devices,
128 images per chip, a global batch of 1,024, CIFAR-10's 10,000 test images), offline, with
`keras.datasets.cifar10.load_data()` reading the stand-in from a temporary `KERAS_HOME`
(`write_keras_cache` below), its training shrunk by substituting the variables at its top.
"""

from __future__ import annotations

import ast
import io
import pickle
import re
import tarfile
from pathlib import Path

import numpy as np

from tests.nbcells import NOTEBOOKS, cells, hidden, text
from utils import data, fresh_process

NB02 = NOTEBOOKS / "02_keras_jax_cifar10.ipynb"
SMALL = {"TRAIN_IMAGES": 2_048, "EPOCHS": 2, "PER_REPLICA_BATCH": 128}  # a v5e-8's batch
CHIPS, TEST_IMAGES = 8, 10_000
# Keras checks a cached archive's SHA-256 against CIFAR-10's, which the stand-in cannot pass.
ACCEPT_STANDIN = "import keras.src.utils.file_utils as f\nf.validate_file = lambda *a, **k: True\n"
REPORT = """
import json
print("RESULT " + json.dumps({"devices": len(devices), "global_batch": global_batch,
    "train": len(x_train), "test": len(x_test), "loss": history.history["loss"],
    "learning_rate": float(model.optimizer.learning_rate),
    "pixel_sum": float(x_train[:8].sum())}))
"""


def write_keras_cache(folder: Path, n_train: int, n_test: int) -> Path:
    """The stand-in as Keras 3's download cache, for offline tests of ``keras.datasets.cifar10``.

    Writes ``<folder>/datasets/cifar-10-batches-py-target_archive``, an uncompressed tar of
    ``cifar-10-batches-py/`` pickles, which ``load_data()`` extracts and reads. Keras reads 10,000
    images from each of the five training batches, so the ``n_train`` stand-in images repeat to
    fill 50,000. Keras also checks the archive's SHA-256 against CIFAR-10's, which a stand-in
    cannot pass: the caller must accept it. Use a temporary ``KERAS_HOME`` only. Returns the path.
    """
    x_train, y_train = data.make_standin(n_train, seed=0)
    x_test, y_test = data.make_standin(n_test, seed=1)
    x_train, y_train = (
        np.resize(x_train, (data.NUM_TRAIN, 32, 32, 3)),
        np.resize(y_train, data.NUM_TRAIN),
    )
    chunks = np.split(np.arange(data.NUM_TRAIN), len(data.TRAIN_BATCHES))
    batches = [(n, x_train[i], y_train[i]) for n, i in zip(data.TRAIN_BATCHES, chunks, strict=True)]
    files = {data.META: {b"label_names": [c.encode() for c in data.CLASS_NAMES]}}
    for name, x, y in [*batches, (data.TEST_BATCH, x_test, y_test)]:  # rows: CHW, channel-major
        files[name] = {
            b"data": x.transpose(0, 3, 1, 2).reshape(len(x), -1),
            b"labels": [int(v) for v in y],
        }
    target = data.keras_datasets_dir(folder) / f"{data.CACHE_DIRS[1].split('/')[0]}_archive"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w") as tar:
        for name, content in files.items():
            raw = pickle.dumps(content, protocol=4)  # what Keras' unpickler accepts
            info = tarfile.TarInfo(f"{data.BATCH_DIR}/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return target


def recipe() -> dict:
    found = [
        c
        for c in cells(NB02)
        if c["cell_type"] == "code" and "keras.datasets.cifar10.load_data()" in text(c)
    ]
    assert len(found) == 1, f"{len(found)} recipe cells"
    return found[0]


def shrunk(source: str) -> str:
    for name, value in SMALL.items():
        source, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", source, flags=re.MULTILINE)
        assert n == 1, f"the recipe must set {name} once, on a line of its own"
    return source


def test_the_recipe_is_one_visible_cell_that_needs_no_course_code() -> None:
    cell = recipe()
    assert not hidden(cell)
    assert "skip-execution" in cell["metadata"]["tags"]  # the course's runs do not train twice
    body = ast.parse(text(cell)).body
    modules = [a.name for n in body if isinstance(n, ast.Import) for a in n.names]
    modules += [n.module or "" for n in body if isinstance(n, ast.ImportFrom)]
    assert not any(m.split(".")[0] == "utils" for m in modules), modules
    backend = next(i for i, n in enumerate(body) if "KERAS_BACKEND" in ast.unparse(n))
    first_keras = next(i for i, n in enumerate(body) if isinstance(n, ast.Import) and
                       any(a.name == "keras" for a in n.names))  # fmt: skip
    assert backend < first_keras, "the backend must be chosen before `import keras`"
    for needed in ("DataParallel(devices=", '"mixed_bfloat16"', "jit_compile=True", ".fit("):
        assert needed in text(cell), needed


def test_the_recipe_runs_offline_in_a_v5e8s_shapes(tmp_path) -> None:
    """Every test image evaluated at a global batch that does not divide 10,000 (the last batch,
    784 images, splits 98 per chip); Adam's rate scaled by the square root of the batch growth."""
    n_train, n_test = SMALL["TRAIN_IMAGES"], TEST_IMAGES
    write_keras_cache(tmp_path, n_train=n_train, n_test=n_test)
    env = {
        "KERAS_HOME": str(tmp_path),
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={CHIPS}",
        "JAX_PLATFORMS": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
    }
    code = ACCEPT_STANDIN + shrunk(text(recipe())) + REPORT
    got = fresh_process.run_python_json(code, env=env, timeout_s=600)
    global_batch = CHIPS * SMALL["PER_REPLICA_BATCH"]
    assert got["devices"] == CHIPS and got["global_batch"] == global_batch == 1_024
    assert got["train"] == n_train and got["test"] == n_test  # every test image evaluated
    assert np.isclose(got["learning_rate"], 1e-3 * (global_batch / 128) ** 0.5, rtol=1e-6)
    assert len(got["loss"]) == SMALL["EPOCHS"] and all(np.isfinite(got["loss"]))
    standin = data.make_standin(n_train, seed=0)[0][:8].astype(np.float32) / 255
    assert np.isclose(got["pixel_sum"], float(standin.sum()), rtol=1e-5)  # read through Keras
