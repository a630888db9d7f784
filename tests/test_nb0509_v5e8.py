"""A v5e-8 rehearsal of notebook 05's Part 1 sizes (Kaggle's free TPU: 8 chips, 128 per chip).

Framework-free and fast: the notebook's own statements, read from the stored notebook with
``ast``, run with the TPU branch's inputs (8 devices, not a CPU) and with stand-ins for what
needs JAX (``jax.device_put`` and ``data.to_float`` return their input; the images are zeros of
CIFAR-10's shape). What runs is the notebook's size logic and slicing: the global batch, the
image count, whole blocks per epoch, section 4's block, and every slice the exercise's check
takes for every ``my_k`` it accepts, so an index past the training set raises here as it would
on the chips.
"""

from __future__ import annotations

import ast
from types import SimpleNamespace

import numpy as np
import pytest

from tests.nbcells import NOTEBOOKS, code_cell, parameters, run_statements
from utils.parameters import per_replica_batch_used

NB05 = NOTEBOOKS / "05_custom_training_loop.ipynb"
V5E8 = {"n_jax": 8, "on_cpu": False}  # Kaggle's v5e-8, as JAX sees it: 8 TPU devices
CPU = {"n_jax": 8, "on_cpu": True}  # this machine: 8 simulated CPU devices


def _assigned(source: str, name: str) -> ast.Assign:
    """The top-level ``name = ...`` statement of a cell."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node
    raise LookupError(name)


def _function(source: str, name: str) -> ast.FunctionDef:
    return next(
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name
    )


def _images(n: int) -> SimpleNamespace:
    """CIFAR-10's shapes, ``n`` training images, no memory (broadcast zeros)."""
    x = np.broadcast_to(np.zeros((1, 32, 32, 3), np.uint8), (n, 32, 32, 3))
    return SimpleNamespace(x_train=x, y_train=np.zeros(n, np.uint8))


def part_1_sizes(branch: dict, **params: object) -> dict:
    """The notebook's Part 1 size statements, run for ``branch`` with its parameters."""
    ns = {**parameters(NB05), **params, **branch, "per_replica_batch_used": per_replica_batch_used}
    setup = code_cell(NB05, "jax_batch = ")
    run_statements([_assigned(setup, "jax_batch"), _assigned(setup, "jax_images")], ns)
    ns["jax_cifar"] = _images(ns["jax_images"])
    ns["steps_per_call"] = ns["JAX_STEPS_PER_EXECUTION"]
    exec(code_cell(NB05, "holds at least one call's worth of images"), ns)  # noqa: S102  (may raise)
    run_statements(
        [_assigned(code_cell(NB05, "for epoch in range(JAX_EPOCHS)"), "calls_per_epoch")], ns
    )
    ns |= {"np": np, "block_sharded": None, "data": SimpleNamespace(to_float=lambda a: a)}
    ns["jax"] = SimpleNamespace(device_put=lambda a, _sharding: a)
    run_statements(
        [_function(code_cell(NB05, "def block("), "block")], ns
    )  # the notebook's block()
    run_statements(
        [ast.parse(code_cell(NB05, "x_block, y_block = block(")).body[0]], ns
    )  # section 4's block
    return ns


def exercise_slices(ns: dict, k: int) -> list[tuple[int, ...]]:
    """The check's loop over its two calls, for ``my_k = k``: the shapes ``block`` returned."""
    problems = _function(code_cell(NB05, "def k_problems("), "k_problems")
    loop = next(
        n
        for n in ast.walk(problems)
        if isinstance(n, ast.For) and "block(" in ast.unparse(n) and "range(2)" in ast.unparse(n)
    )
    shapes: list[tuple[int, ...]] = []
    block = ns["block"]

    def recording(idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        xs, ys = block(idx, k)
        shapes.append(xs.shape)
        return xs, ys

    def step(p: object, s: object, *_: object) -> tuple:
        return p, s, None

    local = {**ns, "k": k, "block": recording, "my_steps": step, "one_step": step}
    local |= dict.fromkeys(("p_mine", "s_mine", "p_one", "s_one"))
    run_statements([loop], local)
    return shapes


@pytest.mark.parametrize("images", [None, "smallest accepted"])
def test_the_v5e8_branch_trains_every_exercise_k(images: object) -> None:
    """8 chips x 128: a global batch of 1,024; every ``my_k`` the check accepts slices within
    the training set, at the default image count and at the smallest the notebook accepts."""
    params = {}
    if images is not None:
        base = part_1_sizes(V5E8)
        params["JAX_TRAIN_IMAGES"] = base["steps_per_call"] * base["jax_batch"]
    ns = part_1_sizes(V5E8, **params)
    assert ns["jax_batch"] == 8 * 128 == 8 * per_replica_batch_used(None, on_cpu=False, devices=8)
    assert ns["calls_per_epoch"] >= 1 and ns["x_block"].shape[:2] == (ns["steps_per_call"], 1024)
    if images is None:  # the default trains more than a dozen steps on the chips
        assert ns["calls_per_epoch"] * ns["steps_per_call"] * ns["JAX_EPOCHS"] >= 100
    for k in range(1, 17):
        if k != ns["steps_per_call"]:
            assert exercise_slices(ns, k) == [(k, 1024, 32, 32, 3)] * 2, k


def test_the_cpu_branch_keeps_the_seeds_global_batch() -> None:
    ns = part_1_sizes(CPU)
    assert (ns["jax_batch"], ns["jax_images"]) == (128, 4_096)
    assert exercise_slices(ns, 16) == [(16, 128, 32, 32, 3)] * 2


def test_too_few_images_for_one_call_is_refused_by_the_notebooks_check() -> None:
    with pytest.raises(AssertionError, match="raise JAX_TRAIN_IMAGES"):
        part_1_sizes(V5E8, JAX_TRAIN_IMAGES=4 * 1024 - 1)
