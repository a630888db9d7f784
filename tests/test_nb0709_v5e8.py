"""A v5e-8 rehearsal of notebooks 07, 08 and 09 (issue 43): Kaggle's free TPU, one host with 8
chips, as each notebook's code sees it, so a size that breaks there fails here first.

The notebooks' own statements run, read from the stored notebooks with ``ast`` (never copied
here), with the TPU branch's inputs: ``rt.accelerator == "tpu"``, a v5e, 8 devices. Heavy calls
get stand-ins (Keras' rungs record what they would train; CIFAR-10 is zeros of its shapes, the
offline loader's own sizes, labels numbering the images), so nothing big is allocated.

* **07**: Part 1 on all 8 chips: 16,384 images (and the smallest ``TRAIN_IMAGES`` accepted),
  ``global_batch = 128 x 8``, whole steps per epoch, the v5e line at one chip's 128, each image in
  one of the 8 shards and section 1's check reading them back; then section 3's ``fit`` and
  ``input_wait`` in a fresh process on 8 simulated CPU devices with ``DataParallel``, the model's
  maths scaled down to one layer: every batch Keras hands the devices is split 128 per device.
* **08**: no TPU branch (its sizes are its parameters, the same on every machine; on a v5e-8 it
  runs as a rehearsal on CPU processes). Tested: it stays without one, and every process it starts
  keeps JAX off the chips (a v5e-8's 8 chips can be held by one process only).
* **09**: one chip trains (Keras without a distribution: device 0), its MFU against one chip's
  peak; 50,000 images, the sweep's batches 128-2,048, for every knee the sweep may pick: whole
  batches and chunks, every ``x[:n]`` inside the images. At the smallest ``TRAIN_IMAGES`` it
  accepts (1,024) the sweep keeps only the batches one pass holds. (Grain alone's
  rounds at a TPU's sizes: ``tests/test_notebook_09.py``.)
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import os
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.nbcells import (
    NOTEBOOKS,
    code_cell,
    code_sources,
    parameters,
    run_statements,
    statements,
)
from utils import data, flops, fresh_process, mfu, roofline, simulated_devices
from utils.jax import multihost_env
from utils.parameters import Range, per_replica_batch_used

NB07 = NOTEBOOKS / "07_tf_data_performance.ipynb"
NB08 = NOTEBOOKS / "08_beyond_one_host.ipynb"
NB09 = NOTEBOOKS / "09_train_faster.ipynb"
CHIPS = 8  # Kaggle's v5e-8: one host, 8 chips
V5E8 = SimpleNamespace(accelerator="tpu", tpu=SimpleNamespace(generation="v5e", chips=CHIPS))
CPU = SimpleNamespace(accelerator="cpu", tpu=None)
# 8 CPU devices in a fresh process, patient collectives and a spare XLA thread per device (on 2
# cores an all-reduce could otherwise hold every pool thread while one device waits for one)
SIMULATED = {"XLA_FLAGS": simulated_devices.child_flags(CHIPS), "JAX_PLATFORMS": "cpu"}
SIMULATED["PJRT_NPROC"] = str(multihost_env.cpu_threads(CHIPS))


# --- reading the notebooks' own statements ---------------------------------------------------


def _checked_params(nb: Path) -> ast.Call:
    tree = ast.parse(code_cell(nb, "check_params("))
    return next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "check_params"
    )


def _smallest(nb: Path, name: str) -> int:
    """The smallest value the notebook's ``check_params`` accepts for ``name``."""
    spec = next(k.value for k in _checked_params(nb).keywords if k.arg == name)
    assert isinstance(spec, ast.Tuple)
    low = eval(ast.unparse(spec.elts[-1]), {"Range": Range}).min  # noqa: S307
    cell = ast.parse(code_cell(nb, "check_params("))
    imports = [
        n for n in cell.body if isinstance(n, ast.ImportFrom) and n.module == "utils.parameters"
    ]
    ns = {**parameters(nb), name: low}
    run_statements([*imports, ast.Expr(_checked_params(nb))], ns)  # the notebook's check accepts it
    return int(low)


def _zeros(shape: tuple[int, ...], dtype: type = np.uint8) -> np.ndarray:
    """Zeros of ``shape`` in the bytes of one row (broadcast)."""
    return np.broadcast_to(np.zeros((1, *shape[1:]), dtype), shape)


def _standin(n: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``data.make_standin``'s shapes without its pixels; label ``i`` numbers image ``i``."""
    return _zeros((n, 32, 32, 3)), np.arange(n)


def _devices(n: int) -> SimpleNamespace:
    """``jax`` as the size statements see it: ``n`` devices."""
    return SimpleNamespace(devices=lambda: [SimpleNamespace(platform="tpu")] * n)


def _slices(nb: Path, arrays: Iterable[str]) -> list[tuple[str, str]]:
    """Every ``a[:stop]`` the notebook's code takes of ``arrays``: (array, stop as written)."""
    found = set()
    for source in code_sources(nb):
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in arrays
                and isinstance(node.slice, ast.Slice)
            ):
                assert node.slice.lower is None and node.slice.upper is not None, ast.unparse(node)
                found.add((node.value.id, ast.unparse(node.slice.upper)))
    return sorted(found)


# --- 07: Grain and Keras on all of a v5e-8's chips ----------------------------------------


class _Shards:
    """ArrayRecord's writer and Grain's reader, in memory; a record is its image's number."""

    def __init__(self) -> None:
        self.records: dict[str, list[int]] = {}

    def writer(self, path: str, options: str) -> SimpleNamespace:
        rows = self.records.setdefault(path, [])
        return SimpleNamespace(write=rows.append, close=lambda: None)

    def source(self, paths: list[str]) -> list[int]:  # file after file, as ArrayRecord reads
        return [r for p in paths for r in self.records[p]]


def nb07_sizes(
    monkeypatch: pytest.MonkeyPatch, rt: SimpleNamespace, devices: int, **params: object
) -> dict:
    """07's size statements (sections 1-3, Part 2's epoch) for ``rt`` with ``devices`` devices;
    section 1's check cell runs on the shards written by the notebook's ``write_shards``."""
    monkeypatch.setattr(data, "make_standin", _standin)
    shards = _Shards()
    ns: dict = {**parameters(NB07), **params, "rt": rt, "jax": _devices(devices), "os": os}
    gp = SimpleNamespace(
        encode=lambda image, label: int(label),
        decode=lambda r: {"image": ns["images"][r], "label": ns["labels"][r]},
    )
    ns |= {"np": np, "gp": gp, "Path": Path, "folder": Path("shards"), "flops": flops}
    ns |= {"data": SimpleNamespace(load_cifar10=functools.partial(data.load_cifar10, offline=True))}
    ns |= {"ArrayRecordWriter": shards.writer, "roofline": roofline}
    ns["grain"] = SimpleNamespace(sources=SimpleNamespace(ArrayRecordDataSource=shards.source))
    section_1 = code_cell(NB07, "train_images = TRAIN_IMAGES or")
    names = ("train_images", "cifar", "images", "write_shards", "paths", "source")
    run_statements(statements(section_1, *names), ns)
    exec(code_cell(NB07, "# @title Check: every record decodes back"), ns)  # noqa: S102  (may raise)
    run_statements(statements(code_cell(NB07, "global_batch = "), "workers", "global_batch"), ns)
    run_statements(statements(code_cell(NB07, "per_chip = "), "per_chip", "f32", "v5e", "need"), ns)
    run_statements(statements(code_cell(NB07, "steps = train_images"), "steps"), ns)
    run_statements(statements(code_cell(NB07, "epoch = steps"), "epoch"), ns)
    return ns


@pytest.mark.parametrize("images", ["default", "smallest accepted"])
def test_07_part_1_on_a_v5e8_trains_whole_global_batches_of_8_x_128(
    images: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16,384 images (the TPU's default) and the fewest the notebook accepts: each in one of the
    8 shards, section 1's check reads them back, a global batch of 128 per chip, whole steps."""
    params = {"TRAIN_IMAGES": _smallest(NB07, "TRAIN_IMAGES")} if images != "default" else {}
    ns = nb07_sizes(monkeypatch, V5E8, CHIPS, **params)
    n = ns["train_images"]
    assert n == params.get("TRAIN_IMAGES", 16_384)
    assert len(ns["images"]) == len(ns["source"]) == n, "cifar.x_train[:train_images] is short"
    assert sorted(ns["order"]) == list(range(n)), "every record in one shard"
    assert ns["global_batch"] == CHIPS * per_replica_batch_used(None, on_cpu=False, devices=CHIPS)
    assert ns["global_batch"] % CHIPS == 0, "DataParallel splits the batch over the chips"
    assert ns["per_chip"] == ns["v5e"].batch == 128, "the v5e line predicts one chip's share"
    assert ns["steps"] >= 1, f"{n} images hold no global batch of {ns['global_batch']}"
    assert ns["epoch"] == ns["steps"] * ns["global_batch"] <= n
    if images == "default":
        assert ns["steps"] == 16


def test_07_cpu_branch_keeps_its_seed_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    ns = nb07_sizes(monkeypatch, CPU, 1)
    got = tuple(ns[k] for k in ("train_images", "global_batch", "per_chip", "steps"))
    assert got == (2_048, 128, 128, 16)


FIT_07 = """
import itertools
import json
from types import SimpleNamespace

import jax
import keras
import numpy as np
from keras.src.backend.jax import distribution_lib

from utils import throughput
from utils.keras import models

# the compute scaled down: the seed CNN's place taken by one layer
models.seed_cnn = lambda: keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(10)])
split, _distribute = [], distribution_lib.distribute_data_input


def recording(batch, layout, batch_dim_name):  # every batch Keras hands the devices
    out = _distribute(batch, layout, batch_dim_name)
    if out is not None:  # (no sample weights)
        pieces = {s.data.shape for s in out.addressable_shards}
        split.append([list(out.shape), sorted(map(list, pieces)), len(out.addressable_shards)])
    return out


distribution_lib.distribute_data_input = recording
rt, TRAIN_IMAGES = SimpleNamespace(accelerator="tpu"), None
grain_cmp, processes = SimpleNamespace(names=(), rate=lambda name: 1e4), "Grain, processes"
"""
REPORT_07 = """
print("RESULT " + json.dumps({
    "devices": len(jax.devices()), "global_batch": global_batch, "steps": steps,
    "per_chip": per_chip, "losses": [float(v) for v in history.history["loss"]],
    "learning_rate": float(model.optimizer.learning_rate), "split": split,
    "weights_on": len(model.trainable_variables[0].value.sharding.device_set),
    "wait_pct": wait["wait_pct"]}))
"""


def test_07_section_3_fits_data_parallel_on_8_devices_128_per_device() -> None:
    """Section 3 as on a v5e-8 (8 simulated CPU devices): 16 steps of 1,024 uint8 images per
    epoch, every batch ``fit`` and ``train_on_batch`` hand the devices split 128 per device,
    the weights on all 8, Adam's rate by the square root of the batch growth."""
    feed = (
        "in_processes = itertools.repeat({'image': np.zeros((global_batch, 32, 32, 3), np.uint8),"
        " 'label': np.zeros(global_batch, np.int64)})"
    )
    pieces = [
        ast.unparse(statements(code_cell(NB07, "train_images = TRAIN_IMAGES or"), "train_images")),
        ast.unparse(statements(code_cell(NB07, "global_batch = "), "global_batch")),
        code_cell(NB07, "per_chip = "),  # section 2's v5e line, whole
        feed,
        code_cell(NB07, "steps = train_images"),  # section 3, whole
    ]
    env = {**SIMULATED, "KERAS_BACKEND": "jax", "CUDA_VISIBLE_DEVICES": ""}
    got = fresh_process.run_python_json(
        "\n".join([FIT_07, *pieces, REPORT_07]), env=env, timeout_s=120
    )
    assert (got["devices"], got["global_batch"], got["per_chip"]) == (CHIPS, CHIPS * 128, 128)
    assert got["steps"] == 16 and len(got["losses"]) == 2 and np.isfinite(got["losses"]).all()
    assert np.isclose(got["learning_rate"], 1e-3 * CHIPS**0.5, rtol=1e-6)
    assert got["weights_on"] == CHIPS and 0 <= got["wait_pct"] < 100
    assert len(got["split"]) >= 2 * (3 * got["steps"] + 1), "images and labels of every step"
    for shape, pieces_shapes, count in got["split"]:
        assert shape[0] == CHIPS * 128 and count == CHIPS, shape
        assert pieces_shapes == [[128, *shape[1:]]], (shape, pieces_shapes)


# --- 08: a one-host v5e-8 runs the rehearsal on CPU processes ------------------------------


def _launched(nb: Path) -> tuple[list[str], list[str]]:
    """(modules run with ``-m``, code run with ``-c``) in the notebook's command lists."""
    constants: dict[str, str] = {}
    modules, codes = set(), set()
    for source in code_sources(nb):
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                constants |= {
                    t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)
                }
        for node in ast.walk(tree):
            if not isinstance(node, ast.List):
                continue
            for flag, arg in zip(node.elts, node.elts[1:], strict=False):
                if isinstance(flag, ast.Constant) and flag.value in ("-m", "-c"):
                    value = arg.value if isinstance(arg, ast.Constant) else constants[arg.id]
                    (modules if flag.value == "-m" else codes).add(value)
    return sorted(modules), sorted(codes)


def test_08_has_no_tpu_branch_so_its_cpu_run_is_its_v5e8_run() -> None:
    """Its sizes are its parameters, whatever the machine: no cell reads the runtime (``rt``),
    JAX's devices or the accelerator. A branch added later needs a rehearsal here."""
    trees = [ast.parse(s) for s in code_sources(NB08)]
    read = {
        n.id
        for t in trees
        for n in ast.walk(t)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    attrs = {n.attr for t in trees for n in ast.walk(t) if isinstance(n, ast.Attribute)}
    branch = read & {"rt", "jax", "on_cpu", "n_jax"} | attrs & {"accelerator", "tpu", "devices"}
    assert not branch, f"08 now reads {sorted(branch)}: rehearse its TPU branch here"


CHILD_08 = """
import ast, json, os, sys
from utils import simulated_devices

found = {}
for module in MODULES:
    body = ast.parse(open(module.replace(".", "/") + ".py").read()).body
    at = [i for i, n in enumerate(body) if isinstance(n, ast.Expr)
          and isinstance(n.value, ast.Call)
          and ast.unparse(n.value.func) == "multihost_env.prepare"]
    if not at:
        found[module] = None
        continue
    os.environ.pop("XLA_FLAGS", None)
    os.environ["JAX_PLATFORMS"] = "tpu"  # what a TPU VM may preset
    ns = {"__name__": "rehearsal"}
    exec(compile(ast.Module(body[: at[0]], []), module, "exec"), ns)
    before = "jax" in sys.modules
    exec(compile(ast.Module(body[at[0] : at[0] + 1], []), module, "exec"), ns)
    found[module] = [before, os.environ["JAX_PLATFORMS"], simulated_devices.requested_count()]
print("RESULT " + json.dumps(found))
"""


def test_08_every_process_it_starts_on_a_v5e8_host_keeps_jax_off_the_chips() -> None:
    """On a TPU VM (``JAX_PLATFORMS=tpu`` preset, the launcher's variables set) each module the
    notebook runs puts JAX on simulated CPU devices before JAX is imported; its ``-c`` commands
    import no JAX. Otherwise its 2 processes would both reach for the host's 8 chips."""
    modules, codes = _launched(NB08)
    assert "utils.jax.multihost_worker" in modules and len(modules) >= 3, modules
    for code in codes:
        imported = {
            a.name.split(".")[0]
            for n in ast.walk(ast.parse(code))
            if isinstance(n, ast.Import)
            for a in n.names
        }
        assert not imported & {"jax", "keras"}, code
    devices = parameters(NB08)["SIMULATED_DEVICES"]
    env = {"COURSE_NUM_PROCESSES": "2", "COURSE_PROCESS_ID": "0", "SIMULATED_DEVICES": str(devices)}
    env |= {"COURSE_COORDINATOR": "127.0.0.1:1", "TPU_ACCELERATOR_TYPE": "v5litepod-8"}
    code = f"MODULES = {json.dumps(modules)}\n{CHILD_08}"
    got = fresh_process.run_python_json(code, env=env, timeout_s=120)
    for module in modules:
        assert got[module] is not None, f"{module} never calls multihost_env.prepare()"
        before, platforms, count = got[module]
        assert not before, f"{module} imports JAX before multihost_env.prepare()"
        assert platforms == "cpu" and count in (1, devices), (module, platforms, count)


# --- 09: one v5e chip trains; 50,000 images, the sweep 128-2,048 ---------------------------


@dataclasses.dataclass(frozen=True)
class _Spec:
    """The fields of ``ladder.RungSpec`` that the sweep's ``dataclasses.replace`` sets."""

    name: str
    batch: int


def nb09_sizes(rt: SimpleNamespace, knee: int | None = None, **params: object) -> dict:
    """09's size statements for ``rt`` (sections 1, 3, 5, 8), ``knee`` what the timed sweep
    picks (default: its smallest batch); the rungs record what they would train."""
    trained: list[tuple[int, int, int]] = []  # (batch, images, labels) per sweep rung
    fed: list[tuple[int, int, int]] = []  # (images, batch, steps) of Grain's chunks

    def fit_rung(spec: _Spec, x: np.ndarray, y: np.ndarray) -> None:
        trained.append((spec.batch, len(x), len(y)))

    def grain_chunks(x: np.ndarray, y: np.ndarray, batch: int, steps: int, *, seed: int) -> None:
        fed.append((len(x), batch, steps))

    load = functools.partial(data.load_cifar10, offline=True)
    ns: dict = {**parameters(NB09), **params, "rt": rt, "np": np, "mfu": mfu}
    ns["jax"] = _devices(CHIPS if rt.accelerator == "tpu" else 1)
    ns |= {"data": SimpleNamespace(load_cifar10=load), "dataclasses": dataclasses}
    ns |= {"jax_peak": SimpleNamespace(matmul_peak=lambda n, dtype: lambda: 1e12)}
    ns |= {
        "ladder": SimpleNamespace(fit_rung=fit_rung),
        "lb": SimpleNamespace(grain_chunks=grain_chunks),
    }
    ns["static_spec"] = _Spec("2 static shapes", ns["BATCH"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(data, "make_standin", _standin)
        section_1 = code_cell(NB09, "cifar = data.load_cifar10(")
        run_statements(statements(section_1, "cpu", "cifar", "x8"), ns)
    ns["x"] = _zeros(ns["x8"].shape, np.float32)  # x8.astype("float32") / 255, no bytes
    run_statements(statements(section_1, "batches", "tpu", "peaks"), ns)
    checks = [n for n in ast.parse(section_1).body if isinstance(n, ast.Assert)]
    run_statements(checks, ns)  # its own checks
    sweep = code_cell(NB09, "sweep_images = ")
    run_statements(statements(sweep, "sweep_images", "sweep"), ns)
    ns["knee"] = ns["batches"][0] if knee is None else knee
    run_statements(statements(sweep, "steps", "whole"), ns)
    run_statements(statements(code_cell(NB09, "xs, ys = ("), "xs"), ns)
    run_statements(statements(code_cell(NB09, "alone = max("), "feed", "alone"), ns)
    return ns | {"trained": trained, "fed": fed}


def check_09(rt: SimpleNamespace, **params: object) -> dict:
    """For every knee the sweep may pick: the sweep, the rungs and Grain train whole batches
    and chunks, and every slice of the images the notebook takes lies inside them."""
    ns = nb09_sizes(rt, **params)
    for batch, images, labels in ns["trained"]:
        assert images >= batch, f"batch {batch}: the sweep trains {images} images, not one batch"
        assert images == labels == ns["sweep_images"] and images % batch == 0, (batch, images)
    assert [b for b, _, _ in ns["trained"]] == list(ns["batches"])
    for knee in ns["batches"]:
        ns = nb09_sizes(rt, knee, **params)
        steps, whole, n = ns["steps"], ns["whole"], len(ns["x"])
        assert 1 <= steps <= ns["STEPS"] and whole % (knee * steps) == 0, (knee, steps, whole)
        assert knee * steps <= whole <= n, f"knee {knee}, {steps} steps: {whole} of {n} images"
        assert ns["fed"] == [(whole, knee, steps)], ns["fed"]
        assert ns["xs"].shape == (ns["STEPS"], ns["BATCH"], 32, 32, 3)
        for array, stop in _slices(NB09, ("x", "x8", "y")):
            at = eval(stop, ns)  # noqa: S307
            assert 0 < at <= len(ns[array]), f"{array}[:{stop}] = {array}[:{at}] at knee {knee}"
    return ns


@pytest.mark.parametrize("rt", [V5E8, CPU], ids=["v5e8", "cpu"])
def test_09_trains_whole_batches_inside_its_images_at_every_knee(rt: SimpleNamespace) -> None:
    """On a TPU 50,000 images and the sweep 128-2,048; on the CPU 1,100 and 128-1,024."""
    ns = check_09(rt)
    on_tpu = rt is V5E8
    assert len(ns["x"]) == (50_000 if on_tpu else 1_100)
    assert max(ns["batches"]) == (2_048 if on_tpu else 1_024)
    assert len(ns["cifar"].x_test) == (10_000 if on_tpu else 1_000)  # every test image evaluated


def test_09_smallest_accepted_train_images_on_a_v5e8_sweeps_whole_batches() -> None:
    check_09(V5E8, TRAIN_IMAGES=_smallest(NB09, "TRAIN_IMAGES"))


def test_09_trains_one_chip_of_a_v5e8_against_one_chips_peak() -> None:
    """09 sets no Keras distribution (Keras then trains on device 0) and reads only
    ``jax.devices()[0]``; its MFU divides by one v5e chip's published peak."""
    ns = nb09_sizes(V5E8)
    one_chip = mfu.peak_flops(tpu_generation="v5e", chips=1)
    assert {d: peak() for d, peak in ns["peaks"].items()} == dict.fromkeys(mfu.DTYPES, one_chip)
    trees = [ast.parse(s) for s in code_sources(NB09)]
    calls = [ast.unparse(n.func) for t in trees for n in ast.walk(t) if isinstance(n, ast.Call)]
    parallel = [c for c in calls if "distribution" in c or c.endswith("Parallel")]
    assert not parallel, f"09 spreads its training over devices: {parallel}"
    indexed = [
        ast.unparse(n.slice)
        for t in trees
        for n in ast.walk(t)
        if isinstance(n, ast.Subscript) and ast.unparse(n.value) == "jax.devices()"
    ]
    assert indexed == ["0"] * calls.count("jax.devices"), "09 reads more than one device"


def test_09_refuses_more_steps_per_program_than_its_images_hold_by_name() -> None:
    """``x[: BATCH * STEPS]`` is section 5's first program: past the images it would reshape
    fewer images than it needs; the notebook names the parameters instead."""
    with pytest.raises(AssertionError, match="raise TRAIN_IMAGES or lower BATCH or STEPS"):
        check_09(V5E8, TRAIN_IMAGES=1_024, STEPS=16)
