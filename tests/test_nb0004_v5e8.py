"""A v5e-8 rehearsal of notebooks 00, 01, 03 and 04 (Kaggle's free TPU: 8 chips, 128 per chip).

Each test runs the notebook's own statements, read from the stored notebook, with the TPU branch's
inputs: ``rt`` is ``utils.runtime.detect()``'s answer for Kaggle's environment (``v5litepod-8``:
a TPU, generation v5e, 8 chips) as ``bootstrap.prepare`` returns it, with Kaggle's
``tensorflow-cpu`` (TensorFlow on the host) or, where the notebook offers
``INSTALL_TENSORFLOW_TPU``, ``tensorflow-tpu``. JAX's 8 chips are 8 simulated CPU devices in a
fresh process. The compute is scaled down where it would be heavy, never the sizes; each test
says where. Notebook 02's rehearsal: ``tests/keras/test_nb02_recipe.py``; 05's:
``tests/test_nb0509_v5e8.py``.

- 00: section 1's TPU branch (``accel_n``, ``repeats``) formats its JAX script and runs it.
- 01: section 4's array over every device and the exercise's batch, on 8 devices.
- 03: sections 1-5, the exercise and Appendix A's MFU at 50,000 + 10,000 images, a global batch
  of 1,024 over 8 devices, 5 epochs, with a light stand-in for the CNN's forward pass.
- 04: the sizes of TensorFlow on the TPU (8 replicas) and of Kaggle's TensorFlow on the host,
  the ``tf.data`` pipelines and the exercise's check.
"""

from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.nbcells import NOTEBOOKS, code_cell, parameters_cell, statements
from tests.tools.platforms import PLATFORMS
from utils import bootstrap, fresh_process, runtime, simulated_devices

CHIPS, PER_CHIP = 8, 128  # a v5e-8: 8 chips, the seed's batch of 128 on each
NB = {n: next(NOTEBOOKS.glob(f"{n}_*.ipynb")) for n in ("00", "01", "03", "04")}
KAGGLE_TF = {"tensorflow-cpu": "2.20.0"}  # Kaggle's TPU image: TensorFlow on the host only
TF_TPU = {"tensorflow-tpu": "2.20.0"}  # INSTALL_TENSORFLOW_TPU = True: TensorFlow on the chips
V5E8_ENV = {"XLA_FLAGS": simulated_devices.child_flags(CHIPS), "JAX_PLATFORMS": "cpu"}


def kaggle_v5e8(tf_versions: dict[str, str]) -> bootstrap.Prepared:
    """What ``bootstrap.prepare`` returns on Kaggle's TPU VM v5e-8 with ``tf_versions``."""
    versions = {"jax": "0.7.2", **tf_versions}
    with tempfile.TemporaryDirectory() as root:  # no /dev, /proc or /sys: the environment only
        env = PLATFORMS["kaggle"]["env"]
        rt = runtime.detect(env=env, root=root, run=None, frameworks=versions)
    values = {f.name: getattr(rt, f.name) for f in fields(runtime.Runtime)}
    tf_on_device = bootstrap.tf_on_tpu(rt, versions)
    return bootstrap.Prepared(**values, tf_on_device=tf_on_device, tf_host=True)


def source_of(source: str, *names: str) -> str:
    """The cell's top-level statements that bind ``names``, as source (for a fresh process)."""
    return ast.unparse(statements(source, *names))


def run_on_v5e8(
    cell_sources: dict[str, str],
    driver: str,
    tf_versions: dict[str, str],
    env: dict[str, str] = V5E8_ENV,
) -> Any:
    """``driver`` in a fresh Python (by default one that sees 8 devices), ``rt`` set to Kaggle's
    v5e-8 and ``run(name)`` executing ``cell_sources[name]`` in its globals, as a kernel runs a
    cell."""
    prelude = (
        "import json\n"
        f"CELLS = json.loads({json.dumps(cell_sources)!r})\n"
        "def run(name):\n"
        "    exec(CELLS[name], globals())\n"
        "from tests.test_nb0004_v5e8 import kaggle_v5e8\n"
        f"rt = kaggle_v5e8({tf_versions!r})\n"
    )
    return fresh_process.run_python_json(prelude + driver, env=env, timeout_s=120)


# ---------------------------------------------------------------------------------------------
# 00: section 1 on a TPU times JAX's bf16 matmul in a fresh process
# ---------------------------------------------------------------------------------------------


def test_00_the_v5e8_branch_formats_and_runs_its_tpu_matmul(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The TPU branch sizes the matmul (8,192) and the repeats (10), formats ``TPU_MATMUL`` with
    them (the CPU never formats it), and runs it in a fresh process. Here that process sees 8
    devices and runs n = 128 with 3 repeats; the script it was handed is the v5e-8's."""
    import utils

    ns: dict[str, Any] = {"rt": kaggle_v5e8(KAGGLE_TF), "measured": {}}
    exec(parameters_cell(NB["00"]), ns)  # noqa: S102
    sizes = source_of(code_cell(NB["00"], "big = rt.accelerator"), "big", "accel_n", "repeats")
    exec(sizes, ns)  # noqa: S102
    assert ns["big"] and (ns["accel_n"], ns["repeats"]) == (8192, 10)
    n, repeats = ns["accel_n"], ns["repeats"]
    handed: list[str] = []

    def scaled_child(code: str, *, timeout_s: float, env: dict | None = None) -> Any:
        handed.append(code)
        ast.parse(code)  # the formatted script is Python, with the v5e-8's sizes in it
        assert f"\nn = {n}\n" in code and f"repeats={repeats})" in code, code
        small = code.replace(f"\nn = {n}\n", "\nn = 128\n").replace(f"={repeats})", "=3)")
        return fresh_process.run_python_json(small, env=V5E8_ENV, timeout_s=timeout_s)

    monkeypatch.setattr(utils, "fresh_process", SimpleNamespace(run_python_json=scaled_child))
    exec(code_cell(NB["00"], "TPU_MATMUL = "), ns)  # noqa: S102
    assert len(handed) == 1
    assert ns["measured"]["tpu_matmul_bf16"][0] > 0
    assert "bf16 8192x8192 matmul" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# 01: an array over every device, and the exercise's batch split over "batch"
# ---------------------------------------------------------------------------------------------

DRIVER_01 = """
run("parameters")
run("setup")  # on_cpu, run_jax
out = {"on_cpu": on_cpu, "run_jax": run_jax}
run("split"); run("split check")
out |= {"n_dev": n_dev, "sum": float(device_sum), "backend": jax.default_backend(),
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS")}
for SHOW_SOLUTIONS in (False, True):
    run("exercise"); run("solution"); run("exercise check")
    arr = jax.device_put(batch, my_sharding)
    out[str(SHOW_SOLUTIONS)] = {
        "verdict": check_my_batch(arr, batch),
        "rows": sorted(s.data.shape[0] for s in arr.addressable_shards),
        "batch": list(batch.shape),
    }
print("RESULT " + json.dumps(out))
"""


# The host's one CPU device: JAX_PLATFORMS and XLA_FLAGS empty, as on the TPU VM.
ON_THE_HOST = {"XLA_FLAGS": "", "JAX_PLATFORMS": ""}


@pytest.mark.parametrize(
    ("tf_versions", "env", "n"),
    [(KAGGLE_TF, V5E8_ENV, CHIPS), (TF_TPU, ON_THE_HOST, 1)],
    ids=["jax-on-the-chips", "tensorflow-tpu-keeps-jax-on-the-host"],
)
def test_01_the_v5e8_branch_splits_over_its_devices(
    tf_versions: dict[str, str], env: dict[str, str], n: int
) -> None:
    """Section 4 puts 1..n on the n devices (sum n(n+1)/2); the exercise's batch has 4 rows per
    device: unsolved, every device holds all of them; solved, each holds 4 (``P("batch")``).
    On Kaggle's image JAX has the 8 chips; with ``tensorflow-tpu`` (Part 2 drives the chips)
    the cell keeps JAX on the host's CPU, one device."""
    sources = {
        "parameters": parameters_cell(NB["01"]),
        "setup": code_cell(NB["01"], "on_cpu = rt.accelerator"),
        "split": code_cell(NB["01"], "device_sum = jax.jit(jnp.sum)"),
        "split check": code_cell(NB["01"], "# @title Check: one value per device"),
        "exercise": code_cell(NB["01"], "my_sharding = NamedSharding(mesh, P())"),
        "solution": code_cell(NB["01"], "# @title Solution"),
        "exercise check": code_cell(NB["01"], "def check_my_batch("),
    }
    got = run_on_v5e8(sources, DRIVER_01, tf_versions, env)
    assert (got["on_cpu"], got["run_jax"]) == (False, True)
    assert got["n_dev"] == n and got["sum"] == n * (n + 1) / 2
    if n == 1:  # kept off the chips that TensorFlow takes
        assert (got["JAX_PLATFORMS"], got["backend"]) == ("cpu", "cpu")
    unsolved, solved = got["False"], got["True"]
    assert unsolved["batch"] == solved["batch"] == [4 * n, 3]
    assert unsolved["rows"] == [4 * n] * n
    assert f"every device holds all {4 * n} rows" in unsolved["verdict"]
    assert solved["rows"] == [4] * n
    assert solved["verdict"] == f"passed: each of the {n} device(s) holds 4 of the {4 * n} rows"


# ---------------------------------------------------------------------------------------------
# 03: data parallelism by hand at 50,000 images, a global batch of 1,024 over 8 chips
# ---------------------------------------------------------------------------------------------

# Stand-ins, in the child: CIFAR-10's shapes as zeros that take no memory (the loader records what
# it was asked for), and a forward pass about a thousand times lighter than the CNN's, with the
# same parameters, inputs and logits (so the step, its all-reduce and every shape stay the
# notebook's).
STAND_INS_03 = """
asked = []

def zeros_cifar(*, source, subset, normalize):
    asked.append([source, list(subset), normalize])
    n_train, n_test = subset
    image = np.zeros((1, 32, 32, 3), np.float32 if normalize else np.uint8)
    return data.CifarData(
        np.broadcast_to(image, (n_train, 32, 32, 3)), np.zeros(n_train, np.int64),
        np.broadcast_to(image, (n_test, 32, 32, 3)), np.zeros(n_test, np.int64),
        data.CLASS_NAMES, "zeros: a v5e-8 rehearsal", True)

def light_apply(params, images):
    x = images[:, ::8, ::8, :].reshape(images.shape[0], -1)  # 48 of the 3,072 values
    x = jax.nn.relu(x @ params["dense1"]["w"][:48] + params["dense1"]["b"])
    return x @ params["dense2"]["w"] + params["dense2"]["b"]
"""

DRIVER_03 = """
run("imports"); run("sizes"); run("flags"); run("devices")
out = {"sizes": [train_images, test_images, epochs, per_replica_batch], "n_devices": len(devices)}
exec(STAND_INS, globals()); data.load_cifar10 = zeros_cifar
run("data"); run("model"); apply = light_apply
run("optimizer"); run("model check"); run("data parallel"); run("all-reduce check")
out |= {"global_batch": global_batch, "learning_rate": learning_rate, "all_reduces": all_reduces,
        "shard": list(images.addressable_shards[0].data.shape), "asked": asked}
fed, sharded_step = [], dp_step

def dp_step(p, s, x, y):  # records each step's batch; stops at once on one of another size
    fed.append([list(x.shape), sorted({s_.data.shape[0] for s_ in x.addressable_shards}),
                len(x.addressable_shards)])
    assert fed[-1] == [[global_batch, 32, 32, 3], [per_replica_batch], n_devices], fed[-1]
    return sharded_step(p, s, x, y)

run("batches"); run("training"); run("loss check")
out |= {"fed": list(fed), "epoch_losses": epoch_losses}
run("recompilation"); run("accuracy"); run("compile check")
out["predicted"] = list(predicted.shape)
run("exercise"); run("solution")
evaluated, summed = [], summed_loss

def summed_loss(params, images, labels, valid):
    evaluated.append([images.shape[0], int(np.sum(valid))])
    return summed(params, images, labels, valid)

run("exercise check")
out |= {"evaluated": evaluated, "compiles": n_compiles, "agrees": bool(agrees)}
run("flops"); run("mfu"); run("mfu check")
out |= {"chips": chips, "ceiling": steps.ceiling("all chips"),
        "label": mfu.ceiling_label(tpu, chips),
        "bench_batch": batch, "bench_shard": list(xs.addressable_shards[0].data.shape)}
print("RESULT " + json.dumps(out))
"""


def sources_03() -> dict[str, str]:
    marks = {
        "sizes": "train_images = TRAIN_IMAGES or",
        "flags": "if on_cpu:  # before `import jax`",
        "devices": "devices = jax.devices()",
        "data": "cifar = data.load_cifar10(",
        "model": "def init_params(",
        "optimizer": "params0 = init_params(",
        "model check": "# @title Check: the same network",
        "data parallel": "def data_parallel(",
        "all-reduce check": "# @title Check: the compiler added",
        "batches": "def batches(",
        "training": "for epoch in range(epochs):",
        "loss check": "# @title Check: the loss goes down",
        "recompilation": "n_small = ",
        "accuracy": "predicted = jax.jit(apply)",
        "compile check": "# @title Check: compile counts",
        "exercise": "EXERCISE_BATCH = ",
        "solution": "# @title Solution",
        "exercise check": "# @title Check your answer",
        "flops": "def xla_flops(",
        "mfu": "def timed(",
        "mfu check": "# @title Check: MFU is a fraction",
    }
    found = {name: code_cell(NB["03"], mark) for name, mark in marks.items()}
    setup = ast.parse(code_cell(NB["03"], "rt = bootstrap.prepare("))
    kept = [n for n in setup.body if "bootstrap.prepare(" not in ast.unparse(n)]  # no installs
    return {"parameters": parameters_cell(NB["03"]), "imports": ast.unparse(kept), **found}


def run_03(overrides: str = "") -> Any:
    """Notebook 03 on Kaggle's v5e-8 (8 simulated devices), its parameters cell followed by
    ``overrides`` (papermill's way), with the solution applied."""
    driver = f'STAND_INS = {STAND_INS_03!r}\nrun("parameters")\nSHOW_SOLUTIONS = True\n'
    return run_on_v5e8(sources_03(), driver + overrides + DRIVER_03, KAGGLE_TF)


def test_03_the_v5e8_branch_trains_evaluates_and_measures_at_its_sizes() -> None:
    """50,000 + 10,000 images, 5 epochs, 128 per chip: a global batch of 1,024, 128 rows on each
    of 8 devices in every step (48 full batches an epoch), the gradient all-reduced; every test
    image predicted, and the exercise's padded batches of 96 count each test image once; MFU
    against 8 chips' published v5e peak. Not run: the check that a TPU runtime's JAX is not on
    the CPU (here it is, by design), Appendix A's FLOP check (the stand-in forward pass is
    lighter than the CNN) and Appendix B's trace (no sizes of its own)."""
    got = run_03()
    assert got["sizes"] == [50_000, 10_000, 5, PER_CHIP] and got["n_devices"] == CHIPS
    assert got["asked"] == [["auto", [50_000, 10_000], True]]
    gb = CHIPS * PER_CHIP
    assert got["global_batch"] == gb and got["shard"] == [PER_CHIP, 32, 32, 3]
    assert np.isclose(got["learning_rate"], 1e-3 * (gb / 128) ** 0.5) and got["all_reduces"] > 0
    steps = 50_000 // gb
    assert got["fed"] == [[[gb, 32, 32, 3], [PER_CHIP], CHIPS]] * (steps * 5)
    assert len(got["epoch_losses"]) == 5 and got["predicted"] == [10_000]
    batches = -(-10_000 // 96)  # 105 batches of 96: the last 16 images and 80 padded rows
    assert [b for b, _ in got["evaluated"]] == [96] * batches * 2  # two passes, one shape
    assert sum(v for _, v in got["evaluated"]) == 2 * 10_000 and got["evaluated"][-1][1] == 16
    assert got["compiles"] == 1 and got["agrees"]
    assert got["chips"] == CHIPS and got["ceiling"] == CHIPS * 197e12
    assert "8 TPU v5e chip(s)" in got["label"]
    assert got["bench_batch"] == gb and got["bench_shard"] == [PER_CHIP, 32, 32, 3]


def test_03_too_few_images_for_one_global_batch_is_refused_by_name() -> None:
    """The smallest ``TRAIN_IMAGES`` 03 accepts (256) is a fine CPU run (a global batch of 128)
    and less than one v5e-8 global batch: the notebook should say so, as 04's and 05's do."""
    with pytest.raises(fresh_process.FreshProcessError, match="raise TRAIN_IMAGES"):
        run_03("TRAIN_IMAGES = 256\n")


# ---------------------------------------------------------------------------------------------
# 04: TensorFlow on the chips (INSTALL_TENSORFLOW_TPU) or, as Kaggle ships it, on the host
# ---------------------------------------------------------------------------------------------


def imports(source: str) -> str:
    """The cell's top-level import statements, as source."""
    body = ast.parse(source).body
    return "\n".join(ast.unparse(n) for n in body if isinstance(n, ast.Import | ast.ImportFrom))


def zeros_cifar(asked: list, *, source: str, subset: int) -> SimpleNamespace:
    """``data.load_cifar10`` for 04: CIFAR-10's uint8 shapes as zeros (no memory), labels 0-9 in
    turn; for ``subset`` training images the loader's test images, a fifth as many (>= 1,000)."""
    from utils import data

    asked.append((source, subset))
    n_test = max(1_000, subset // 5)
    image = np.zeros((1, 32, 32, 3), np.uint8)
    return SimpleNamespace(
        x_train=np.broadcast_to(image, (subset, 32, 32, 3)),
        y_train=np.arange(subset) % 10,
        x_test=np.broadcast_to(image, (n_test, 32, 32, 3)),
        y_test=np.arange(n_test) % 10,
        class_names=data.CLASS_NAMES,
    )


def sizes_04(tf_versions: dict[str, str]) -> dict[str, Any]:
    """04's sizes on Kaggle's v5e-8: section 0's image count, epochs and policy; the strategy
    and the data (cell 6's statements); the global batch and ``tf.data`` pipelines (section 2);
    the benchmark's batches, slices and peaks (section 3). TensorFlow's TPUStrategy on a v5e-8
    has 8 replicas (its stand-in here); Kaggle's TensorFlow gets the course's real strategy."""
    tf = pytest.importorskip("tensorflow")
    from utils.tf import pipelines, strategies

    rt = kaggle_v5e8(tf_versions)
    on_chips = SimpleNamespace(num_replicas_in_sync=CHIPS)
    asked: list = []
    ns: dict[str, Any] = {"rt": rt, "bootstrap": bootstrap, "tf": tf, "pipelines": pipelines}
    ns["strategies"] = SimpleNamespace(
        get_strategy=lambda: on_chips if rt.tf_on_device else strategies.get_strategy(runtime=rt)
    )
    ns["data"] = SimpleNamespace(load_cifar10=lambda **kw: zeros_cifar(asked, **kw))
    exec(parameters_cell(NB["04"]), ns)  # noqa: S102
    exec(code_cell(NB["04"], "tf_tpu = bootstrap.tf_on_tpu(rt)"), ns)  # noqa: S102
    exec(source_of(code_cell(NB["04"], "strategy = "), "strategy", "replicas", "cifar"), ns)  # noqa: S102
    exec(code_cell(NB["04"], "# @title Check: the training set holds"), ns)  # noqa: S102
    ns["train_images_np"], ns["train_labels_np"] = ns["cifar"].x_train, ns["cifar"].y_train
    section_2 = source_of(code_cell(NB["04"], "def build_and_compile("), "global_batch",
                           "learning_rate", "train_ds", "test_ds")  # fmt: skip
    exec(section_2, ns)  # noqa: S102
    bench = code_cell(NB["04"], "bench_batches = ")
    names = ["bench_batches", "bench_images", "flops_per_image", "seed_x", "bench_ds", "tpu"]
    names += ["chips"] + (["peaks"] if rt.tf_on_device else [])  # the host's: a measured matmul
    exec(imports(bench) + "\n" + source_of(bench, *names), ns)  # noqa: S102
    exec(source_of(code_cell(NB["04"], "probe_x = "), "probe_x"), ns)  # noqa: S102
    return ns | {"asked": asked}


def evaluated(ds: Any) -> list[int]:
    """The batch sizes one pass over ``ds`` gives."""
    return [int(x.shape[0]) for x, _ in ds]


def test_04_tensorflow_on_the_v5e8s_chips_at_its_sizes() -> None:
    """``INSTALL_TENSORFLOW_TPU = True``: 50,000 images, 10 epochs, bfloat16, 8 replicas of 128
    (a global batch of 1,024); 48 full training batches of one static shape; the test pipeline
    gives all 10,000 test images (the last batch 784, 98 per replica), none dropped; the
    benchmark's 24 batches and slices inside the data; peaks of 8 published v5e chips."""
    ns = sizes_04(TF_TPU)
    assert (ns["tf_tpu"], ns["device"], ns["policy"]) == (True, "TPU", "mixed_bfloat16")
    assert (ns["train_images"], ns["epochs"], ns["replicas"]) == (50_000, 10, CHIPS)
    assert ns["asked"] == [("auto", 50_000)]
    gb = ns["global_batch"]
    assert gb == CHIPS * PER_CHIP and np.isclose(ns["learning_rate"], 1e-3 * (gb / 128) ** 0.5)
    assert ns["train_ds"].element_spec[0].shape.as_list() == [gb, 32, 32, 3]
    assert int(ns["train_ds"].cardinality()) == 50_000 // gb == 48
    n_test = len(ns["cifar"].x_test)  # every test image once; the last batch 98 per replica
    assert n_test == 10_000 and evaluated(ns["test_ds"]) == [gb] * 9 + [784]
    assert ns["bench_batches"] == 24 and int(ns["bench_ds"].cardinality()) == 24
    assert len(ns["seed_x"]) == ns["bench_images"] == 24 * gb <= ns["train_images"]
    assert (ns["tpu"], ns["chips"]) == ("v5e", CHIPS)
    assert {d: p() for d, p in ns["peaks"].items()} == dict.fromkeys(("float32", "bfloat16"),
                                                                     CHIPS * 197e12)  # fmt: skip
    assert len(ns["probe_x"]) == 256 <= gb


def test_04_kaggles_tensorflow_on_the_host_keeps_the_cpus_sizes() -> None:
    """Kaggle's image as shipped (``tensorflow-cpu``): TensorFlow runs on the v5e-8's host, one
    replica, the CPU's 8,000 images, 5 epochs, float32 and a global batch of 128."""
    ns = sizes_04(KAGGLE_TF)
    assert (ns["tf_tpu"], ns["device"], ns["policy"]) == (False, "CPU", "float32")
    assert (ns["train_images"], ns["epochs"], ns["replicas"]) == (8_000, 5, 1)
    assert ns["global_batch"] == PER_CHIP and (ns["tpu"], ns["chips"]) == (None, 1)
    n_test = len(ns["cifar"].x_test)
    assert sum(evaluated(ns["test_ds"])) == n_test == 1_600
    assert ns["bench_batches"] == 24 and len(ns["seed_x"]) == 24 * PER_CHIP


def test_04_the_exercise_passes_at_the_v5e8s_global_batch() -> None:
    """The solution, checked by the notebook's check at the global batch of 1,024. Its pass keeps
    every batch in memory (1.6 GB at 50,000 images), so the training set here is 4 batches and
    the remainder that 50,000 leaves (848): every full batch once, the remainder dropped."""
    ns = sizes_04(TF_TPU)
    gb = ns["global_batch"]
    kept = 4 * gb + ns["train_images"] % gb
    cifar = ns["cifar"]
    ns["cifar"] = SimpleNamespace(**{**vars(cifar), "x_train": cifar.x_train[:kept],
                                     "y_train": cifar.y_train[:kept]})  # fmt: skip
    ns["SHOW_SOLUTIONS"] = True
    exec(code_cell(NB["04"], "# @title Solution"), ns)  # noqa: S102
    exec(code_cell(NB["04"], "def static_pipeline_problems("), ns)  # noqa: S102  (asserts)
    assert ns["problems"] == [] and evaluated(ns["my_ds"]) == [gb] * 4
