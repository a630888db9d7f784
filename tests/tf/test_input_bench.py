"""Tests for utils.tf.input_bench and notebook 07's tuned chain: tf.data decodes the records as
Grain does, augments uint8 like ``utils.jax.grain_pipeline.augment_batch``, and the ladder is one
technique per step with the cache before the random augmentation."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.core.framework import graph_pb2  # noqa: E402

from tests.nbcells import NOTEBOOKS, shown_function, text  # noqa: E402
from utils.jax import grain_pipeline as gp  # noqa: E402
from utils.tf import input_bench as bp  # noqa: E402

N, BATCH, SHARDS = 40, 8, 4  # labels 0..39 name the records


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (N, 32, 32, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def files(images, tmp_path_factory) -> list[str]:
    records = [gp.encode(image, i) for i, image in enumerate(images)]
    return bp.write_tfrecords(records, str(tmp_path_factory.mktemp("tfrecords")), SHARDS)


def stages(ds: tf.data.Dataset) -> list[str]:
    """The dataset ops of ``ds``'s chain, source first (following each op's input dataset)."""
    graph = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
    nodes = {n.name: n for n in graph.node}
    node = nodes[next(n for n in graph.node if n.op == "_Retval").input[0]]
    chain = []
    while node is not None:
        chain.append(node.op)
        ups = [nodes[i.split(":")[0].lstrip("^")] for i in node.input]
        node = next((u for u in ups if "Dataset" in u.op), None)
    return chain[::-1]


def two_epochs_by_label(ds: tf.data.Dataset) -> dict[int, list[np.ndarray]]:
    """Every record's images over two epochs of one iterator (the random ops draw on)."""
    seen = defaultdict(list)
    for batch in ds.repeat(2):
        for image, label in zip(batch["image"].numpy(), batch["label"].numpy(), strict=True):
            seen[int(label)].append(image)
    return seen


def assert_augmentation_differs_across_epochs(ds: tf.data.Dataset) -> None:
    seen = two_epochs_by_label(ds)
    assert sorted(seen) == list(range(N)) and all(len(v) == 2 for v in seen.values())
    same = [label for label, (a, b) in seen.items() if np.array_equal(a, b)]
    assert not same, (
        f"records {same} came back in epoch 2 exactly as in epoch 1: a cache after the random "
        "augmentation replays one draw of crops and flips"
    )


def test_decode_reads_what_encode_wrote(images):
    records = np.array([gp.encode(im, 7 + i) for i, im in enumerate(images[:4])], dtype=object)
    ds = tf.data.Dataset.from_tensor_slices(records).map(bp.decode)
    for i, got in enumerate(ds):
        assert np.array_equal(got["image"].numpy(), images[i]) and int(got["label"]) == 7 + i


def test_tfrecord_shards_hold_every_record_once(files, images):
    assert len(files) == SHARDS
    for s, path in enumerate(files):
        labels = [int(bp.decode(r)["label"]) for r in tf.data.TFRecordDataset(path)]
        assert labels == list(range(s, N, SHARDS))


@pytest.mark.parametrize("batched", [True, False])
def test_augment_keeps_shape_dtype_and_labels(images, batched):
    example = {"image": tf.constant(images[:6]), "label": tf.range(6)}
    if not batched:
        example = {"image": example["image"][0], "label": example["label"][0]}
    out = tf.data.Dataset.from_tensors(example).map(bp.augment).get_single_element()
    assert out["image"].shape == example["image"].shape and out["image"].dtype == tf.uint8
    assert np.array_equal(out["label"].numpy(), example["label"].numpy())


def test_the_ladder_switches_on_one_technique_per_step():
    configs = [dataclasses.asdict(chain) for _, chain in bp.LADDER]
    assert not any(configs[0][k] for k in configs[0] if k != "augment"), "step 1 is the naive chain"
    for (name, _), before, after in zip(bp.LADDER[1:], configs, configs[1:], strict=False):
        changed = [k for k in before if before[k] != after[k]]
        assert len(changed) == 1 and after[changed[0]] is True, (name, changed)
    on = [k for k, v in configs[-1].items() if v]
    assert sorted(on) == sorted(configs[-1]), "the top step has every technique on"


def test_each_step_builds_a_different_chain(files):
    built = [stages(chain.build(files, BATCH, records=N)) for _, chain in bp.LADDER]
    for (name, _), before, after in zip(bp.LADDER[1:], built, built[1:], strict=False):
        assert before != after, f"{name} builds the same chain as the step before: {after}"


@pytest.mark.parametrize("name", [n for n, c in bp.LADDER if c.cache])
def test_the_cache_sits_before_the_random_augmentation(files, name):
    chain = dict(bp.LADDER)[name]
    assert_augmentation_differs_across_epochs(chain.build(files, BATCH, records=N))


def test_without_augmentation_the_chain_ships_the_decoded_images(files, images):
    chain = dataclasses.replace(bp.LADDER[-1][1], augment=False)
    seen = two_epochs_by_label(chain.build(files, BATCH, records=N))
    assert all(np.array_equal(a, images[label]) for label, v in seen.items() for a in v)


def _notebook_tuned_chain():
    (cell,) = shown_function(NOTEBOOKS / "07_tf_data_performance.ipynb", "tuned_chain")
    source = text(cell)
    namespace = {"tf": tf, "bp": bp}
    exec(source[: source.index("\nwith_tf =")], namespace)  # the definition, not its use
    return namespace["tuned_chain"]


def test_the_notebooks_tuned_chain_is_the_top_step(files):
    tuned = _notebook_tuned_chain()(files, BATCH, records=N)
    assert stages(tuned) == stages(bp.LADDER[-1][1].build(files, BATCH, records=N))


def test_the_notebooks_tuned_chain_caches_before_augmenting(files):
    assert_augmentation_differs_across_epochs(_notebook_tuned_chain()(files, BATCH, records=N))


def test_every_step_after_the_first_says_when_it_pays():
    assert list(bp.PAYS_WHEN) == [name for name, _ in bp.LADDER[1:]]
