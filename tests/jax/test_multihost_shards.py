"""Per-host input files (utils.jax.multihost_env): each process's files give it exactly its rows
of every global batch, for any process count, and together the processes read an epoch once."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from utils.jax import multihost_env  # noqa: E402


def _read(directory, rank, n, global_batch, files):
    names = sorted(p.name for p in directory.iterdir())
    mine = multihost_env.my_files(names, rank, n)
    ids = [np.load(directory / f)["ids"] for f in mine]
    slot = global_batch // files
    steps = len(ids[0]) // slot
    return [np.concatenate([i[s * slot : (s + 1) * slot] for i in ids]) for s in range(steps)]


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_each_process_reads_its_rows_and_the_epoch_exactly_once(tmp_path, n):
    images = np.arange(128 * 2, dtype=np.uint8).reshape(128, 2)
    labels = np.arange(128) % 10
    multihost_env.write_shards(tmp_path, images, labels, global_batch=32, files=8)
    per = [_read(tmp_path, r, n, 32, 8) for r in range(n)]
    for step in range(128 // 32):
        global_batch = np.concatenate([per[r][step] for r in range(n)])
        np.testing.assert_array_equal(global_batch, np.arange(step * 32, (step + 1) * 32))
    everything = np.concatenate([np.concatenate(p) for p in per])
    assert np.array_equal(np.sort(everything), np.arange(128))
    with np.load(tmp_path / "shard-00003-of-00008.npz") as z:
        np.testing.assert_array_equal(z["images"], images[z["ids"]])
        np.testing.assert_array_equal(z["labels"], labels[z["ids"]])


def test_bad_layouts_are_named(tmp_path):
    x, y = np.zeros((100, 1)), np.zeros(100)
    with pytest.raises(ValueError, match="whole number of global batches"):
        multihost_env.write_shards(tmp_path, x, y, global_batch=32, files=8)
    with pytest.raises(ValueError, match="equal slots"):
        multihost_env.write_shards(tmp_path, x[:96], y[:96], global_batch=32, files=3)
    names = [f"shard-{i:05d}-of-00008.npz" for i in range(8)]
    with pytest.raises(ValueError, match="do not split evenly over 3"):
        multihost_env.my_files(names, 0, 3)
    with pytest.raises(ValueError, match="incomplete shard set"):
        multihost_env.my_files(names[:-1], 0, 1)
    with pytest.raises(FileNotFoundError):
        multihost_env.my_files(["notes.txt"], 0, 1)
    assert multihost_env.my_files(names[::-1] + ["notes.txt"], 1, 4) == names[2:4]
